package client

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"

	"github.com/sessionflow/sessionflow/wire"
)

// WaitReady waits until the session id, whose CreateSession or
// ResumeSession workflow was started separately (not through Create or
// Resume), is live and returns what its WaitReady update reports. When the
// run has already ended, the update cannot reach it; WaitReady then returns
// the run's own outcome: the typed creation or resume failure, or
// ErrSessionDisposed (which matches ErrNotRunning too) when the run
// completed (a session disposed already).
func (c *Client) WaitReady(ctx context.Context, id string) (*Session, error) {
	if id == "" {
		return nil, invalidArgument("", "wait for session: the session id is required")
	}
	var info wire.SessionInfo
	err := c.update(ctx, id, wire.UpdateWaitReady, &info)
	if err == nil {
		return &Session{SessionInfo: info}, nil
	}
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) {
		return nil, callError("wait for session", id, err)
	}
	// The run ended before the update reached it (workflow execution
	// already completed), or none exists: its result is the answer.
	if rerr := c.c.GetWorkflow(ctx, wire.WorkflowID(id), "").Get(ctx, nil); rerr != nil {
		var rnf *serviceerror.NotFound
		if errors.As(rerr, &rnf) {
			return nil, callError("wait for session", id, err)
		}
		return nil, callError("wait for session", id, rerr)
	}
	return nil, &Error{Type: TypeSessionDisposed, SessionID: id, Err: err,
		Message: fmt.Sprintf("wait for session %q: the session's run has completed (it was disposed)", id)}
}

// resumeRunningError is the refusal of a Resume whose session workflow
// already runs: another resume of the id won the race, or the session is
// live (created or resumed earlier). Its class is ErrAlreadyExists.
func resumeRunningError(id string, cause error) *Error {
	return &Error{Type: wire.ErrTypeAlreadyExists, SessionID: id, Err: cause, Message: fmt.Sprintf(
		"session %q is already being resumed or is live: its workflow %s is running (dispose it, or wait for its resume to finish)",
		id, wire.WorkflowID(id))}
}
