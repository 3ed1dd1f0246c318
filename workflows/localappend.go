package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
)

// localAppendChange names the versioned change that stores the live phase's
// appends with a local activity run by the workflow's own worker: the batch
// is not recorded in history a second time (the update's input holds it
// already) and the store runs without a round trip through the server's
// task queues. Only the local activity's small result is recorded, in its
// marker.
const localAppendChange = "append-local-activity"

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

// storeAppend stores a live-phase batch: with one attempt of the local
// activity where it fits (storeLocally), falling back to the AppendBatch
// activity when that attempt fails on anything but a refusal of the batch
// (a timeout, a retryable I/O error, a worker without the store
// activities). The store's idempotent re-append makes the second try safe
// whether or not the first landed.
func (l *lifecycle) storeAppend(ctx workflow.Context, events []session.Event, bytes int) (activities.AppendResult, error) {
	in := activities.AppendBatchInput{Ref: *l.ref, Events: events}
	var res activities.AppendResult
	if l.storeLocally(bytes) {
		// A local activity runs again when its workflow task is retried,
		// with the batch grouped anew (group commit): Rerun stores once what
		// the earlier attempt stored (FORMAT.md §4.6).
		local := in
		local.Rerun = true
		err := workflow.ExecuteLocalActivity(l.localStoreCtx(ctx), activities.AppendBatchName, local).Get(ctx, &res)
		if err == nil || refused(err) {
			return res, unwrapActivity(err)
		}
		workflow.GetLogger(ctx).Warn("local append failed; storing with the activity", "SessionID", l.id, "Error", err)
	}
	err := workflow.ExecuteActivity(l.storeCtx(ctx), acts.AppendBatch, in).Get(ctx, &res)
	return res, unwrapActivity(err)
}

// storeLocally reports whether a batch of the given size is stored with the
// local activity: in runs that took the change, unless the session's
// options ask for the activity, route the store activities to another task
// queue (whose workers hold the store), or the batch is larger than
// LocalAppendMaxBytes.
func (l *lifecycle) storeLocally(bytes int) bool {
	if !l.localAppendChange.takenIn(l.dctx, localAppendChange) || bytes > LocalAppendMaxBytes {
		return false
	}
	if l.options != nil && l.options.ActivityAppends {
		return false
	}
	return l.storesOnOwnQueue()
}

// storesOnOwnQueue reports whether the store activities run on the
// workflow's own task queue, whose workers register them: the condition of
// every local store (D43, D45).
func (l *lifecycle) storesOnOwnQueue() bool {
	return l.set.taskQueue == "" || l.set.taskQueue == workflow.GetInfo(l.dctx).TaskQueueName
}

// localStoreCtx returns ctx with the options of the local append: one
// attempt bounded by localAppendTimeout (a failure falls back to the
// activity, which retries with the session's policy).
func (l *lifecycle) localStoreCtx(ctx workflow.Context) workflow.Context {
	timeout := l.localAppendTimeout()
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: timeout,
		StartToCloseTimeout:    timeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// localAppendTimeout is half the run's workflow task timeout, within
// [minLocalAppendTimeout, maxLocalAppendTimeout] and never above the
// session's activity timeout.
func (l *lifecycle) localAppendTimeout() time.Duration {
	t := workflow.GetInfo(l.ctx).WorkflowTaskTimeout / 2
	t = min(max(t, minLocalAppendTimeout), maxLocalAppendTimeout)
	return min(t, l.set.timeout)
}

// refused reports whether err is the store's refusal of the batch (a
// non-retryable application error), which the activity would only repeat.
func refused(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable()
}
