package client

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"

	"github.com/sessionflow/sessionflow/wire"
)

// LoopWorkflowID returns the workflow id of the loop loopID, the one
// LoopStart starts it under: wire.LoopWorkflowIDPrefix and
// the loop id encoded as session ids are (wire.EncodeWorkflowIDPart), so
// any loop id gives a printable ASCII workflow id.
func LoopWorkflowID(loopID string) string {
	return wire.LoopWorkflowIDPrefix + wire.EncodeWorkflowIDPart(loopID)
}

// Loop names a started SessionLoop.
type Loop struct {
	// LoopID is the loop's id.
	LoopID string `json:"loopId"`
	// WorkflowID and RunID name its execution.
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
}

// LoopStart starts a SessionLoop host with workflow id loop/<loopID> on the
// client's task queue; its configured agents start at once. A running loop
// of the same id fails with ErrLoopAlreadyRunning. The loop runs until
// LoopStop. With Options.Router the loop starts on the shard of its loop id
// (or the one OnShard names), and its sessions, started on the loop's task
// queue unless in.SessionTaskQueue says otherwise, live in that shard.
func (c *Client) LoopStart(ctx context.Context, loopID string, in wire.SessionLoopInput, opts ...CallOption) (Loop, error) {
	if loopID == "" {
		return Loop{}, invalidArgument("", "the loop id is empty")
	}
	shard, err := c.ShardOf(loopID, opts...)
	if err != nil {
		return Loop{}, err
	}
	wid := LoopWorkflowID(loopID)
	summary, details := wire.LoopSummary(loopID, in)
	run, err := c.c.ExecuteWorkflow(ctx, c.startOptions(wid, shard.TaskQueue, summary, details), wire.SessionLoopName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return Loop{}, &Error{Type: TypeLoopAlreadyRunning, Message: fmt.Sprintf("loop %q is already running", loopID), SessionID: loopID, Err: err}
		}
		return Loop{}, callError("start loop", loopID, err)
	}
	return Loop{LoopID: loopID, WorkflowID: run.GetID(), RunID: run.GetRunID()}, nil
}

// LoopStop deactivates the loop loopID by cancelling its workflow: new work
// is refused, children still starting are aborted, live children are
// disposed, and the loop completes once every child has settled. It returns
// once the cancellation is requested; LoopResult waits for the end.
func (c *Client) LoopStop(ctx context.Context, loopID string) error {
	return callError("stop loop", loopID, c.c.CancelWorkflow(ctx, LoopWorkflowID(loopID), ""))
}

// LoopResult waits for the loop loopID's latest run to complete and returns
// its final description.
func (c *Client) LoopResult(ctx context.Context, loopID string) (wire.LoopDescription, error) {
	var d wire.LoopDescription
	err := c.c.GetWorkflow(ctx, LoopWorkflowID(loopID), "").Get(ctx, &d)
	return d, callError("wait for loop", loopID, err)
}

// DescribeLoop returns the Describe query of the loop loopID.
func (c *Client) DescribeLoop(ctx context.Context, loopID string) (wire.LoopDescription, error) {
	var d wire.LoopDescription
	v, err := c.c.QueryWorkflow(ctx, LoopWorkflowID(loopID), "", wire.QueryDescribe)
	if err == nil {
		err = v.Get(&d)
	}
	return d, callError("describe loop", loopID, err)
}
