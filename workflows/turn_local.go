package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// turnLocalStoresChange names the versioned change that stores a turn's own
// events (the AppendBatch of turn/start, step/start and the claimed inputs,
// and EndTurn) as local activities when the store activities run on the
// workflow's own task queue (docs/DECISIONS.md D43): a tool-less turn then
// takes two workflow tasks and one activity (CallModel) instead of four
// workflow tasks and three activities. The first turn of a run records the
// marker.
const turnLocalStoresChange = "turn-local-stores"

// localTurnStores reports whether this run stores the turn's own events
// with local activities: the change's version, asked once per run, and the
// store activities on the workflow's task queue (a worker polling it
// registers them; a separate store queue keeps regular activities).
func (l *lifecycle) localTurnStores() bool {
	return l.agent.localChange.takenIn(l.dctx, turnLocalStoresChange) && l.storesOnOwnQueue()
}

// turnStore runs the store activity name with in for the running turn: a
// local activity when localTurnStores, else a regular one with the store
// activities' options. Both are idempotent against the log, so a local
// activity re-run after a worker crash (its workflow task retried) stores
// nothing twice.
func (l *lifecycle) turnStore(ctx workflow.Context, name string, in any) workflow.Future {
	if l.localTurnStores() {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: l.set.timeout,
			RetryPolicy:         l.retry(),
		}), name, in)
	}
	return workflow.ExecuteActivity(l.storeCtx(ctx), name, in)
}
