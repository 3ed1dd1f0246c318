package workflows

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
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
	// ahead are the stored events no Append has claimed yet, by seq and
	// print, in seq order: what an unrecorded attempt of a workflow task
	// stored for AtEnd Appends this run has not admitted yet (a group
	// store reports them, and a turn's opening store those where its
	// turn/start goes). An AtEnd Append whose batch they hold is
	// answered with their seqs (claimAhead). At most maxAppendsAhead,
	// carried across continue-as-new.
	ahead []jsonl.HeldPrint
	// answered are the latest AtEnd Appends answered, by update id, with
	// the seq after their batch, oldest first: the server knows an update's
	// id only within its run, and delivers one that a run accepted and
	// completed again to the run it continued as (or a client sends it
	// again under its id), which must not store it twice (rememberAtEnd).
	// At most maxAnsweredAtEnd, carried across continue-as-new.
	answered []AnsweredAppend
}

// AnsweredAppend is an Append at the end that a run answered: its update
// id and the seq after its batch.
type AnsweredAppend struct {
	ID      string `json:"id"`
	NextSeq int64  `json:"nextSeq"`
}

// maxAnsweredAtEnd bounds appendQueue.answered (the oldest go first), as
// D77 bounds the inputs a loop remembers.
const maxAnsweredAtEnd = 1024

// maxAppendsAhead bounds appendQueue.ahead (the oldest go first): two
// group stores' worth of unclaimed events (activities.MaxHeld each).
const maxAppendsAhead = 2 * activities.MaxHeld

// appendItem is one accepted Append waiting to be stored. next is its
// own outcome: the seq after its last event once stored, the cursor when
// it failed.
type appendItem struct {
	events []session.Event
	bytes  int
	// atEnd marks a batch the session numbers (AppendRequest.AtEnd): its
	// seqs are provisional until stored, where the group store places it.
	atEnd bool
	done  bool
	err   error
	next  int64
}

// atEnd returns a copy of events numbered from the accepted cursor: where
// an AtEnd batch goes unless its store finds it elsewhere.
func (q *appendQueue) atEnd(events []session.Event) []session.Event {
	out := slices.Clone(events)
	renumber(out, q.accepted())
	return out
}

// renumber numbers events from first, in place.
func renumber(events []session.Event, first int64) {
	for i := range events {
		events[i].Seq = first + int64(i)
	}
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
		if err == nil {
			q.dropAhead(first, first+int64(len(req.Events)))
		}
		return wire.AppendResult{NextSeq: q.log.nextSeq}, err
	}
	n, _ := batchBytes(req.Events)
	item := &appendItem{events: req.Events, bytes: n, atEnd: req.AtEnd}
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

// appendAtEnd is the Append handler of an AtEnd batch: answered with the
// seqs of the stored events it is (claimAhead), or numbered from the
// accepted cursor, queued and answered where its store placed it. Runs
// that took atEndAppendChange only: earlier builds refused the request
// (its atEnd field unknown) before accepting it.
func (q *appendQueue) appendAtEnd(ctx workflow.Context, req AppendRequest) (wire.AppendResult, error) {
	if !q.gates.taken(q.dctx, atEndAppendChange) {
		return wire.AppendResult{NextSeq: q.log.nextSeq}, invalidArgument("this session's run does not append at the end")
	}
	id := workflow.GetCurrentUpdateInfo(ctx).ID
	if i := slices.IndexFunc(q.answered, func(a AnsweredAppend) bool { return a.ID == id }); i >= 0 {
		return wire.AppendResult{NextSeq: q.answered[i].NextSeq}, nil
	}
	if next, ok := q.claimAhead(req.Events); ok {
		q.rememberAtEnd(id, next)
		return wire.AppendResult{NextSeq: next}, nil
	}
	req.Events = q.atEnd(req.Events)
	res, err := q.append(ctx, req)
	if err == nil {
		q.rememberAtEnd(id, res.NextSeq)
	}
	return res, err
}

