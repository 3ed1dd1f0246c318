package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// A live session's disposal: cancelled, unloaded by its owner, or
// disposed with a drain that fails.

func TestCancelWhileLiveDisposes(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("cx")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	pending := h.UpdateNoWaitAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	h.AtNoWait(2*time.Second+10*time.Millisecond, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "cx", Hooks: sessiontest.AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	var r wire.AppendResult
	pending.Decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Len(t, sessiontest.Stored(t, h.Store, "cx"), 5, "the pending append was drained")
	require.Contains(t, h.Hooks.Log(), "dispose:dispose")
	require.Equal(t, wire.PhaseClosed, h.Describe("").Phase)
	sessiontest.RequireReleased(t, h.Store, "cx")
}

func TestOwnerUnloadWhileLiveDisposes(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ou")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	h.At(3*time.Second, func() { h.Env.SignalWorkflow(wire.SignalOwnerUnload, nil) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ou"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	app.OK(t)
	require.Len(t, sessiontest.Stored(t, h.Store, "ou"), 5)
	sessiontest.RequireReleased(t, h.Store, "ou")
}

// A disposal drains pending appends; a failed drain is a disposal failure
// (collected between the dispose hook and the close).
func TestDisposeReportsDrainFailure(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("dr")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, sessiontest.PlainErr("disk full"))
	h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	pending := h.UpdateNoWaitAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateNoWaitAt(2*time.Second+10*time.Millisecond, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "dr", Options: &wire.Options{AppendWindowMs: 200}})
	ready.OK(t)
	sessiontest.RequireMessage(t, pending.Failure(t), "disk full")
	app := sessiontest.AppErr(t, disp.Failure(t))
	require.Equal(t, "AggregateError", app.Type())
	var members []wire.ErrorInfo
	require.NoError(t, app.Details(&members))
	require.Equal(t, []wire.ErrorInfo{{Message: "disk full", Type: "Error"}, {Message: "close exploded", Type: "Error"}}, members)
	// Nothing was ever stored, so the close erased it.
	sessiontest.RequireErased(t, h.Store, "dr")
}
