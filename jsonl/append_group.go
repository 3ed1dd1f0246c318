package jsonl

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// GroupBatch is one batch of a group store (Handle.AppendGroup).
type GroupBatch struct {
	// Events are the batch's events, numbered where the caller placed
	// them.
	Events []session.Event
	// AtEnd marks a batch whose seqs are the store's to choose: it is
	// stored, or found, anywhere at or past the cursor. Other batches keep
	// their seqs.
	AtEnd bool
}

// HeldPrint identifies a stored event that no batch of a group store
// claimed: its seq and its print (session.Print).
type HeldPrint struct {
	Seq   int64  `json:"seq"`
	Print string `json:"print"`
}

// GroupStored reports what a group store did.
type GroupStored struct {
	// First is, per batch in the group's order, the seq of its first
	// event where the log holds it.
	First []int64
	// Unclaimed are the events the log held past the cursor that no batch
	// claimed, in seq order.
	Unclaimed []HeldPrint
	// Adopted counts the batches (whole or a head) found already stored.
	Adopted int
	// Written counts the events written; 0 when the log held the group.
	Written int
	// Next is the seq the caller's view of the log continues at: the
	// log's end or, when a held event of a barrier type no batch claimed
	// stopped the store, that event's seq (AppendGroup).
	Next int64
}

// AppendGroup durably stores a group of batches at the end of the log,
// for a caller whose view of the log ends at cursor and whose earlier,
// unrecorded run may have stored some of the group's batches already, in
// another order or grouping (FORMAT.md §4.6): a session workflow's local
// store of the Appends a workflow task admitted, which a retried task
// admits in another order.
//
// When the log ends at cursor, the batches are written in order, by one
// write and one fsync, the AtEnd batches numbered from where the batches
// before them end. Otherwise the events held past the cursor (at most
// maxTail) are matched first: a batch whose caller chose its seqs is
// adopted where the log holds it at those seqs (equal but for `time`, as
// AppendRerun); an AtEnd batch is adopted at the first run of unclaimed
// held events equal to its events in every field but seq, `time`
// included (the caller stamps it, the same in every run); the held run
// may end with the head of an AtEnd batch (a write cut short and repaired
// to whole lines), which is adopted and completed. The batches not found
// are written after the log's end, in the group's order. Held events no
// batch claimed stay where they are and are reported by print (at most
// maxUnclaimed). A seq-chosen batch that neither is held nor continues
// what is written, more than maxTail held events or more than
// maxUnclaimed unclaimed are SeqMismatch, and nothing is written.
//
// barrier names the types of events that the caller's own stores write
// and that an earlier or concurrent run of the caller may have stored past
// its cursor (a session workflow's turn/start, say): such an event held
// and claimed by no batch is another run's, and nothing may be written
// after it. A group that would write is then SeqMismatch, and nothing is
// written (the late store of an abandoned run lands there); a group the
// log holds whole is reported found, its view of the log ending at the
// first such event (GroupStored.Next) and its unclaimed events only those
// before it.
func (h *Handle) AppendGroup(ctx context.Context, cursor int64, batches []GroupBatch, maxTail, maxUnclaimed int, barrier []string) (GroupStored, error) {
	id := h.ref.SessionID
	if h.state().closed.Load() {
		return GroupStored{}, handleClosed(id, "append")
	}
	snaps := make([][]session.Event, len(batches))
	for i, b := range batches {
		snap, err := session.SnapshotBatch(b.Events)
		if err != nil {
			return GroupStored{}, invalidArgument(id, fmt.Errorf("batch %d of the group: %w", i, err))
		}
		if len(snap) == 0 {
			return GroupStored{}, invalidArgument(id, fmt.Errorf("batch %d of the group is empty", i))
		}
		snaps[i] = snap
	}
	if h.ref.Access != AccessWrite {
		return GroupStored{}, readOnly(id, "append")
	}
	if len(snaps) == 0 {
		return GroupStored{}, nil
	}
	s := h.s
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return GroupStored{}, err
	}
	defer unlock()
	st, err := h.writer(ctx, "append")
	if err != nil {
		return GroupStored{}, err
	}
	var out GroupStored
	err = s.withWriterLease(ctx, st, func() error {
		if err := s.refresh(st); err != nil {
			return err
		}
		for _, b := range snaps {
			spellFor(st.header, b)
		}
		plan, err := s.planGroup(st, cursor, snaps, batches, maxTail, maxUnclaimed, barrier)
		if err != nil {
			return err
		}
		out = plan.stored
		if len(plan.write) == 0 {
			return nil
		}
		if err := s.appendChecked(ctx, st, plan.write); err != nil {
			return err
		}
		out.Written = len(plan.write)
		return nil
	})
	if err != nil {
		return GroupStored{}, err
	}
	if out.Written > 0 {
		s.touchSummary(st.dir)
	}
	return out, nil
}

