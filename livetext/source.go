package livetext

import (
	"context"
	"iter"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// Source follows the live text of the sessions of a store: any process
// that sees the store root, the worker's or another. It satisfies
// client.LiveSource.
type Source struct {
	// Store is the session store; a session's directory is found by its
	// id lookup.
	Store *jsonl.Store
	// Options tune each Follow.
	Options Options
}

// FollowLive follows the live text of session id (Follow). An unknown
// session is the store's ErrNotFound, yielded as the sequence's only
// element.
func (s Source) FollowLive(ctx context.Context, id string) iter.Seq2[wire.LiveEvent, error] {
	return func(yield func(wire.LiveEvent, error) bool) {
		dir, err := s.Store.SessionDir(ctx, id)
		if err != nil {
			yield(wire.LiveEvent{}, err)
			return
		}
		for e, err := range Follow(ctx, dir, s.Options) {
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}
