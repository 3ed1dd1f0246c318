package testsuite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

// On a fork the setup hook is told the session's length after the copied
// prefix and its end-seed marker (Count + 1), and its events are stored
// right after the marker.
func TestForkSetupEventsFollowTheMarker(t *testing.T) {
	h := newHarness(t).withID("fs")
	writeStored(t, h.store, session.Header{ID: "parent", CreatedAt: 1, Cwd: "/p"}, 0, append(liveTurn(t, 0, 1, "a"), liveTurn(t, 5, 2, "b")...))
	var seen []int64
	h.hooks.setup = func(_ context.Context, in workflows.SetupInput) (workflows.SetupResult, error) {
		seen = append(seen, in.EventCount)
		return workflows.SetupResult{Events: []session.Event{ev(t, session.TypeTodoWrite, in.EventCount, map[string]any{"todos": []any{}})}}, nil
	}
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.updateAt(2*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "fs", Fork: &workflows.ForkSeed{ParentSessionID: "parent", Count: 5}, Hooks: allHooks})
	require.NoError(t, h.env.GetWorkflowError())
	disp.ok(t)
	require.Equal(t, []int64{6}, seen)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Equal(t, int64(7), info.NextSeq)
	evs := stored(t, h.store, "fs")
	requireContiguous(t, evs)
	require.Len(t, evs, 7)
	require.Equal(t, "session/end-seed", evs[5].Type)
	require.Equal(t, "todo/write", evs[6].Type)
}