// rememberAtEnd records that the AtEnd Append of update id was answered
// with next, keeping the latest maxAnsweredAtEnd.
func (q *appendQueue) rememberAtEnd(id string, next int64) {
	q.answered = append(q.answered, AnsweredAppend{ID: id, NextSeq: next})
	if n := len(q.answered); n > maxAnsweredAtEnd {
		q.answered = slices.Clone(q.answered[n-maxAnsweredAtEnd:])
	}
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
	group := q.pending[:take]
	if slices.ContainsFunc(group, func(it *appendItem) bool { return it.atEnd }) {
		return q.storeGroup(group, events, size)
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
	q.dropAhead(events[0].Seq, res.NextSeq)
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
		if it.done {
			continue // claimed from ahead by a store before it
		}
		if it.atEnd {
			renumber(it.events, q.log.nextSeq)
			if err := q.placeGroup([]*appendItem{it}, it.events, it.bytes); err != nil {
				it.done, it.err, it.next = true, err, q.log.nextSeq
				q.pendingEvents -= int64(len(it.events))
				if first == nil {
					first = err
				}
			}
			continue
		}
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
	q.pending = slices.DeleteFunc(q.pending[take:], func(it *appendItem) bool { return it.done })
	q.renumberPending()
	if len(q.pending) > 0 {
		q.flushDue = true
	}
	return first
}

// storeGroup stores group, the oldest pending Appends, some of them AtEnd
// (events are their batches one after the other), with a group store
// (placeGroup). A group the store refuses is stored batch by batch
// (storeApart) and a lone batch it refuses fails alone (the AtEnd batches
// after it move down); any other failure fails every pending Append, as
// flushOnce's.
func (q *appendQueue) storeGroup(group []*appendItem, events []session.Event, size int) error {
	err := q.placeGroup(group, events, size)
	switch {
	case err == nil:
	case len(group) > 1 && refused(err) && q.gates.taken(q.dctx, appendApartChange):
		return q.storeApart(len(group))
	case len(group) == 1 && refused(err):
		it := group[0]
		it.done, it.err, it.next = true, err, q.log.nextSeq
		q.pendingEvents -= int64(len(it.events))
	default:
		for _, it := range q.pending {
			it.done, it.err, it.next = true, err, q.log.nextSeq
		}
		q.pending, q.pendingEvents = nil, 0
		return err
	}
	q.pending = slices.DeleteFunc(q.pending[len(group):], func(it *appendItem) bool { return it.done })
	q.renumberPending()
	if len(q.pending) > 0 {
		q.flushDue = true
	}
	return err
}

// placeGroup runs the group store of group (activities.AppendBatchInput
// Group) and, when it succeeds, answers each batch with the seqs where the
// store found or wrote it (the log is the truth), moves the stored cursor
// to the log's end and keeps ahead the held events no batch claimed. It
// leaves the pending list to its caller.
func (q *appendQueue) placeGroup(group []*appendItem, events []session.Event, size int) error {
	spans := make([]activities.GroupSpan, len(group))
	for i, it := range group {
		spans[i] = activities.GroupSpan{Len: len(it.events), AtEnd: it.atEnd}
	}
	in := activities.AppendBatchInput{Ref: *q.log.ref, Events: events, Group: spans, Cursor: q.log.nextSeq}
	res, err := q.storeInput(q.dctx, in, size)
	if err != nil {
		return err
	}
	if len(res.Placed) != len(group) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the group store placed %d of its %d batches (a worker whose store does not know group stores?)", len(res.Placed), len(group)), wire.ErrTypeError, nil)
	}
	var stored []session.Event
	for i, it := range group {
		renumber(it.events, res.Placed[i])
		stored = append(stored, it.events...)
		q.pendingEvents -= int64(len(it.events))
		it.done, it.next = true, it.end()
	}
	q.log.stored(max(res.NextSeq, q.log.nextSeq), stored)
	q.keepAhead(res.Unclaimed)
	// The AtEnd Appends accepted while the store ran may be among what it
	// found unclaimed.
	for _, it := range q.pending {
		if it.atEnd && !it.done {
			if next, ok := q.claimAhead(it.events); ok {
				renumber(it.events, next-int64(len(it.events)))
				q.pendingEvents -= int64(len(it.events))
				it.done, it.next = true, next
			}
		}
	}
	return nil
}

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
	return q.storeInput(ctx, activities.AppendBatchInput{Ref: *q.log.ref, Events: events}, bytes)
}

// storeInput is store of the AppendBatch input in (a batch or a group).
func (q *appendQueue) storeInput(ctx workflow.Context, in activities.AppendBatchInput, bytes int) (activities.AppendResult, error) {
	events := in.Events
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
