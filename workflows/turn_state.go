package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// register installs the agent loop's updates and query.
func (a *agentLoop) register() error {
	for _, k := range []inputKind{followupKind, steerKind, injectKind} {
		if err := workflow.SetUpdateHandlerWithOptions(a.ctx, k.name,
			func(ctx workflow.Context, in converter.RawValue) (wire.InputResult, error) {
				return a.handleInput(ctx, k, in)
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
				return boundRejection(a.validateInput(ctx, k, in))
			}}); err != nil {
			return err
		}
	}
	if err := workflow.SetUpdateHandlerWithOptions(a.ctx, wire.UpdateCancel, a.handleCancel,
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
			return boundRejection(a.validateCancel(ctx, in))
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(a.ctx, wire.UpdateWaitTurn, a.handleWaitTurn,
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
			return boundRejection(a.validateWaitTurn(ctx, in))
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(a.ctx, wire.UpdateCompact, a.handleCompact,
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
			return boundRejection(a.validateCompact(ctx, in))
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(a.ctx, wire.UpdateDecide, a.handleDecide,
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
			return boundRejection(a.validateDecide(ctx, in))
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(a.ctx, wire.UpdateSetPermissions, a.handleSetPermissions,
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
			return boundRejection(a.validateSetPermissions(ctx, in))
		}}); err != nil {
		return err
	}
	a.watchChildApprovals()
	return workflow.SetQueryHandler(a.ctx, wire.QueryLoopState, a.loopState)
}

// validateCancel accepts a Cancel of a live session with cause "user" or
// "parent", and keeps the request for the handler.
func (a *agentLoop) validateCancel(ctx workflow.Context, in converter.RawValue) error {
	if err := a.phase.admit(); err != nil {
		return err
	}
	var req wire.CancelRequest
	if err := decodeRequest(wire.UpdateCancel, in, &req); err != nil {
		return err
	}
	if req.Cause != wire.CauseUser && req.Cause != wire.CauseParent {
		return invalidArgument(fmt.Sprintf("Cancel: cause must be %q or %q, not %q", wire.CauseUser, wire.CauseParent, req.Cause))
	}
	a.cancels.keep(ctx, req)
	return nil
}

// handleCancel cancels the running turn and returns once it has ended;
// while idle it does nothing. Unless KeepInbox is set, the pending inputs
// are discarded (none of them is stored while a turn runs: an Inject is
// stored only while idle, and a turn claims every stored input at its
// start).
func (a *agentLoop) handleCancel(ctx workflow.Context, in converter.RawValue) (wire.CancelResult, error) {
	req, err := a.cancels.take(ctx, wire.UpdateCancel, in)
	if err != nil {
		return wire.CancelResult{}, err
	}
	t := a.turn
	if t == nil {
		if m := a.compacting; m != nil && a.cancelCompaction() {
			hctx, _ := workflow.NewDisconnectedContext(ctx)
			if err := workflow.Await(hctx, func() bool { return m.done }); err != nil {
				return wire.CancelResult{}, err
			}
			return wire.CancelResult{Cancelled: true}, nil
		}
		return wire.CancelResult{}, nil
	}
	res := wire.CancelResult{Cancelled: true, Turn: t.summary.Turn}
	if !req.KeepInbox {
		res.Discarded = a.inbox.clear()
	}
	a.inbox.setWake(false)
	t.cancelWith(req.Cause)
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(hctx, func() bool { return t.done }); err != nil {
		return wire.CancelResult{}, err
	}
	res.Reason = t.summary.Reason
	return res, nil
}

// loopState answers the LoopState query.
func (a *agentLoop) loopState() (wire.LoopState, error) {
	s := wire.LoopState{
		State:    wire.LoopIdle,
		Pending:  wire.PendingInputs{NextTurn: ids(a.inbox.nextTurn), NextStep: ids(a.inbox.nextStep)},
		LastTurn: a.log.lastTurn,
		NextSeq:  a.log.nextSeq,
		Recent:   slices.Clone(a.recent),
	}
	if s.Recent == nil {
		s.Recent = []wire.TurnInfo{}
	}
	s.Compacting, s.CompactionsQueued = a.compactingNow, len(a.manual)
	if t := a.turn; t != nil {
		s.State, s.Turn, s.Step = wire.LoopRunning, t.summary.Turn, t.step
		cur := t.summary
		cur.Claimed = slices.Clone(cur.Claimed)
		cur.Steps = t.step
		s.Recent = append(s.Recent, cur)
		s.Calls = slices.Clone(t.calls)
		s.Approvals = append(a.pendingApprovals(), a.childPending()...)
	}
	perm := a.permissions()
	s.Permissions = &perm
	return s, nil
}
