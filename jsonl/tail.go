package jsonl

import (
	"context"

	"github.com/sessionflow/sessionflow/session"
)

// Tail returns the events of the log from seq from to its end, and the log's
// next seq, as Update would give them to its function: read under the
// session's lock and the lease check, after re-reading what another process
// holding the handle appended. Unlike Update it returns them, so that the
// caller works on them with no lock held (FORMAT.md §7.5).
//
// The events are the handle's view of the log, not a copy: the store never
// changes an event it holds (an append extends the log beyond the capacity
// of the returned slice, a re-read replaces the whole view), so they stay
// as they are after Tail returns, and two calls that saw the same stored
// event return the same bytes. The caller must not modify them. A caller
// that decides from them what to append must check, in the Update that
// appends, that the log still continues what it read. Tail needs a write
// handle; from must not lie beyond the end of the log.
func (h *Handle) Tail(ctx context.Context, from int64) ([]session.Event, int64, error) {
	var tail []session.Event
	next, err := h.Update(ctx, from, func(events []session.Event, _ int64) ([]session.Event, error) {
		// Update gives events with their capacity cut at their length.
		tail = events
		return nil, nil
	})
	if err != nil {
		return nil, 0, err
	}
	return tail, next, nil
}
