package jsonl

import (
	"context"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// ReadEvents reads session id's stored events [from, to) (to -1 for the
// end) through a read handle, as the plain envelopes a client reads
// (wire.Event): the store is the client's EventReader.
func (s *Store) ReadEvents(ctx context.Context, id string, from, to int64) ([]wire.Event, error) {
	h, err := s.Open(ctx, id, AccessRead, OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer h.Close(ctx)
	n := int64(-1)
	if to >= 0 {
		n = to - from
	}
	evs, err := h.Read(ctx, from, n)
	if err != nil {
		return nil, err
	}
	return session.WireEvents(evs), nil
}
