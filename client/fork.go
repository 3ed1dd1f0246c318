package client

import (
	"context"

	"github.com/sessionflow/sessionflow/wire"
)

// ForkRequest names a fork: the session forked, the new session's id and
// the turn whose end the fork copies through.
type ForkRequest struct {
	// ParentID is the session forked. It is only read: live or not, it is
	// left as it is.
	ParentID string
	// NewID is the id of the new session.
	NewID string
	// AtTurn is the turn whose turn/end ends the copied prefix (>= 1); 0
	// forks at the parent's last completed turn.
	AtTurn int64
	// Cwd is the new session's working directory; empty takes the
	// parent's.
	Cwd string
	// AgentOptions are the new session's agent options; a route left empty
	// takes the one the copied prefix records, as a resume does.
	AgentOptions *wire.AgentOptions
}

// CreateRequest returns the CreateSession request of a fork: a ForkSeed
// naming the turn (atTurn, or atLastTurn when AtTurn is 0), which the
// workflow resolves to the parent's prefix through that turn's turn/end.
// Other SDKs start CreateSession with the same input (docs/API.md: Fork).
func (r ForkRequest) CreateRequest() wire.CreateSessionRequest {
	fork := &wire.ForkSeed{ParentSessionID: r.ParentID, AtTurn: r.AtTurn, AtLastTurn: r.AtTurn == 0}
	return wire.CreateSessionRequest{
		SessionID:    r.NewID,
		Fork:         fork,
		Meta:         &wire.SessionMeta{Cwd: r.Cwd, ParentSession: r.ParentID, IsSeeded: true},
		AgentOptions: r.AgentOptions,
	}
}

// Fork creates a live session whose log starts with ParentID's events
// through the end of turn AtTurn (its last completed turn when AtTurn is
// 0), then the {"inherited":true} end-seed marker, with the lineage the
// harness writes (header parentSession, isSeeded; the parent's cwd); the
// parent is untouched. It waits until the session is live, as Create does.
// A turn still open or never started fails with ErrInvalidArgument before
// anything is created; an unknown parent with the store's SessionNotFound.
func (c *Client) Fork(ctx context.Context, req ForkRequest, opts ...CallOption) (*Session, error) {
	switch {
	case req.NewID == "":
		return nil, invalidArgument("", "fork: the new session id is required")
	case req.ParentID == "":
		return nil, invalidArgument(req.NewID, "fork: the parent session id is required")
	case req.ParentID == req.NewID:
		return nil, invalidArgument(req.NewID, "fork: the new session id must differ from the parent's")
	case req.AtTurn < 0:
		return nil, invalidArgument(req.NewID, "fork: the turn must be 1 or more (0: the last completed turn), got %d", req.AtTurn)
	}
	return c.Create(ctx, req.CreateRequest(), opts...)
}
