package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// The wait for a turn's end (docs/API.md, WaitTurn): an update whose
// completion is the end of a turn, so a client learns it with the workflow
// task that stores the turn/end instead of polling LoopState. A waiter adds
// no command: it awaits the turn's summary in workflow state. Before
// continue-as-new the waiters of a turn that is not running are answered
// with TurnWaitMoved (the client sends the wait again, to the next run,
// which carries the recent turns); on disposal, the waiters of a turn that
// is not running are answered with LifecycleDisposed.

// waitState is where a waited-for turn stands.
type waitState int

const (
	waitPending waitState = iota // not ended yet
	waitRunning                  // it is the running turn
	waitEnded                    // ended: its summary is known
	waitGone                     // it cannot be answered
)

// findTurn locates the turn req waits for.
func (a *agentLoop) findTurn(req wire.WaitTurnRequest) (wire.TurnInfo, waitState) {
	match := func(t wire.TurnInfo) bool {
		if req.MessageID != "" {
			return slices.Contains(t.Claimed, req.MessageID)
		}
		return t.Turn == req.Turn
	}
	for i := len(a.recent) - 1; i >= 0; i-- {
		if match(a.recent[i]) {
			return a.recent[i], waitEnded
		}
	}
	if a.turn != nil && match(a.turn.summary) {
		return wire.TurnInfo{}, waitRunning
	}
	if req.MessageID != "" {
		if a.inbox.has(req.MessageID) {
			return wire.TurnInfo{}, waitPending
		}
		return wire.TurnInfo{}, waitGone
	}
	last := a.log.lastTurn
	if a.turn != nil {
		last = max(last, a.turn.summary.Turn)
	}
	if req.Turn > last {
		return wire.TurnInfo{}, waitPending
	}
	return wire.TurnInfo{}, waitGone
}

// NoSuchTurnError is the answer to a wait for a turn the loop cannot
// answer.
func NoSuchTurnError(id string, req wire.WaitTurnRequest) error {
	what := fmt.Sprintf("turn %d", req.Turn)
	if req.MessageID != "" {
		what = "the turn of message " + quoteID(req.MessageID)
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("agent %s cannot wait for %s: it is neither pending, running nor among the recent turns", quoteID(id), what),
		wire.ErrTypeNoSuchTurn, nil)
}

// TurnWaitMovedError is the answer to a wait given up for continue-as-new.
func TurnWaitMovedError(id string) error {
	return temporal.NewApplicationError(
		fmt.Sprintf("agent %s continues as new; wait for the turn again", quoteID(id)), wire.ErrTypeTurnWaitMoved)
}

// validateWaitTurn accepts a WaitTurn of a live session naming exactly one
// of a turn (a positive number) and a message, and keeps the request for
// the handler.
func (a *agentLoop) validateWaitTurn(ctx workflow.Context, in converter.RawValue) error {
	if err := a.phase.admit(); err != nil {
		return err
	}
	var req wire.WaitTurnRequest
	if err := decodeRequest(wire.UpdateWaitTurn, in, &req); err != nil {
		return err
	}
	if (req.Turn > 0) == (req.MessageID != "") || req.Turn < 0 {
		return invalidArgument("WaitTurn: give exactly one of a positive turn and a messageId")
	}
	a.waits.keep(ctx, req)
	return nil
}

// handleWaitTurn answers once the turn has ended.
func (a *agentLoop) handleWaitTurn(ctx workflow.Context, in converter.RawValue) (wire.TurnInfo, error) {
	req, err := a.waits.take(ctx, wire.UpdateWaitTurn, in)
	if err != nil {
		return wire.TurnInfo{}, err
	}
	return a.waitTurn(ctx, req)
}

// waitTurn waits until the turn req names has ended and returns its
// summary; a turn that will not come (the session is disposing, the run
// continues as new) or cannot be found is answered with an error.
func (a *agentLoop) waitTurn(ctx workflow.Context, req wire.WaitTurnRequest) (wire.TurnInfo, error) {
	a.waiters++
	defer func() { a.waiters-- }()
	var info wire.TurnInfo
	var err error
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	if aerr := workflow.Await(hctx, func() bool {
		var st waitState
		info, st = a.findTurn(req)
		switch {
		case st == waitEnded:
			return true
		case st == waitGone:
			err = NoSuchTurnError(a.id, req)
			return true
		case st == waitRunning:
			return false
		case !a.phase.live():
			err = LifecycleDisposedError(a.id)
			return true
		case a.releaseWaiters:
			err = TurnWaitMovedError(a.id)
			return true
		}
		return false
	}); aerr != nil {
		return wire.TurnInfo{}, aerr
	}
	if err != nil {
		return wire.TurnInfo{}, err
	}
	info.Claimed = slices.Clone(info.Claimed)
	return info, nil
}
