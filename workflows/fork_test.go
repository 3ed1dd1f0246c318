package workflows_test

// A fork: the parent's prefix copied, the setup events after the marker.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// On a fork the setup hook is told the session's length after the copied
// prefix and its end-seed marker (Count + 1), and its events are stored
// right after the marker.
func TestForkSetupEventsFollowTheMarker(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("fs")
	sessiontest.WriteStored(t, h.Store, wire.Header{ID: "parent", CreatedAt: 1, Cwd: "/p"}, 0, append(sessiontest.LiveTurn(t, 0, 1, "a"), sessiontest.LiveTurn(t, 5, 2, "b")...))
	var seen []int64
	h.Hooks.SetupFunc = func(_ context.Context, in wire.SetupInput) (workflows.SetupResult, error) {
		seen = append(seen, in.EventCount)
		return workflows.SetupResult{Events: []session.Event{sessiontest.Ev(t, wire.TypeTodoWrite, in.EventCount, map[string]any{"todos": []any{}})}}, nil
	}
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "fs", Fork: &wire.ForkSeed{ParentSessionID: "parent", Count: 5}, Hooks: sessiontest.AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	disp.OK(t)
	require.Equal(t, []int64{6}, seen)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, int64(7), info.NextSeq)
	evs := sessiontest.Stored(t, h.Store, "fs")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 7)
	require.Equal(t, "session/end-seed", evs[5].Type)
	require.Equal(t, "todo/write", evs[6].Type)
}

func TestForkCopiesParentPrefix(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("child")
	sessiontest.WriteStored(t, h.Store, wire.Header{ID: "parent", CreatedAt: 1, Cwd: "/p"}, 0, append(sessiontest.LiveTurn(t, 0, 1, "a"), sessiontest.LiveTurn(t, 5, 2, "b")...))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 6, 2, "c")})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "child", Fork: &wire.ForkSeed{ParentSessionID: "parent", Count: 5}})
	require.NoError(t, h.Env.GetWorkflowError())
	app.OK(t)
	disp.OK(t)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, int64(6), info.NextSeq)
	require.Equal(t, int64(5), info.InheritedEventCount)
	require.Equal(t, int64(1), info.LastTurn)
	require.True(t, info.Header.IsSeeded)
	require.Equal(t, "parent", info.Header.ParentSession)
	evs := sessiontest.Stored(t, h.Store, "child")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 11)
	inherited, err := evs[5].IsInheritedMarker()
	require.NoError(t, err)
	require.True(t, inherited)
	// The fork's events never went through history: no activity input
	// carried them.
	var in activities.StoreSeedInput
	h.StartedArg(wire.StoreSeedName, 0, &in)
	require.Empty(t, in.Events)
}
