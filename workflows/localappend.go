package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
)

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
		err := workflow.ExecuteLocalActivity(q.set.localStoreCtx(ctx), activities.AppendBatchName, local).Get(ctx, &res)
		if err == nil || refused(err) {
			return res, unwrapActivity(err)
		}
		workflow.GetLogger(ctx).Warn("local append failed; storing with the activity", "SessionID", q.id, "Error", err)
	}
	err := workflow.ExecuteActivity(q.set.storeCtx(ctx), acts.AppendBatch, in).Get(ctx, &res)
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