// groupPlan is what a group store writes and reports.
type groupPlan struct {
	stored GroupStored
	write  []session.Event
}

// planGroup matches the group against the events held past cursor and
// returns what to write (AppendGroup). batches gives each snapshot's
// AtEnd, barrier the types after whose unclaimed events nothing is
// written.
func (s *Store) planGroup(st *handleState, cursor int64, snaps [][]session.Event, batches []GroupBatch, maxTail, maxUnclaimed int, barrier []string) (groupPlan, error) {
	id := st.ref.SessionID
	end := st.cursor
	mismatch := func(format string, args ...any) error {
		return &wire.StoreError{Code: CodeSeqMismatch, SessionID: id, Message: fmt.Sprintf("append seq mismatch for %q: ", id) + fmt.Sprintf(format, args...)}
	}
	if cursor < 0 || cursor > end {
		return groupPlan{}, mismatch("the group follows seq %d, the log ends at %d", cursor, end)
	}
	if end-cursor > int64(maxTail) {
		return groupPlan{}, mismatch("%d events are stored past seq %d, more than the %d a group store matches", end-cursor, cursor, maxTail)
	}
	var tail []session.Event
	if end > cursor {
		stored, err := s.storedEvents(st)
		if err != nil {
			return groupPlan{}, err
		}
		if int64(len(stored)) < end {
			return groupPlan{}, mismatch("the log holds %d events, its cursor is %d", len(stored), end)
		}
		tail = stored[cursor:end]
	}
	plan := groupPlan{stored: GroupStored{First: make([]int64, len(snaps)), Next: end}}
	claimed := make([]bool, len(tail))
	placed := make([]bool, len(snaps))
	// held is, per batch, how many of its leading events the log holds
	// (the others are written).
	held := make([]int, len(snaps))

	// Batches whose callers chose their seqs: held at those seqs, or not.
	for i, b := range snaps {
		if batches[i].AtEnd {
			continue
		}
		first := b[0].Seq
		plan.stored.First[i] = first
		if first >= end {
			continue
		}
		if first < cursor {
			return groupPlan{}, mismatch("batch %d starts at seq %d, below the group's cursor %d", i, first, cursor)
		}
		n, err := s.storedMatch(st, b, true)
		if err != nil {
			return groupPlan{}, err
		}
		if n == 0 {
			continue // refused when written: its seqs do not continue the log
		}
		for k := range n {
			claimed[first-cursor+int64(k)] = true
		}
		held[i], placed[i] = n, n == len(b)
		plan.stored.Adopted++
	}

	// AtEnd batches: found in the unclaimed held events, by content.
	if len(tail) > 0 {
		keys := make([][]byte, len(tail))
		for k, e := range tail {
			key, err := session.PrintKey(e)
			if err != nil {
				return groupPlan{}, err
			}
			keys[k] = key
		}
		bkeys := make([][][]byte, len(snaps))
		for i, b := range snaps {
			if !batches[i].AtEnd {
				continue
			}
			bkeys[i] = make([][]byte, len(b))
			for k, e := range b {
				key, err := session.PrintKey(e)
				if err != nil {
					return groupPlan{}, invalidArgument(id, err)
				}
				bkeys[i][k] = key
			}
		}
		for p := 0; p < len(tail); {
			i, n := matchAt(keys, claimed, p, bkeys, placed)
			if i < 0 {
				p++
				continue
			}
			for k := range n {
				claimed[p+k] = true
			}
			plan.stored.First[i] = cursor + int64(p)
			held[i], placed[i] = n, n == len(snaps[i])
			plan.stored.Adopted++
			p += n
		}
	}

	// The rest is written after the log's end: the rest of a held head
	// first (it continues it), then the group's other batches in order.
	w := end
	for i, b := range snaps {
		if held[i] == 0 || placed[i] {
			continue
		}
		rest := session.CloneEvents(b[held[i]:])
		if batches[i].AtEnd {
			for k := range rest {
				rest[k].Seq = plan.stored.First[i] + int64(held[i]+k)
			}
		}
		plan.write = append(plan.write, rest...)
		w += int64(len(rest))
		placed[i] = true
	}
	for i, b := range snaps {
		if placed[i] {
			continue
		}
		rest := session.CloneEvents(b)
		if batches[i].AtEnd {
			for k := range rest {
				rest[k].Seq = w + int64(k)
			}
			plan.stored.First[i] = w
		}
		plan.write = append(plan.write, rest...)
		w += int64(len(rest))
	}
	plan.stored.Next = w
	// The first held event of a barrier type that no batch claimed:
	// another run's own; nothing is written after it, and the caller's view
	// of the log ends there.
	stop := len(tail)
	for k, c := range claimed {
		if !c && slices.Contains(barrier, tail[k].Type) {
			stop = k
			break
		}
	}
	if stop < len(tail) {
		if len(plan.write) > 0 {
			return groupPlan{}, mismatch("the %s stored at seq %d past the group's cursor is no batch's: nothing is written after it", tail[stop].Type, tail[stop].Seq)
		}
		plan.stored.Next = tail[stop].Seq
	}
	for k, c := range claimed[:stop] {
		if c {
			continue
		}
		pr, err := session.Print(tail[k])
		if err != nil {
			return groupPlan{}, err
		}
		plan.stored.Unclaimed = append(plan.stored.Unclaimed, HeldPrint{Seq: tail[k].Seq, Print: pr})
	}
	if len(plan.stored.Unclaimed) > maxUnclaimed {
		return groupPlan{}, mismatch("%d events stored past seq %d are no batch's, more than %d", len(plan.stored.Unclaimed), cursor, maxUnclaimed)
	}
	return plan, nil
}

// matchAt returns the first unplaced AtEnd batch (by its keys; nil for
// the others) whose events equal the unclaimed held events from p, and
// how many of them are held: all of them or, failing that, where the held
// events end before the batch does, the head they hold. It returns -1
// when none does.
func matchAt(keys [][]byte, claimed []bool, p int, bkeys [][][]byte, placed []bool) (int, int) {
	for _, whole := range []bool{true, false} {
		for i, b := range bkeys {
			if b == nil || placed[i] {
				continue
			}
			n := min(len(b), len(keys)-p)
			if whole != (n == len(b)) {
				continue
			}
			if heldRun(keys, claimed, p, b[:n]) {
				return i, n
			}
		}
	}
	return -1, 0
}

// heldRun reports whether the held events from p are unclaimed and equal
// to want, key by key.
func heldRun(keys [][]byte, claimed []bool, p int, want [][]byte) bool {
	for k, w := range want {
		if claimed[p+k] || !bytes.Equal(keys[p+k], w) {
			return false
		}
	}
	return true
}
