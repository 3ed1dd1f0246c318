package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// Error types of an update that reached no running session (docs/API.md,
// Errors: a session that is not running).
const (
	// TypeSessionDisposed: the session's workflow has completed, which it
	// does only once the session is disposed (a Dispose, a cancellation,
	// a loop's deactivation); its result is the DisposeResult. An
	// *Error of this type also matches ErrNotRunning.
	TypeSessionDisposed = "SessionDisposed"
	// TypeUpdateOutlivedRun is the type of the failure the server gives an
	// accepted update still running when its workflow closed (terminated,
	// timed out, failed): the Go client maps it to TypeNotRunning or
	// TypeSessionDisposed after asking how the run closed, keeping it as
	// the cause.
	TypeUpdateOutlivedRun = "AcceptedUpdateCompletedWorkflow"
)

// ErrSessionDisposed: `<call> to session "<id>": the session is disposed:
// its workflow session/<id> has completed`. It also matches ErrNotRunning.
var ErrSessionDisposed = &Error{Type: TypeSessionDisposed}

// closedError maps the failure of update name sent to session id when it
// reached no running workflow: the server's NotFound (no execution runs:
// "workflow execution already completed", or none exists) or the failure
// of an accepted update whose run closed before answering it
// (AcceptedUpdateCompletedWorkflow). It asks Temporal how the latest run
// ended: completed is ErrSessionDisposed; terminated, timed out, failed
// or cancelled is ErrNotRunning naming the status and the way back (a
// resume). Any other error, or a run that runs (the update raced a new
// run), is returned as it is.
func (c *Client) closedError(ctx context.Context, id, name string, err error) error {
	var nf *serviceerror.NotFound
	var app *temporal.ApplicationError
	outlived := errors.As(err, &app) && app.Type() == TypeUpdateOutlivedRun
	if err == nil || (!outlived && !errors.As(err, &nf)) {
		return err
	}
	wid := wire.WorkflowID(id)
	desc, derr := c.c.DescribeWorkflow(ctx, wid, "")
	if derr != nil {
		// No execution of the id exists (or Temporal cannot say): callError
		// maps the NotFound to ErrNotRunning.
		if outlived {
			return &Error{Type: TypeNotRunning, SessionID: id, Err: err, Message: fmt.Sprintf(
				"%s to session %q: its workflow %s closed while the update was pending", name, id, wid)}
		}
		return err
	}
	status := desc.RawResponse.GetWorkflowExecutionInfo().GetStatus()
	while := ""
	if outlived {
		while = " while the update was pending"
	}
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return &Error{Type: TypeSessionDisposed, SessionID: id, Err: err, Message: fmt.Sprintf(
			"%s to session %q: the session is disposed: its workflow %s has completed%s (resume it to use it again)", name, id, wid, while)}
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
		enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED:
		return err
	}
	return &Error{Type: TypeNotRunning, SessionID: id, Err: err, Message: fmt.Sprintf(
		"%s to session %q: not running: its workflow %s was %s%s (resume the session: a resume recovers its lease and closes an interrupted turn)",
		name, id, wid, statusText(status), while)}
}

// statusText is a closed run's status in words: "terminated", "timed out".
func statusText(s enumspb.WorkflowExecutionStatus) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_")), "_", " ")
}
