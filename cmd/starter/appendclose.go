package main

import (
	"context"
	"fmt"

	"github.com/sessionflow/sessionflow/jsonl"
)

// closeAfterAppend reports a close that failed after every event of the
// input was stored. When the write lease is released all the same, what
// failed is the close's bookkeeping (the record that the handle id is
// revoked, which only matters to a late open of that handle id, and this
// process made the only one): the data and the session are in their final
// state, so the command succeeds and warns. A lease still held is an error
// that says what is stored and how to release it.
func closeAfterAppend(ctx context.Context, a *app, st *jsonl.Store, h *jsonl.Handle, n int64, cerr error) error {
	id := h.Ref().SessionID
	l, lerr := st.LeaseOf(ctx, id)
	if lerr == nil && (l == nil || l.HandleID != h.Ref().HandleID) {
		fmt.Fprintf(a.stderr, "starter: warning: session %q: all %d events are stored and the write lease is released, but closing the handle reported: %v\n", id, n, cerr)
		_, err := fmt.Fprintf(a.stdout, "appended %d events to session %q\n", n, id)
		return err
	}
	return fmt.Errorf("close: %w (all %d events are stored, but the write lease may still be held; release it with `starter log unlock --id %q --force`)", cerr, n, id)
}
