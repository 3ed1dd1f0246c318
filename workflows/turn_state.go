package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// registerAgent installs the agent loop's updates and query.
func (l *lifecycle) registerAgent() error {
	for _, k := range []inputKind{followupKind, steerKind, injectKind} {
		if err := workflow.SetUpdateHandlerWithOptions(l.ctx, k.name,
			func(ctx workflow.Context, in converter.RawValue) (InputResult, error) {
				return l.handleInput(ctx, k, in)
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
				return boundRejection(l.validateInput(ctx, k, in))
			}}); err != nil {
			return err
		}
	}
	if err := workflow.SetUpdateHandlerWithOptions(l.ctx, UpdateCancel, l.handleCancel,
		workflow.UpdateHandlerOptions{Validator: func(in converter.RawValue) error { return boundRejection(l.validateCancel(in)) }}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(l.ctx, UpdateWaitTurn, l.handleWaitTurn,
		workflow.UpdateHandlerOptions{Validator: func(in converter.RawValue) error { return boundRejection(l.validateWaitTurn(in)) }}); err != nil {
		return err
	}
	return workflow.SetQueryHandler(l.ctx, QueryLoopState, l.loopState)
}

// validateCancel accepts a Cancel of a live session with cause "user" or
// "parent".
func (l *lifecycle) validateCancel(in converter.RawValue) error {
	if l.phase != PhaseLive || l.disposeWanted {
		return l.notLive()
	}
	var req CancelRequest
	if err := decodeRequest(UpdateCancel, in, &req); err != nil {
		return err
	}
	if req.Cause != CauseUser && req.Cause != CauseParent {
		return invalidArgument(fmt.Sprintf("Cancel: cause must be %q or %q, not %q", CauseUser, CauseParent, req.Cause))
	}
	return nil
}

// handleCancel cancels the running turn and returns once it has ended;
// while idle it does nothing. Unless KeepInbox is set, the pending inputs
// are discarded (none of them is stored while a turn runs: an Inject is
// stored only while idle, and a turn claims every stored input at its
// start).
func (l *lifecycle) handleCancel(ctx workflow.Context, in converter.RawValue) (CancelResult, error) {
	var req CancelRequest
	if err := decodeRequest(UpdateCancel, in, &req); err != nil {
		return CancelResult{}, err
	}
	t := l.agent.turn
	if t == nil {
		return CancelResult{}, nil
	}
	res := CancelResult{Cancelled: true, Turn: t.summary.Turn}
	if !req.KeepInbox {
		res.Discarded = l.agent.inbox.clear()
	}
	l.agent.inbox.wake = false
	l.cancelTurn(t, req.Cause)
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(hctx, func() bool { return t.done }); err != nil {
		return CancelResult{}, err
	}
	res.Reason = t.summary.Reason
	return res, nil
}

// loopState answers the LoopState query.
func (l *lifecycle) loopState() (LoopState, error) {
	a := &l.agent
	s := LoopState{
		State:    LoopIdle,
		Pending:  PendingInputs{NextTurn: ids(a.inbox.nextTurn), NextStep: ids(a.inbox.nextStep)},
		LastTurn: l.lastTurn,
		NextSeq:  l.nextSeq,
		Recent:   slices.Clone(a.recent),
	}
	if s.Recent == nil {
		s.Recent = []TurnInfo{}
	}
	if t := a.turn; t != nil {
		s.State, s.Turn, s.Step = LoopRunning, t.summary.Turn, t.step
		cur := t.summary
		cur.Claimed = slices.Clone(cur.Claimed)
		cur.Steps = t.step
		s.Recent = append(s.Recent, cur)
		s.Calls = slices.Clone(t.calls)
	}
	return s, nil
}
