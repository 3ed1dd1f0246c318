package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// The earlier message names stay accepted (docs/API.md: Names): a caller
// still sending "abort", "owner-unload" or querying "describe" gets what the
// current names give.

func TestLegacyAbortSignalStillAbortsSetup(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("legacy-abort")
	h.Env.OnActivity(sessiontest.HookSetup, mock.Anything, mock.Anything).After(time.Hour).Return(workflows.SetupResult{}, nil)
	h.At(time.Second, func() {
		h.Env.SignalWorkflow("abort", wire.AbortRequest{Reason: "no longer needed"})
	})
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "legacy-abort", Seed: []session.Event{}, Hooks: sessiontest.AllHooks})
	requireAbortError(t, h.Env.GetWorkflowError(), "legacy-abort", "no longer needed", false)
	require.Equal(t, 0, h.Count(sessiontest.HookPublish))
	sessiontest.RequireErased(t, h.Store, "legacy-abort")
}

func TestLegacyOwnerUnloadSignalStillDisposes(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("legacy-ou")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	h.At(3*time.Second, func() { h.Env.SignalWorkflow("owner-unload", nil) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "legacy-ou"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	app.OK(t)
	require.Equal(t, wire.PhaseClosed, h.Describe("").Phase)
	sessiontest.RequireReleased(t, h.Store, "legacy-ou")
}

func TestLegacyDescribeQueryStillAnswers(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("legacy-describe")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var legacy, current wire.Description
	h.At(2*time.Second, func() {
		v, err := h.Env.QueryWorkflow("describe")
		require.NoError(t, err)
		require.NoError(t, v.Get(&legacy))
		v, err = h.Env.QueryWorkflow("Describe")
		require.NoError(t, err)
		require.NoError(t, v.Get(&current))
		h.Env.CancelWorkflow()
	})
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "legacy-describe"})
	ready.OK(t)
	require.Equal(t, wire.PhaseLive, legacy.Phase)
	require.Equal(t, current, legacy)
}
