package testsuite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

// The earlier message names stay accepted (docs/API.md: Names): a caller
// still sending "abort", "owner-unload" or querying "describe" gets what the
// current names give.

func TestLegacyAbortSignalStillAbortsSetup(t *testing.T) {
	h := newHarness(t).withID("legacy-abort")
	h.env.OnActivity(hookSetup, mock.Anything, mock.Anything).After(time.Hour).Return(workflows.SetupResult{}, nil)
	h.at(time.Second, func() {
		h.env.SignalWorkflow("abort", workflows.AbortRequest{Reason: "no longer needed"})
	})
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "legacy-abort", Seed: []session.Event{}, Hooks: allHooks})
	requireAbortError(t, h.env.GetWorkflowError(), "legacy-abort", "no longer needed", false)
	require.Equal(t, 0, h.count(hookPublish))
	requireErased(t, h.store, "legacy-abort")
}

func TestLegacyOwnerUnloadSignalStillDisposes(t *testing.T) {
	h := newHarness(t).withID("legacy-ou")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	h.at(3*time.Second, func() { h.env.SignalWorkflow("owner-unload", nil) })
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "legacy-ou"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	app.ok(t)
	require.Equal(t, workflows.PhaseClosed, h.describe("").Phase)
	requireReleased(t, h.store, "legacy-ou")
}

func TestLegacyDescribeQueryStillAnswers(t *testing.T) {
	h := newHarness(t).withID("legacy-describe")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	var legacy, current workflows.Description
	h.at(2*time.Second, func() {
		v, err := h.env.QueryWorkflow("describe")
		require.NoError(t, err)
		require.NoError(t, v.Get(&legacy))
		v, err = h.env.QueryWorkflow("Describe")
		require.NoError(t, err)
		require.NoError(t, v.Get(&current))
		h.env.CancelWorkflow()
	})
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "legacy-describe"})
	ready.ok(t)
	require.Equal(t, workflows.PhaseLive, legacy.Phase)
	require.Equal(t, current, legacy)
}
