package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// localStores reports whether this run stores the turn's own events
// with local activities: the change's version, asked once per run, and the
// store activities on the workflow's task queue (a worker polling it
// registers them; a separate store queue keeps regular activities).
func (t *turnRun) localStores() bool {
	return t.a.gates.taken(t.a.dctx, turnLocalStoresChange) && t.a.storesOnOwnQueue()
}

// store runs the store activity name with in for the turn: a
// local activity when localStores, else a regular one with the store
// activities' options. Both are idempotent against the log, so a local
// activity re-run after a worker crash (its workflow task retried) stores
// nothing twice.
func (t *turnRun) store(ctx workflow.Context, name string, in any) workflow.Future {
	if t.localStores() {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: t.a.set.timeout,
			RetryPolicy:         t.a.set.retry(),
		}), name, in)
	}
	return workflow.ExecuteActivity(t.a.set.storeCtx(ctx), name, in)
}
