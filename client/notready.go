package client

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	temporalclient "go.temporal.io/sdk/client"
)

// The server refuses an update with WorkflowNotReady while the workflow's
// task is failing or timing out (a worker killed mid-task, a task past its
// timeout on a starved worker). The update was not admitted, so sending it
// again is safe; the SDK does not, so the client does, until ctx ends.
const (
	notReadyFirstWait = 50 * time.Millisecond
	notReadyMaxWait   = time.Second
)

// isNotReady reports whether err is the server's refusal of an update to a
// workflow whose task is failing.
func isNotReady(err error) bool {
	var nr *serviceerror.WorkflowNotReady
	return errors.As(err, &nr)
}

// updateWorkflow is UpdateWorkflow, sent again with a growing wait while
// the server answers WorkflowNotReady; once ctx ends it returns the last
// refusal.
//
// An input larger than wire.MaxUpdateInputBytes is refused before anything
// is sent (inputTooLarge).
func (c *Client) updateWorkflow(ctx context.Context, opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
	if err := checkUpdateInput(opts); err != nil {
		return nil, err
	}
	wait := notReadyFirstWait
	for {
		h, err := c.c.UpdateWorkflow(ctx, opts)
		if err == nil || !isNotReady(err) {
			return h, err
		}
		if pause(ctx, wait) != nil {
			return nil, err
		}
		wait = min(2*wait, notReadyMaxWait)
	}
}
