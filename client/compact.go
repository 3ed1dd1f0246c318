package client

import (
	"context"

	"github.com/sessionflow/sessionflow/wire"
)

// ErrNoRoute: `Compact: the session's agent has no model route
// (agentOptions provider and model)`: a Compact of a session whose agent
// has no provider and model to summarise with.
var ErrNoRoute = &Error{Type: wire.ErrTypeNoRoute}

// Compact compacts the live session's conversation between turns (the
// Compact update, docs/API.md "Compaction") and returns once the
// compaction has ended: sent while a turn runs, it waits for the turn's
// end and runs before the next turn. An empty req.CommandID is the
// update's id. A compaction that ran and failed, or was cancelled (a
// CancelTurn while it runs), is no error: the result's Error says why and
// its Text is what the log's command/done says. The session's refusals
// come back as *Error: ErrNotLive, ErrLifecycleDisposed,
// ErrInvalidArgument (a malformed command id), ErrNoRoute.
func (c *Client) Compact(ctx context.Context, id string, req wire.CompactRequest) (wire.CompactResult, error) {
	var res wire.CompactResult
	err := c.update(ctx, id, wire.UpdateCompact, &res, req)
	return res, callError("compact session", id, err)
}
