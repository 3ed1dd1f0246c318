package activities

import (
	"context"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
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
}

// AppendResult reports the log's next seq after an append.
type AppendResult struct {
	// NextSeq is the seq the next append must carry.
	NextSeq int64 `json:"nextSeq"`
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
	stop := a.heartbeat(ctx)
	defer stop()
	h := st.Attach(in.Ref)
	store := h.Append
	if in.Rerun {
		store = h.AppendRerun
	}
	if err := store(ctx, in.Events); err != nil {
		return AppendResult{}, MapError(err)
	}
	next := h.NextSeq()
	if n := len(in.Events); n > 0 {
		next = max(next, in.Events[n-1].Seq+1)
	}
	return AppendResult{NextSeq: next}, nil
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
	stop := a.heartbeat(ctx)
	defer stop()
	res, err := a.storeSeed(ctx, st, in)
	return res, MapError(err)
}

func (a *Activities) storeSeed(ctx context.Context, st *jsonl.Store, in StoreSeedInput) (SeedResult, error) {
	if in.Count < 0 || in.Count > session.MaxSafeInteger {
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
