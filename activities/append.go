package activities

import (
	"context"
	"encoding/json"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// AppendBatchInput is the input of AppendBatch.
type AppendBatchInput struct {
	// Ref is the write handle.
	Ref jsonl.HandleRef `json:"ref"`
	// Events is the bounded batch, contiguous from the log's next seq.
	Events []session.Event `json:"events"`
	// Rerun marks a batch the workflow builds anew in each attempt of its
	// workflow task (a local activity's input is not recorded): the events
	// an earlier attempt stored are matched in every field but `time` and
	// not stored twice (jsonl.Handle.AppendRerun, FORMAT.md §4.6).
	Rerun bool `json:"rerun,omitempty"`
	// Reconcile marks, with Rerun, a turn's batch whose claimed inputs an
	// earlier attempt of the workflow task may have chosen otherwise: when
	// the log holds other events at its seqs, nothing is written and the
	// result's Held describes them, for the workflow to adopt
	// (jsonl.Handle.AppendReconcile, FORMAT.md §4.6, docs/DECISIONS.md
	// D77).
	Reconcile bool `json:"reconcile,omitempty"`
	// Ahead marks, with Rerun and Reconcile, the store of a batch that
	// opens a turn (its first event a turn/start): when the log holds,
	// where the batch starts, a run of events that an append stored (an
	// unrecorded attempt of the workflow task, or its local store writing
	// late) before the batch's own turn/start or the log's end, nothing is
	// written and the result's Ahead reports that run by seq and print, for
	// the workflow to keep ahead and store its batch after (AppendedRun,
	// docs/DECISIONS.md D126). A run holding an event the workflow's own
	// stores write is not such a run: it is reported as Held.
	Ahead bool `json:"ahead,omitempty"`
	// Group, when set, stores Events as a group of Appends, some of them at
	// the end (wire.AppendRequest.AtEnd), after Cursor, the workflow's
	// stored cursor: Events are the group's batches one after the other,
	// Group their lengths and kinds in order. What an earlier, unrecorded
	// attempt of the workflow task stored past Cursor is adopted, not
	// written twice (jsonl.Handle.AppendGroup, FORMAT.md §4.6); the
	// result's Placed and Unclaimed say where each batch is and which held
	// events no batch claimed. An event held past Cursor of a type the
	// workflow's own stores write (ownTypes) that no batch is stops the
	// store: nothing is written after it (a group that would write is
	// refused as SeqMismatch), and the result's NextSeq is its seq.
	Group []GroupSpan `json:"group,omitempty"`
	// Cursor is, with Group, the stored cursor the workflow knows.
	Cursor int64 `json:"cursor,omitempty"`
}

// GroupSpan is one batch of a group store (AppendBatchInput.Group).
type GroupSpan struct {
	// Len is its number of events.
	Len int `json:"len"`
	// AtEnd marks a batch the store may place at any seq at or past the
	// cursor; the others keep their seqs.
	AtEnd bool `json:"atEnd,omitempty"`
}

// MaxGroupTail bounds the events past its cursor a group store matches
// against its batches: what one or a few unrecorded attempts stored (a
// local store holds at most 256 KiB of events).
const MaxGroupTail = 8 * MaxHeld

// MaxHeld bounds the events a reconciled append reports as held: a turn's
// batch holds its own events and at most MaxPendingInputs claimed inputs
// (workflows.MaxPendingInputs, 256); a longer run of other events is
// refused as SeqMismatch.
const MaxHeld = 512

// AppendResult reports the log's next seq after an append.
type AppendResult struct {
	// NextSeq is the seq the next append must carry: for a Group store,
	// the seq where the workflow's view of the log ends (the log's end, or
	// the workflow's own event another attempt stored that stopped it).
	NextSeq int64 `json:"nextSeq"`
	// Held, for a Reconcile batch not written, describes the events the
	// log holds from the batch's first seq to NextSeq, in seq order.
	Held []HeldEvent `json:"held,omitempty"`
	// Placed is, for a Group store, the seq of each batch's first event,
	// in the group's order.
	Placed []int64 `json:"placed,omitempty"`
	// Unclaimed are, for a Group store, the events held past the cursor
	// that no batch of the group claimed, by seq and print (at most
	// MaxHeld; the marker stays small).
	Unclaimed []jsonl.HeldPrint `json:"unclaimed,omitempty"`
	// Ahead are, for an Ahead store not written, the events an append
	// stored where the batch starts, by seq and print, in seq order (at
	// most MaxHeld; the marker stays small).
	Ahead []jsonl.HeldPrint `json:"ahead,omitempty"`
}

// HeldEvent is a stored event reported instead of a reconciled batch: its
// type and data, but for a user/message only its message id (the workflow
// holds the message, or its update brings it again).
type HeldEvent struct {
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data,omitempty"`
	MessageID string          `json:"messageId,omitempty"`
}

// HeldEvents describes held for AppendResult.Held.
func HeldEvents(held []session.Event) []HeldEvent {
	out := make([]HeldEvent, len(held))
	for i, e := range held {
		out[i].Type = e.Type
		if e.Type != wire.TypeUserMessage {
			out[i].Data = e.Data
			continue
		}
		var m struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(e.Data, &m)
		out[i].MessageID = m.ID
	}
	return out
}

// StoreSeedInput is the input of StoreSeed: the fork of a parent's prefix
// into a freshly created, seeded session.
type StoreSeedInput struct {
	// Ref is the new session's write handle.
	Ref jsonl.HandleRef `json:"ref"`
	// ParentSessionID is the session whose prefix is copied.
	ParentSessionID string `json:"parentSessionId"`
	// Count is how many leading events of the parent are copied.
	Count int64 `json:"count"`
	// Now is the workflow's clock in Unix milliseconds, the marker time
	// after an empty prefix.
	Now int64 `json:"now"`
	// Events are appended after the marker in the same batch (events added
	// during setup), contiguous from Count+1.
	Events []session.Event `json:"events,omitempty"`
}

// SeedResult reports what StoreSeed stored.
type SeedResult struct {
	// NextSeq is the seq the next append must carry.
	NextSeq int64 `json:"nextSeq"`
	// LastTurn is the number of the last turn/start stored, 0 if none.
	LastTurn int64 `json:"lastTurn"`
}

// AppendBatch appends a bounded batch through a write handle. A retry of a
// batch that already landed succeeds without writing (the store's
// idempotent re-append); so does, with Rerun, a batch built again by a
// later attempt of the workflow task, whose already stored events are not
// written twice. Any other overlap is SeqMismatch.
func (a *Activities) AppendBatch(ctx context.Context, in AppendBatchInput) (AppendResult, error) {
	st, err := a.store()
	if err != nil {
		return AppendResult{}, err
	}
	defer a.runtime().Heartbeat(ctx, nil).Stop()
	h := st.Attach(in.Ref)
	if len(in.Group) > 0 {
		return appendGroup(ctx, h, in)
	}
	if in.Rerun && in.Reconcile {
		held, err := h.AppendReconcile(ctx, in.Events, MaxHeld)
		if err != nil {
			return AppendResult{}, MapError(err)
		}
		if held != nil {
			next := held[len(held)-1].Seq + 1
			if in.Ahead {
				run, err := AppendedRun(in.Events[0], held)
				if err != nil {
					return AppendResult{}, MapError(err)
				}
				if run != nil {
					return AppendResult{NextSeq: next, Ahead: run}, nil
				}
			}
			return AppendResult{NextSeq: next, Held: HeldEvents(held)}, nil
		}
	} else {
		store := h.Append
		if in.Rerun {
			store = h.AppendRerun
		}
		if err := store(ctx, in.Events); err != nil {
			return AppendResult{}, MapError(err)
		}
	}
	next := h.NextSeq()
	if n := len(in.Events); n > 0 {
		next = max(next, in.Events[n-1].Seq+1)
	}
	return AppendResult{NextSeq: next}, nil
}

// appendGroup is AppendBatch of a Group input.
func appendGroup(ctx context.Context, h *jsonl.Handle, in AppendBatchInput) (AppendResult, error) {
	batches := make([]jsonl.GroupBatch, len(in.Group))
	k := 0
	for i, g := range in.Group {
		if g.Len <= 0 || k+g.Len > len(in.Events) {
			return AppendResult{}, MapError(invalid("group store: batch %d holds %d events, %d are left", i, g.Len, len(in.Events)-k))
		}
		batches[i] = jsonl.GroupBatch{Events: in.Events[k : k+g.Len], AtEnd: g.AtEnd}
		k += g.Len
	}
	if k != len(in.Events) {
		return AppendResult{}, MapError(invalid("group store: its batches hold %d events, %d are given", k, len(in.Events)))
	}
	res, err := h.AppendGroup(ctx, in.Cursor, batches, MaxGroupTail, MaxHeld, ownTypes)
	if err != nil {
		return AppendResult{}, MapError(err)
	}
	return AppendResult{NextSeq: res.Next, Placed: res.First, Unclaimed: res.Unclaimed}, nil
}

// StoreSeed forks: it copies the first Count events of the parent session
// into the new seeded session behind Ref, followed by the {inherited:true}
// end-seed marker at seq Count and by Events, as one batch, inside the
// activity (FORMAT.md §5.4, LIFECYCLE.md §4 step 5). A retry after success appends nothing.
func (a *Activities) StoreSeed(ctx context.Context, in StoreSeedInput) (SeedResult, error) {
	st, err := a.store()
	if err != nil {
		return SeedResult{}, err
	}
	defer a.runtime().Heartbeat(ctx, nil).Stop()
	res, err := a.storeSeed(ctx, st, in)
	return res, MapError(err)
}

func (a *Activities) storeSeed(ctx context.Context, st *jsonl.Store, in StoreSeedInput) (SeedResult, error) {
	if in.Count < 0 || in.Count > wire.MaxSafeInteger {
		return SeedResult{}, invalid("fork count must be a non-negative safe integer, got %d", in.Count)
	}
	parent, err := st.Open(ctx, in.ParentSessionID, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return SeedResult{}, err
	}
	defer parent.Close(context.WithoutCancel(ctx))
	prefix, err := parent.Read(ctx, 0, in.Count)
	if err != nil {
		return SeedResult{}, err
	}
	if int64(len(prefix)) != in.Count {
		return SeedResult{}, invalid("fork of %q needs %d events, the parent has %d", in.ParentSessionID, in.Count, len(prefix))
	}
	marker, _ := session.EndSeedMarker(prefix, true, session.EndSeedTime(prefix, in.Now))
	batch := append(prefix, marker)
	batch = append(batch, in.Events...)
	if err := session.CheckContiguous(in.Ref.SessionID, 0, batch); err != nil {
		return SeedResult{}, err
	}
	if err := st.Attach(in.Ref).Append(ctx, batch); err != nil {
		return SeedResult{}, err
	}
	return SeedResult{NextSeq: int64(len(batch)), LastTurn: session.LastTurn(batch)}, nil
}
