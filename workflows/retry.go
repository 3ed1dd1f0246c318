package workflows

import (
	"bytes"

	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/session"
)

// An Append whose outcome the client did not learn (its call timed out
// while no worker ran the session, say) may still be accepted later; the
// client's retry of the same batch must then succeed rather than fail its
// seq check. A batch below the stored cursor already does (the store
// verifies it); a batch identical to one accepted and not yet stored is
// accepted too, and answered with the outcome of the batch it repeats.

// twin returns the accepted, not yet stored Append whose batch is
// exactly events, or nil.
func (q *appendQueue) twin(events []session.Event) *appendItem {
	if len(events) == 0 {
		return nil
	}
	for _, it := range q.pending {
		if sameBatch(it.events, events) {
			return it
		}
	}
	return nil
}

// sameBatch reports whether two batches hold the same events, compared in
// their canonical encoding.
func sameBatch(a, b []session.Event) bool {
	if len(a) != len(b) || a[0].Seq != b[0].Seq {
		return false
	}
	for i := range a {
		x, xerr := a[i].MarshalJSON()
		y, yerr := b[i].MarshalJSON()
		if xerr != nil || yerr != nil || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// awaitTwin answers a repeated batch with the outcome of the batch it
// repeats.
func (q *appendQueue) awaitTwin(ctx workflow.Context, it *appendItem) (AppendResult, error) {
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(hctx, func() bool { return it.done }); err != nil {
		return AppendResult{}, err
	}
	return AppendResult{NextSeq: it.next}, it.err
}
