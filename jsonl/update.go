package jsonl

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// UpdateFunc decides what an Update appends. tail holds the stored events
// from the seq Update was given to the end of the log, and next is the seq
// the first returned event must carry. tail belongs to the store: fn must
// neither modify nor retain it. Returning no events appends nothing; an
// error aborts the Update and is returned as it is.
type UpdateFunc func(tail []session.Event, next int64) ([]session.Event, error)

// Update reads the log from seq from to its end and appends what fn returns,
// as one operation: no other writer (in this process or another one holding
// the same write handle, such as a retried activity attempt) can append
// between the read and the append. It runs under the same per-operation
// lock and lease check as Append, refreshes the handle's view of the log
// first (so it is correct when another process appended since), validates
// the batch as Append does (FORMAT.md §1.5, §4.6), appends it durably (one
// write and fsync, rolled back on failure) and returns the log's next seq
// afterwards.
//
// fn runs while the session is locked: it must be quick and must not call
// the store. from must not lie beyond the end of the log.
func (h *Handle) Update(ctx context.Context, from int64, fn UpdateFunc) (int64, error) {
	id := h.ref.SessionID
	if h.state().closed.Load() {
		return 0, handleClosed(id, "update")
	}
	if h.ref.Access != AccessWrite {
		return 0, readOnly(id, "update")
	}
	if from < 0 || from > wire.MaxSafeInteger {
		return 0, invalidArgument(id, fmt.Errorf("update offset must be a non-negative safe integer, got %d", from))
	}
	if fn == nil {
		return 0, invalidArgument(id, errors.New("update needs a function"))
	}
	s := h.s
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return 0, err
	}
	defer unlock()
	st, err := h.writer(ctx, "update")
	if err != nil {
		return 0, err
	}
	var next int64
	wrote := false
	err = s.withWriterLease(ctx, st, func() error {
		if err := s.refresh(st); err != nil {
			return err
		}
		var events []session.Event
		if st.materialized {
			if st.primed == nil {
				if err := s.loadFile(st); err != nil {
					return err
				}
			}
			events = st.primed
		}
		next = st.cursor
		if int64(len(events)) != st.cursor {
			return &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: st.path, Message: fmt.Sprintf(
				"session %q: the log read holds %d events but its cursor is %d", id, len(events), st.cursor)}
		}
		if from > next {
			return invalidArgument(id, fmt.Errorf("update offset %d lies beyond the end of the log (next seq %d)", from, next))
		}
		out, err := fn(events[from:len(events):len(events)], next)
		if err != nil {
			return err
		}
		if len(out) == 0 {
			return nil
		}
		batch, err := session.SnapshotBatch(out)
		if err != nil {
			return invalidArgument(id, err)
		}
		spellFor(st.header, batch)
		if err := s.appendChecked(ctx, st, batch); err != nil {
			return err
		}
		next, wrote = st.cursor, true
		return nil
	})
	if err != nil {
		return 0, err
	}
	if wrote {
		s.touchSummary(st.dir)
	}
	return next, nil
}
