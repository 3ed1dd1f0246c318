package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
)

// forfeitDeadOwner is a resume's answer to an open refused with
// SessionAlreadyOwned: the ForfeitDeadOwner activity asks Temporal whether
// the lease's owning workflow is closed and, if so, forfeits the lease; the
// open is then tried again with the same handle id. A running owner (or
// one Temporal cannot check) fails the activity with SessionAlreadyOwned
// naming the owner. The version marker is taken only on this path, so the
// command sequence of a resume that opens at once is unchanged; runs
// recorded before the change return the refusal as they did.
func (l *lifecycle) forfeitDeadOwner(owned error, open func(workflow.Context) workflow.Future, hi *activities.HandleInfo) error {
	if workflow.GetVersion(l.dctx, forfeitDeadOwnerChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return owned
	}
	var res activities.ForfeitResult
	err := l.aborts.race(func(c workflow.Context) workflow.Future {
		return workflow.ExecuteActivity(l.act(l.set.storeCtx(c), "forfeit a dead owner's lease"), acts.ForfeitDeadOwner, activities.ForfeitInput{SessionID: l.id, Self: l.owner()})
	}, &res)
	if err != nil {
		return err
	}
	if res.Forfeited != nil {
		workflow.GetLogger(l.ctx).Info("forfeited the lease of a closed owner", "session", l.id,
			"handle", res.Forfeited.HandleID, "ownerWorkflowId", res.Forfeited.Owner.WorkflowID, "ownerRunId", res.Forfeited.Owner.RunID)
	}
	return l.aborts.race(open, hi)
}
