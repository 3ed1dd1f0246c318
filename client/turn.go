package client

import (
	"context"

	"github.com/sessionflow/sessionflow/wire"
)

// ErrTurnRunning: `agent "<id>" is running turn N; append between turns`:
// an Append (or a SetPermissions) while the session's agent runs a turn.
var ErrTurnRunning = &Error{Type: wire.ErrTypeTurnRunning}

// ErrTurnLeftOpen: `agent "<id>" runs its own turns: the append batch leaves
// turn N open (...); append whole turns`: an Append that would leave a turn
// open while the session's agent has a provider and model.
var ErrTurnLeftOpen = &Error{Type: wire.ErrTypeTurnLeftOpen}

// ErrInboxFull: the session's agent holds wire.MaxPendingInputs
// inputs already.
var ErrInboxFull = &Error{Type: wire.ErrTypeInboxFull}

// Followup queues a user message for the agent's next turn and wakes it
// (the Followup update). It returns once the message is queued, with its
// id; WatchTurn follows the turn that claims it.
func (c *Client) Followup(ctx context.Context, id string, req wire.InputRequest) (wire.InputResult, error) {
	return c.input(ctx, id, wire.UpdateFollowup, req)
}

// Steer queues a user message for the next step of the running turn (or
// of a new turn when idle) and wakes the agent (the Steer update).
func (c *Client) Steer(ctx context.Context, id string, req wire.InputRequest) (wire.InputResult, error) {
	return c.input(ctx, id, wire.UpdateSteer, req)
}

// Inject queues a user message for the next step without waking the agent
// (the Inject update). While idle the message is stored at once as an
// agent/inbox/spliced event (InputResult.SplicedSeq).
func (c *Client) Inject(ctx context.Context, id string, req wire.InputRequest) (wire.InputResult, error) {
	return c.input(ctx, id, wire.UpdateInject, req)
}

func (c *Client) input(ctx context.Context, id, name string, req wire.InputRequest) (wire.InputResult, error) {
	var res wire.InputResult
	err := c.update(ctx, id, name, &res, req)
	return res, callError(name+" to session", id, err)
}

// CancelTurn cancels the agent's running turn with cause "user" or
// "parent" (the Cancel update) and returns once the turn has ended
// (turn/end {aborted}); while idle it does nothing (Cancelled false).
// Unless keepInbox, the pending inputs are discarded.
func (c *Client) CancelTurn(ctx context.Context, id, cause string, keepInbox bool) (wire.CancelResult, error) {
	var res wire.CancelResult
	err := c.update(ctx, id, wire.UpdateCancel, &res, wire.CancelRequest{Cause: cause, KeepInbox: keepInbox})
	return res, callError("cancel the turn of session", id, err)
}

// LoopState returns the agent loop's state (the LoopState query).
func (c *Client) LoopState(ctx context.Context, id string) (wire.LoopState, error) {
	var s wire.LoopState
	v, err := c.c.QueryWorkflow(ctx, wire.WorkflowID(id), "", wire.QueryLoopState)
	if err == nil {
		err = v.Get(&s)
	}
	return s, callError("query the loop state of session", id, err)
}
