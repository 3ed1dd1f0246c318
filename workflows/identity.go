package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// CheckSessionIdentity is the identity rule of CreateSession and
// ResumeSession, a pure function: the session id must fit the store
// (wire.CheckIDLength) and the workflow must run under WorkflowID(id), the
// id docs/API.md prescribes. It returns a non-retryable InvalidArgument
// error, or nil. Clients apply it before they start a workflow.
func CheckSessionIdentity(workflowID, sessionID string) error {
	if err := wire.CheckIDLength(sessionID); err != nil {
		return invalidArgument(fmt.Sprintf("%v (the id: %s)", err, truncateID(sessionID)))
	}
	if want := WorkflowID(sessionID); workflowID != want {
		return invalidArgument(fmt.Sprintf("session %s must run under workflow id %q, not %q (docs/API.md: Workflow ids)",
			quoteID(sessionID), want, workflowID))
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

// truncateID quotes an id for a message, cut to its first 64 bytes (on a
// character boundary) when longer.
func truncateID(id string) string {
	const keep = 64
	if len(id) <= keep {
		return quoteID(id)
	}
	cut := keep
	for cut > 0 && !utf8RuneStart(id[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", quoteID(id[:cut]), len(id))
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
