package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// routedTurn is a complete turn of six events at seq whose request/context
// names provider/model.
func routedTurn(t *testing.T, seq, turn int64, provider, model string) []session.Event {
	return []session.Event{
		ev(t, wire.TypeTurnStart, seq, map[string]any{"turn": turn}),
		ev(t, wire.TypeStepStart, seq+1, map[string]any{"turn": turn, "step": 1}),
		ev(t, wire.TypeRequestContext, seq+2, map[string]any{"provider": provider, "model": model}),
		ev(t, wire.TypeStepEnd, seq+3, map[string]any{"turn": turn, "step": 1}),
		ev(t, wire.TypeTurnEnd, seq+4, map[string]any{"turn": turn, "reason": map[string]any{"kind": "completed"}}),
		ev(t, wire.TypeApprovalPolicy, seq+5, map[string]any{"policy": map[bool]string{true: "never", false: "on-request"}[turn == 1]}),
	}
}

// The fork point of a turn carries what the prefix through that turn
// records: its route, its permission facts (not the later turn's), the
// parent's cwd; the parent stays readable and unchanged.
func TestResolveForkTakesThePrefixFacts(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	st, err := a.Runtime.Sessions()
	require.NoError(t, err)
	h, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: "p", CreatedAt: 1, Cwd: "/w"}, jsonl.CreateOptions{HandleID: "h1"})
	require.NoError(t, err)
	evs := append(routedTurn(t, 0, 1, "one", "m1"), routedTurn(t, 6, 2, "two", "m2")...)
	require.NoError(t, h.Append(ctx, evs))
	// The parent's writer stays open: a fork reads a live parent.
	defer h.Close(ctx)

	p, err := a.ResolveFork(ctx, activities.ResolveForkInput{ParentSessionID: "p", AtTurn: 1})
	require.NoError(t, err)
	require.Equal(t, int64(5), p.Count, "through turn 1's turn/end, not the approval/policy after it")
	require.Equal(t, int64(1), p.Turn)
	require.Equal(t, "/w", p.Cwd)
	require.Equal(t, &activities.Route{Provider: "one", Model: "m1"}, p.Route)
	require.Nil(t, p.Permissions, "the approval/policy after turn 1's end is not in the prefix")

	p, err = a.ResolveFork(ctx, activities.ResolveForkInput{ParentSessionID: "p", AtLastTurn: true})
	require.NoError(t, err)
	require.Equal(t, int64(11), p.Count)
	require.Equal(t, int64(2), p.Turn)
	require.Equal(t, &activities.Route{Provider: "two", Model: "m2"}, p.Route)
	require.NotNil(t, p.Permissions)
	require.Equal(t, "never", p.Permissions.ApprovalPolicy)

	_, err = a.ResolveFork(ctx, activities.ResolveForkInput{ParentSessionID: "absent", AtTurn: 1})
	typ, nonRetryable := appType(t, err)
	require.Equal(t, string(wire.CodeNotFound), typ)
	require.True(t, nonRetryable)

	_, err = a.ResolveFork(ctx, activities.ResolveForkInput{ParentSessionID: "p"})
	typ, _ = appType(t, err)
	require.Equal(t, wire.ErrTypeInvalidArgument, typ)
}
