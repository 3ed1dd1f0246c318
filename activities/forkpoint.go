package activities

import (
	"context"
	"errors"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// ResolveForkInput names a fork point by turn: the end of turn AtTurn of
// the parent, or of its last completed turn with AtLastTurn.
type ResolveForkInput struct {
	// ParentSessionID is the session forked; it is only read.
	ParentSessionID string `json:"parentSessionId"`
	// AtTurn is the turn whose turn/end ends the prefix (>= 1), or 0 with
	// AtLastTurn.
	AtTurn int64 `json:"atTurn,omitempty"`
	// AtLastTurn picks the last turn that has a turn/end.
	AtLastTurn bool `json:"atLastTurn,omitempty"`
}

// ForkPoint is a resolved fork point: how many leading events of the
// parent the fork copies, and what the prefix records that the fork child
// takes over (bounded: never events).
type ForkPoint struct {
	// Count is the prefix length: the seq of the turn's turn/end plus one.
	Count int64 `json:"count"`
	// Turn is the turn the prefix ends with.
	Turn int64 `json:"turn"`
	// Cwd is the parent's working directory, empty when it has none.
	Cwd string `json:"cwd,omitempty"`
	// Route is the model route the prefix records (its last
	// request/context), nil when none.
	Route *Route `json:"route,omitempty"`
	// Permissions are the permission facts the prefix records, nil when
	// none.
	Permissions *LoggedPermissions `json:"permissions,omitempty"`
}

// errForkPointFound stops the scan at the requested turn's end.
var errForkPointFound = errors.New("fork point found")

// ResolveFork reads the parent session (never writing it, whoever owns it)
// and returns the fork point of in: the prefix through the turn/end of the
// requested turn. A turn that never started, or that has no turn/end yet (it
// is still running, or it was torn by a crash not yet repaired), is refused
// as an invalid argument, as the harness refuses a boundary inside an open
// turn; so is a parent without any completed turn for AtLastTurn. It is a
// pure read, so a retry returns the same point as long as the prefix is
// unchanged (a stored prefix never changes).
func (a *Activities) ResolveFork(ctx context.Context, in ResolveForkInput) (ForkPoint, error) {
	st, err := a.store()
	if err != nil {
		return ForkPoint{}, err
	}
	p, err := cancellable(a.runtime(), ctx, func(ctx context.Context) (ForkPoint, error) {
		return a.resolveFork(ctx, st, in)
	})
	return p, MapError(err)
}

func (a *Activities) resolveFork(ctx context.Context, st *jsonl.Store, in ResolveForkInput) (ForkPoint, error) {
	if (in.AtTurn > 0) == in.AtLastTurn || in.AtTurn < 0 || in.AtTurn > wire.MaxSafeInteger {
		return ForkPoint{}, invalid("a fork point is a positive turn or the last completed turn, got atTurn %d, atLastTurn %t", in.AtTurn, in.AtLastTurn)
	}
	parent, err := st.Open(ctx, in.ParentSessionID, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return ForkPoint{}, err
	}
	defer parent.Close(context.WithoutCancel(ctx))
	var (
		route   routeFold
		perm    session.PermissionFold
		point   *ForkPoint
		started int64
	)
	_, _, err = a.scan(ctx, parent, func(e session.Event) error {
		route.observe(e)
		perm.Add(e)
		switch e.Type {
		case wire.TypeTurnStart:
			if ts, err := e.TurnStart(); err == nil {
				started = max(started, ts.Turn)
			}
		case wire.TypeTurnEnd:
			te, err := e.TurnEnd()
			if err != nil || te.Turn < 1 || (!in.AtLastTurn && te.Turn != in.AtTurn) {
				return nil
			}
			point = &ForkPoint{Count: e.Seq + 1, Turn: te.Turn, Route: route.last, Permissions: loggedPermissions(&perm)}
			if !in.AtLastTurn {
				return errForkPointFound
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errForkPointFound) {
		return ForkPoint{}, err
	}
	switch {
	case point != nil:
	case in.AtLastTurn:
		return ForkPoint{}, invalid("cannot fork session %q at its last turn: it has no completed turn", in.ParentSessionID)
	case in.AtTurn <= started:
		return ForkPoint{}, invalid("cannot fork session %q at turn %d: the turn has not ended", in.ParentSessionID, in.AtTurn)
	default:
		return ForkPoint{}, invalid("cannot fork session %q at turn %d: its last turn is %d", in.ParentSessionID, in.AtTurn, started)
	}
	if point.Route != nil {
		r := *point.Route
		point.Route = &r
	}
	point.Cwd = parent.Header().Cwd
	return *point, nil
}
