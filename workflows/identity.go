package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// CheckSessionIdentity is wire.CheckSessionIdentity's refusal as the
// workflows raise it: a non-retryable InvalidArgument error, or nil.
func CheckSessionIdentity(workflowID, sessionID string) error {
	if err := wire.CheckSessionIdentity(workflowID, sessionID); err != nil {
		return invalidArgument(err.Error())
	}
	return nil
}

// checkIdentity applies CheckSessionIdentity to the running workflow. The
// version marker is taken only when the check fails, so the command
// sequence of a valid run is unchanged; a run recorded before the check
// replays through the default branch and goes on as it did.
func checkIdentity(ctx workflow.Context, sessionID string) error {
	err := CheckSessionIdentity(workflow.GetInfo(ctx).WorkflowExecution.ID, sessionID)
	if err == nil {
		return nil
	}
	if workflow.GetVersion(ctx, sessionIdentityChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	return err
}
