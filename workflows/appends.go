package workflows

import (
	"bytes"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// appendQueue is the live phase's queue of accepted appends: the batches
// accepted and not yet stored, the group commit or coalescing window that
// stores them, and the Append requests decoded by the validator for their
// handler. The stores it runs move the stored log's cursor (storedLog).
// Only its methods write its fields.
type appendQueue struct {
	*env
	log *storedLog

	pending       []*appendItem
	pendingEvents int64
	timerRunning  bool
	// flushDue says a store of the pending appends is due (flush).
	flushDue bool
	// decoded holds the Append requests the validator decoded, by update
	// id, until their handler takes them.
	decoded decodedRequests[AppendRequest]
}

// appendItem is one accepted Append waiting to be stored. next is its
// own outcome: the seq after its last event once stored, the cursor when
// it failed.
type appendItem struct {
	events []session.Event
	bytes  int
	done   bool
	err    error
	next   int64
}

// end is the seq after the item's last event.
func (it *appendItem) end() int64 {
	return it.events[len(it.events)-1].Seq + 1
}

// accepted is the seq after the accepted events, stored or not: where the
// next Append continues.
func (q *appendQueue) accepted() int64 {
	return q.log.nextSeq + q.pendingEvents
}

// expected is the seq a batch starting at first must continue: the
// accepted events' end, or first itself for a batch wholly below the stored
// cursor (an idempotent retry the store verifies).
func (q *appendQueue) expected(events []session.Event) int64 {
	expected := q.accepted()
	first := events[0].Seq
	if first < q.log.nextSeq && first+int64(len(events)) <= q.log.nextSeq {
		expected = first
	}
	return expected
}

// waiting reports whether accepted appends wait to be stored.
func (q *appendQueue) waiting() bool {
	return len(q.pending) > 0
}

// append queues the batch and returns once it is durably stored. A batch
// below the stored cursor is re-appended on its own: the store accepts it
// only if it is exactly what is stored.
func (q *appendQueue) append(ctx workflow.Context, req AppendRequest) (wire.AppendResult, error) {
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	first := req.Events[0].Seq
	if first < q.log.nextSeq {
		n, _ := batchBytes(req.Events)
		_, err := q.store(hctx, req.Events, n)
		return wire.AppendResult{NextSeq: q.log.nextSeq}, err
	}
	n, _ := batchBytes(req.Events)
	item := &appendItem{events: req.Events, bytes: n}
	q.pending = append(q.pending, item)
	q.pendingEvents += int64(len(req.Events))
	if q.groupCommit() {
		// Stored at once unless a store is in flight; what arrives while
		// one runs is stored together by the next (flushOnce re-arms).
		q.flushDue = true
	} else {
		q.startTimer()
	}
	if err := workflow.Await(hctx, func() bool { return item.done }); err != nil {
		return wire.AppendResult{}, err
	}
	return wire.AppendResult{NextSeq: item.next}, item.err
}

// groupCommit reports whether appends are group-committed: in runs that
// took the change, when the request sets no window. A request with an
// explicit window keeps the timer.
func (q *appendQueue) groupCommit() bool {
	if q.options != nil && q.options.AppendWindowMs > 0 {
		return false
	}
	return q.gates.taken(q.dctx, groupCommitChange)
}

// startTimer opens the coalescing window unless one is open.
func (q *appendQueue) startTimer() {
	if q.timerRunning {
		return
	}
	q.timerRunning = true
	window := q.set.window
	workflow.Go(q.dctx, func(gctx workflow.Context) {
		_ = workflow.NewTimer(gctx, window).Get(gctx, nil)
		q.timerRunning = false
		q.flushDue = true
	})
}

// flush runs the store that is due (or asked for): flushOnce.
func (q *appendQueue) flush() {
	q.flushDue = false
	_ = q.flushOnce()
}

// drain stores every pending append, and returns the first failure.
func (q *appendQueue) drain() error {
	var drainErr error
	for len(q.pending) > 0 {
		if err := q.flushOnce(); err != nil && drainErr == nil {
			drainErr = err
		}
	}
	return drainErr
}

// flushOnce stores the oldest pending appends, up to the batch limit, with
// one activity. A failure fails every pending append (the later ones could
// only fail their seq check) and rewinds the accepted cursor.
func (q *appendQueue) flushOnce() error {
	if len(q.pending) == 0 {
		return nil
	}
	take, size := 0, 0
	var events []session.Event
	for take < len(q.pending) {
		it := q.pending[take]
		if take > 0 && size+it.bytes > q.set.maxBatchBytes {
			break
		}
		size += it.bytes
		events = append(events, it.events...)
		take++
	}
	res, err := q.store(q.dctx, events, size)
	if err != nil && take > 1 && refused(err) && q.gates.taken(q.dctx, appendApartChange) {
		// The store refused the group: each batch is stored on its own, so
		// that a refused batch fails with its own refusal.
		return q.storeApart(take)
	}
	if err != nil {
		for _, it := range q.pending {
			it.done, it.err, it.next = true, err, q.log.nextSeq
		}
		q.pending, q.pendingEvents = nil, 0
		return err
	}
	q.log.stored(res.NextSeq, events)
	q.pendingEvents -= int64(len(events))
	for _, it := range q.pending[:take] {
		it.done, it.next = true, it.end()
	}
	q.pending = q.pending[take:]
	if len(q.pending) > 0 {
		q.flushDue = true
	}
	return nil
}

// storeApart stores the first take pending batches one by one, in order,
// after the store refused them together: a batch the store refuses fails
// with its own refusal, the batches before it are stored, and a batch
// after it is stored if it still continues the log (its caller chose its
// seqs, so one that continued the refused batch fails its seq check).
// The accepted cursor counts only what may still be stored.
func (q *appendQueue) storeApart(take int) error {
	var first error
	for _, it := range q.pending[:take] {
		q.pendingEvents -= int64(len(it.events))
		res, err := q.store(q.dctx, it.events, it.bytes)
		if err != nil {
			it.done, it.err, it.next = true, err, q.log.nextSeq
			if first == nil {
				first = err
			}
			continue
		}
		q.log.stored(res.NextSeq, it.events)
		it.done, it.next = true, it.end()
	}
	q.pending = q.pending[take:]
	if len(q.pending) > 0 {
		q.flushDue = true
	}
	return first
}

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
func (q *appendQueue) awaitTwin(ctx workflow.Context, it *appendItem) (wire.AppendResult, error) {
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(hctx, func() bool { return it.done }); err != nil {
		return wire.AppendResult{}, err
	}
	return wire.AppendResult{NextSeq: it.next}, it.err
}

// LocalAppendMaxBytes is the largest batch, in encoded bytes, stored with
// the local activity; a larger batch goes to the AppendBatch activity
// (docs/DECISIONS.md D45).
const LocalAppendMaxBytes = 256 << 10

// Bounds of one local store attempt: half the workflow task timeout, so a
// store that does not answer in time leaves the task time to complete and
// hand the batch to the activity (docs/DECISIONS.md D46).
const (
	minLocalAppendTimeout = time.Second
	maxLocalAppendTimeout = 5 * time.Second
)

// store stores a live-phase batch: with one attempt of the local
// activity where it fits (storeLocally), falling back to the AppendBatch
// activity when that attempt fails on anything but a refusal of the batch
// (a timeout, a retryable I/O error, a worker without the store
// activities). The store's idempotent re-append makes the second try safe
// whether or not the first landed.
func (q *appendQueue) store(ctx workflow.Context, events []session.Event, bytes int) (activities.AppendResult, error) {
	in := activities.AppendBatchInput{Ref: *q.log.ref, Events: events}
	var res activities.AppendResult
	if q.storeLocally(bytes) {
		// A local activity runs again when its workflow task is retried,
		// with the batch grouped anew (group commit): Rerun stores once what
		// the earlier attempt stored (FORMAT.md §4.6).
		local := in
		local.Rerun = true
		err := workflow.ExecuteLocalActivity(q.actLocal(q.set.localStoreCtx(ctx), eventsLabel(len(events))), wire.AppendBatchName, local).Get(ctx, &res)
		if err == nil || refused(err) {
			return res, unwrapActivity(err)
		}
		workflow.GetLogger(ctx).Warn("local append failed; storing with the activity", "SessionID", q.id, "Error", err)
	}
	err := workflow.ExecuteActivity(q.act(q.set.storeCtx(ctx), eventsLabel(len(events))), acts.AppendBatch, in).Get(ctx, &res)
	return res, unwrapActivity(err)
}

// storeLocally reports whether a batch of the given size is stored with the
// local activity: in runs that took the change, unless the session's
// options ask for the activity, route the store activities to another task
// queue (whose workers hold the store), or the batch is larger than
// LocalAppendMaxBytes.
func (q *appendQueue) storeLocally(bytes int) bool {
	if !q.gates.taken(q.dctx, localAppendChange) || bytes > LocalAppendMaxBytes {
		return false
	}
	if q.options != nil && q.options.ActivityAppends {
		return false
	}
	return q.storesOnOwnQueue()
}

// localStoreCtx returns ctx with the options of the local append: one
// attempt bounded by localAppendTimeout (a failure falls back to the
// activity, which retries with the session's policy).
func (s settings) localStoreCtx(ctx workflow.Context) workflow.Context {
	timeout := s.localAppendTimeout(ctx)
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: timeout,
		StartToCloseTimeout:    timeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// localAppendTimeout is half the run's workflow task timeout, within
// [minLocalAppendTimeout, maxLocalAppendTimeout] and never above the
// session's activity timeout.
func (s settings) localAppendTimeout(ctx workflow.Context) time.Duration {
	t := workflow.GetInfo(ctx).WorkflowTaskTimeout / 2
	t = min(max(t, minLocalAppendTimeout), maxLocalAppendTimeout)
	return min(t, s.timeout)
}

// refused reports whether err is the store's refusal of the batch (a
// non-retryable application error), which the activity would only repeat.
func refused(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable()
}
