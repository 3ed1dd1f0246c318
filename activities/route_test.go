package activities_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The scan and the repair report the route of the log's last
// request/context with a provider and a model; one without them, one with
// a name longer than the bound and one whose provider is not a string
// leave the route recorded before.
func TestScanLogReportsTheLastRecordedRoute(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	long := strings.Repeat("m", activities.MaxRouteNameBytes+1)
	seedSession(t, a, "r", []session.Event{
		ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1}),
		ev(t, wire.TypeRequestContext, 1, map[string]any{"provider": "p1", "model": "m1"}),
		ev(t, wire.TypeRequestContext, 2, map[string]any{"provider": "deepseek-official", "model": "deepseek-v4-pro", "contextWindow": 1000000}),
		ev(t, wire.TypeTurnEnd, 3, map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}}),
		ev(t, wire.TypeTurnStart, 4, map[string]any{"turn": 2}),
		ev(t, wire.TypeRequestContext, 5, map[string]any{"provider": "p3"}),
		ev(t, wire.TypeRequestContext, 6, map[string]any{"provider": "p4", "model": long}),
		ev(t, wire.TypeRequestContext, 7, map[string]any{"provider": 4, "model": "m5"}),
		ev(t, wire.TypeRequestContext, 8, map[string]any{"provider": "", "model": "m6"}),
	})
	info, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "r", Access: jsonl.AccessWrite, HandleID: "w"})
	require.NoError(t, err)
	want := &activities.Route{Provider: "deepseek-official", Model: "deepseek-v4-pro"}
	sum, err := a.ScanLog(ctx, activities.HandleInput{Ref: info.Ref})
	require.NoError(t, err)
	require.Equal(t, want, sum.Route)
	rep, err := a.Repair(ctx, activities.RepairInput{Ref: info.Ref, Now: 9})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Appended, "the closer of turn 2 and the marker")
	require.Equal(t, want, rep.Scan.Route)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}

// A log without request/context reports no route.
func TestScanLogWithoutRequestContextHasNoRoute(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	seedSession(t, a, "n", []session.Event{
		ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1}),
		ev(t, wire.TypeTurnEnd, 1, map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}}),
	})
	info, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "n", Access: jsonl.AccessWrite, HandleID: "w"})
	require.NoError(t, err)
	rep, err := a.Repair(ctx, activities.RepairInput{Ref: info.Ref, Now: 9})
	require.NoError(t, err)
	require.Nil(t, rep.Scan.Route)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}
