package client

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/sessionflow/sessionflow/wire"
)

// ErrNoSuchTurn: a wait for a turn the session's agent cannot answer (the
// message is neither pending, running nor claimed by a recent turn: never
// sent, or discarded by a cancel).
var ErrNoSuchTurn = &Error{Type: wire.ErrTypeNoSuchTurn}

// waitMovedPause is the pause before a wait given up for continue-as-new
// is sent again (to the next run).
const waitMovedPause = 10 * time.Millisecond

// WaitTurn waits until the turn req names (a turn number, or the turn that
// claims a message) has ended and returns it (the WaitTurn update): the
// update completes with the workflow task that ends the turn, so nothing
// polls. A turn that already ended is answered at once. A wait the session
// gives up to continue as new is sent again, to the next run. A disposed
// session answers ErrLifecycleDisposed, one that cannot find the turn
// ErrNoSuchTurn.
func (c *Client) WaitTurn(ctx context.Context, id string, req wire.WaitTurnRequest) (wire.TurnInfo, error) {
	for {
		var info wire.TurnInfo
		err := c.update(ctx, id, wire.UpdateWaitTurn, &info, req)
		if err = callError("wait for a turn of session", id, err); !moved(err) {
			return info, err
		}
		if err := pause(ctx, waitMovedPause); err != nil {
			return wire.TurnInfo{}, err
		}
	}
}

// RunTurn queues a user message for the agent's next turn, like Followup,
// and returns once the turn that claims it has ended: InputResult.Ended is
// that turn (its seqs, steps and end reason; read its events from the
// store). The update completes with the workflow task that ends the turn.
// An empty MessageID is chosen here (a random UUID), so the wait can follow
// the message to the next run when the session continues as new.
func (c *Client) RunTurn(ctx context.Context, id string, req wire.InputRequest) (wire.InputResult, error) {
	if req.MessageID == "" {
		req.MessageID = "msg-" + uuid.NewString()
	}
	req.Wait = true
	res, err := c.Followup(ctx, id, req)
	if !moved(err) {
		return res, err
	}
	info, err := c.WaitTurn(ctx, id, wire.WaitTurnRequest{MessageID: req.MessageID})
	if err != nil {
		return wire.InputResult{}, err
	}
	return wire.InputResult{MessageID: req.MessageID, Target: wire.TargetNextTurn, SplicedSeq: -1, Ended: &info}, nil
}

// errTurnWaitMoved is the class of a wait the session gave up to continue
// as new.
var errTurnWaitMoved = &Error{Type: wire.ErrTypeTurnWaitMoved}

// moved reports a wait the session gave up to continue as new.
func moved(err error) bool { return errors.Is(err, errTurnWaitMoved) }

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
