package client

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// ErrNoSuchApproval: a Decide naming an approval the session has not
// asked (or asked before its recent approvals), by id or by call id.
var ErrNoSuchApproval = &Error{Type: wire.ErrTypeNoSuchApproval}

// ErrApprovalSettled: a Decide for an approval already decided (by an
// earlier Decide, its timeout or a cancel). The *Error's Outcome is the
// outcome that stands (wire.OutcomeAllowedOnce, OutcomeRejected,
// OutcomeCancelled, OutcomeUnavailable).
var ErrApprovalSettled = &Error{Type: wire.ErrTypeApprovalSettled}

// Decide answers a pending approval of the live session id (the Decide
// update, docs/API.md "Approvals"): req names it by its id or its call's
// id, and its outcome, wire.OutcomeAllowedOnce or wire.OutcomeRejected;
// with OutcomeAllowedOnce, req.Remember adds an allow rule for later calls
// (its Tool must be the call's). It returns once the decision is recorded,
// before the call runs. An approval already decided is ErrApprovalSettled
// (Error.Outcome says what stands), one the session never asked
// ErrNoSuchApproval; a bad outcome or rule ErrInvalidArgument (a request
// naming no approval, or with another outcome, is refused before it is
// sent); and as every update, ErrNotLive, ErrLifecycleDisposed,
// ErrNotRunning.
func (c *Client) Decide(ctx context.Context, id string, req wire.DecideRequest) (wire.DecideResult, error) {
	var res wire.DecideResult
	switch {
	case req.ID == "" && req.CallID == "":
		return res, invalidArgument(id, "decide: name the approval by its id or its call's id")
	case req.Outcome != wire.OutcomeAllowedOnce && req.Outcome != wire.OutcomeRejected:
		return res, invalidArgument(id, "decide: the outcome must be %q or %q, got %q", wire.OutcomeAllowedOnce, wire.OutcomeRejected, req.Outcome)
	case req.Remember != nil && req.Outcome != wire.OutcomeAllowedOnce:
		return res, invalidArgument(id, "decide: a rule is remembered only with the outcome %q", wire.OutcomeAllowedOnce)
	}
	err := c.update(ctx, id, wire.UpdateDecide, &res, req)
	return res, settledOutcome(callError("decide an approval of session", id, err))
}

// SetPermissions changes the live session id's permissions between turns
// (the SetPermissions update): each field of req that is set replaces the
// session's value (Rules, when not nil, all the allow rules). It returns
// the permissions in effect. Sent while a turn runs it is refused with
// ErrTurnRunning; an unknown preset, mode or policy, or a preset the mode
// or policy contradicts, is ErrInvalidArgument.
func (c *Client) SetPermissions(ctx context.Context, id string, req wire.SetPermissionsRequest) (wire.Permissions, error) {
	var res wire.Permissions
	err := c.update(ctx, id, wire.UpdateSetPermissions, &res, req)
	return res, callError("set the permissions of session", id, err)
}

// PendingApprovals returns the tool calls of the live session id's
// running turn that wait for a Decide, in the order asked (the LoopState
// query's approvals); none when idle.
func (c *Client) PendingApprovals(ctx context.Context, id string) ([]wire.PendingApproval, error) {
	st, err := c.LoopState(ctx, id)
	if err != nil {
		return nil, err
	}
	return st.Approvals, nil
}

// settledOutcome reads the standing outcome of an ApprovalSettled failure
// from its details (the outcome as a string, or an object with an
// outcome) into the *Error's Outcome; err is returned.
func settledOutcome(err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Type != wire.ErrTypeApprovalSettled {
		return err
	}
	var ae *temporal.ApplicationError
	if !errors.As(e.Err, &ae) || !ae.HasDetails() {
		return err
	}
	var outcome string
	if ae.Details(&outcome) == nil && outcome != "" {
		e.Outcome = outcome
		return err
	}
	var d struct {
		Outcome string `json:"outcome"`
	}
	if ae.Details(&d) == nil {
		e.Outcome = d.Outcome
	}
	return err
}
