package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/wire"
)

// resolveFork turns a fork named by a turn (wire.ForkSeed.Resolved) into a
// fork by count: the ResolveFork activity reads the parent's prefix through
// that turn's turn/end and its result, recorded in history, fills the
// count, the inherited event count, the parent and the cwd the request
// leaves empty. Any other request is returned as it came, with a nil point.
// It runs before planCreate, so the plan validates the resolved request as
// it validates a fork by count.
func (l *lifecycle) resolveFork(ctx workflow.Context, req CreateSessionRequest) (CreateSessionRequest, *activities.ForkPoint, error) {
	if !req.Fork.Resolved() {
		return req, nil, nil
	}
	f := *req.Fork
	switch {
	case f.AtTurn < 0 || f.AtTurn > wire.MaxSafeInteger:
		return req, nil, invalidArgument("fork atTurn must be a positive safe integer")
	case f.AtTurn > 0 && f.AtLastTurn:
		return req, nil, invalidArgument("fork atTurn and atLastTurn are mutually exclusive")
	case f.Count != 0:
		return req, nil, invalidArgument("a fork at a turn takes no count: the workflow resolves it")
	case req.Seed != nil:
		return req, nil, invalidArgument("seed and fork are mutually exclusive")
	case req.InheritedEventCount != 0:
		return req, nil, invalidArgument("a fork at a turn takes no inheritedEventCount: the workflow resolves it")
	}
	if err := wire.ValidateID(req.SessionID); err != nil {
		return req, nil, invalidArgument(err.Error())
	}
	if err := wire.ValidateID(f.ParentSessionID); err != nil {
		return req, nil, invalidArgument("fork parent: " + err.Error())
	}
	if f.ParentSessionID == req.SessionID {
		return req, nil, invalidArgument("a session cannot be forked into itself")
	}
	if err := checkIdentity(ctx, req.SessionID); err != nil {
		return req, nil, err
	}
	// Only a request naming a turn reaches here, and no earlier build
	// understood one, so no recorded run lacks the marker; it dates the
	// ResolveFork activity for later changes of this path.
	_ = workflow.GetVersion(ctx, forkAtTurnChange, workflow.DefaultVersion, 1)
	var point activities.ForkPoint
	err := l.aborts.race(func(c workflow.Context) workflow.Future {
		return workflow.ExecuteActivity(l.set.storeCtx(c), acts.ResolveFork, activities.ResolveForkInput{
			ParentSessionID: f.ParentSessionID,
			AtTurn:          f.AtTurn,
			AtLastTurn:      f.AtLastTurn,
		})
	}, &point)
	if err != nil {
		return req, nil, err
	}
	f.Count = point.Count
	req.Fork = &f
	req.InheritedEventCount = point.Count
	meta := wire.SessionMeta{}
	if req.Meta != nil {
		meta = *req.Meta
	}
	meta.IsSeeded = true
	if meta.ParentSession == "" {
		meta.ParentSession = f.ParentSessionID
	}
	if meta.Cwd == "" {
		meta.Cwd = point.Cwd
	}
	req.Meta = &meta
	return req, &point, nil
}

// forkOptions returns the agent options and logged permissions of a
// created session: the request's; for a fork at a turn, the route the
// prefix records where the request names none (as a resume takes the
// log's, storedRoute), and the prefix's permission facts, already in the
// child's log.
func forkOptions(o *wire.AgentOptions, point *activities.ForkPoint) (*wire.AgentOptions, *activities.LoggedPermissions) {
	if point == nil {
		return o, nil
	}
	return storedRoute(o, point.Route), point.Permissions
}
