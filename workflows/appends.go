package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/session"
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

// appendItem is one accepted Append waiting to be stored.
type appendItem struct {
	events []session.Event
	bytes  int
	done   bool
	err    error
	next   int64
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
func (q *appendQueue) append(ctx workflow.Context, req AppendRequest) (AppendResult, error) {
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	first := req.Events[0].Seq
	if first < q.log.nextSeq {
		n, _ := batchBytes(req.Events)
		_, err := q.store(hctx, req.Events, n)
		return AppendResult{NextSeq: q.log.nextSeq}, err
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
		return AppendResult{}, err
	}
	return AppendResult{NextSeq: item.next}, item.err
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
		it.done, it.next = true, q.log.nextSeq
	}
	q.pending = q.pending[take:]
	if len(q.pending) > 0 {
		q.flushDue = true
	}
	return nil
}
