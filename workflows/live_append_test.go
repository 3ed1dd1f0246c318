package testsuite

// The live phase: the Append update and its validator, coalescing,
// disposal by cancellation or owner unload, continue-as-new.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/internal/sessiontest"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestAppendsCoalesceWithinWindow(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("co")
	turn := sessiontest.LiveTurn(t, 0, 1, "x")
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	a := h.UpdateNoWaitAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[:2]})
	b := h.UpdateNoWaitAt(2*time.Second+50*time.Millisecond, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[2:4]})
	c := h.UpdateNoWaitAt(2*time.Second+150*time.Millisecond, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[4:]})
	late := h.UpdateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 5, 2, "y")})
	disp := h.UpdateAt(4*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "co", Options: &workflows.Options{AppendWindowMs: 200}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	var ra, rb, rc, rl workflows.AppendResult
	a.Decode(t, &ra)
	b.Decode(t, &rb)
	c.Decode(t, &rc)
	late.Decode(t, &rl)
	require.Equal(t, int64(5), ra.NextSeq)
	require.Equal(t, int64(5), rc.NextSeq)
	require.Equal(t, int64(10), rl.NextSeq)
	require.Equal(t, 2, h.Count(activities.AppendBatchName), "three appends in one window, one later")
	evs := sessiontest.Stored(t, h.Store, "co")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 10)
}

// Without an explicit window, appends are group-committed: a lone append is
// stored at once (no timer), and appends that arrive while a store is in
// flight are stored together by the next one.
func TestAppendsGroupCommit(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("gc")
	turn := sessiontest.LiveTurn(t, 0, 1, "x")
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	// The store takes 500 ms; b and c arrive while a's store runs.
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).After(500 * time.Millisecond).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			return h.Acts.AppendBatch(ctx, in)
		})
	a := h.UpdateNoWaitAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[:2]})
	b := h.UpdateNoWaitAt(2*time.Second+100*time.Millisecond, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[2:4]})
	c := h.UpdateNoWaitAt(2*time.Second+200*time.Millisecond, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[4:]})
	disp := h.UpdateAt(4*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "gc"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	var ra, rb, rc workflows.AppendResult
	a.Decode(t, &ra)
	b.Decode(t, &rb)
	c.Decode(t, &rc)
	require.Equal(t, int64(2), ra.NextSeq, "a is stored alone, without waiting for a window")
	require.Equal(t, int64(5), rb.NextSeq)
	require.Equal(t, int64(5), rc.NextSeq, "b and c share the next store")
	require.Equal(t, 2, h.Count(activities.AppendBatchName))
	evs := sessiontest.Stored(t, h.Store, "gc")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 5)
}

func TestAppendValidator(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("val")
	big := sessiontest.Ev(t, "todo/write", 0, map[string]any{"text": strings.Repeat("x", 4096)})
	surface := sessiontest.TurnStart(t, 0, 1)
	surface.SurfaceOp = session.AppendOp()
	var early *sessiontest.Result
	h.At(0, func() {
		early = h.Update("", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.TurnStart(t, 0, 1)}})
	})
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	gap := h.UpdateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.TurnStart(t, 5, 1)}})
	empty := h.UpdateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{})
	tooBig := h.UpdateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{big}})
	invalid := h.UpdateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{surface}})
	first := h.UpdateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	retry := h.UpdateAt(4*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	conflict := h.UpdateAt(5*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "different")})
	after := h.NewResult(workflows.UpdateAppend)
	var disp *sessiontest.Result
	h.At(6*time.Second, func() {
		disp = h.Update("", workflows.UpdateDispose)
		h.Send(after, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.TurnStart(t, 5, 2)}})
	})
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "val", Options: &workflows.Options{MaxBatchBytes: 2048}})
	require.NoError(t, h.Env.GetWorkflowError())

	ready.OK(t)
	require.ErrorContains(t, early.Rejection(t), `session "val" is not live`)
	require.ErrorContains(t, gap.Rejection(t), `append seq mismatch for "val": expected 0 at index 0, got 5`)
	require.ErrorContains(t, empty.Rejection(t), "append batch must not be empty")
	require.ErrorContains(t, tooBig.Rejection(t), "exceeds the batch limit of 2048 bytes")
	require.ErrorContains(t, invalid.Rejection(t), "invalid session event")
	var r workflows.AppendResult
	first.Decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	retry.Decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Equal(t, "SeqMismatch", sessiontest.AppErr(t, conflict.Failure(t)).Type())
	require.ErrorContains(t, after.Rejection(t), `agent "val" lifecycle disposed`)
	disp.OK(t)
	require.Len(t, sessiontest.Stored(t, h.Store, "val"), 5)
}

func TestCancelWhileLiveDisposes(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("cx")
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	pending := h.UpdateNoWaitAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	h.AtNoWait(2*time.Second+10*time.Millisecond, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "cx", Hooks: sessiontest.AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	var r workflows.AppendResult
	pending.Decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Len(t, sessiontest.Stored(t, h.Store, "cx"), 5, "the pending append was drained")
	require.Contains(t, h.Hooks.Log(), "dispose:dispose")
	require.Equal(t, workflows.PhaseClosed, h.Describe("").Phase)
	sessiontest.RequireReleased(t, h.Store, "cx")
}

func TestOwnerUnloadWhileLiveDisposes(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ou")
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	h.At(3*time.Second, func() { h.Env.SignalWorkflow(workflows.SignalOwnerUnload, nil) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ou"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	app.OK(t)
	require.Len(t, sessiontest.Stored(t, h.Store, "ou"), 5)
	sessiontest.RequireReleased(t, h.Store, "ou")
}

func TestAppendFailureFailsPendingAndRecovers(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("af")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, sessiontest.PlainErr("disk full")).Once()
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(h.Acts.AppendBatch)
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	failed := h.UpdateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	again := h.UpdateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateAt(4*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "af"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	sessiontest.RequireMessage(t, failed.Failure(t), "disk full")
	var r workflows.AppendResult
	again.Decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Len(t, sessiontest.Stored(t, h.Store, "af"), 5)
}

func TestContinueAsNewCarriesHandleAndCursor(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("can")
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	first := h.UpdateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	second := h.UpdateNoWaitAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 5, 2, "y")})
	// Suggested while the second append is in flight: it is stored first,
	// then the run continues as new.
	h.AtNoWait(3*time.Second+100*time.Millisecond, func() { h.Env.SetContinueAsNewSuggested(true) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "can", Hooks: workflows.Hooks{DisposeActivity: sessiontest.HookDispose}})
	err := h.Env.GetWorkflowError()
	var sr workflows.AppendResult
	first.OK(t)
	second.Decode(t, &sr)
	require.Equal(t, int64(10), sr.NextSeq)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	require.Equal(t, workflows.LiveSessionName, can.WorkflowType.Name)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	var info workflows.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, info.Handle, state.Handle)
	require.Equal(t, int64(10), state.NextSeq)
	require.Equal(t, int64(2), state.LastTurn)
	require.Equal(t, sessiontest.HookDispose, state.DisposeActivity)
	require.Len(t, sessiontest.Stored(t, h.Store, "can"), 10)
	lease, lerr := h.Store.LeaseOf(context.Background(), "can")
	require.NoError(t, lerr)
	require.Equal(t, state.Handle.HandleID, lease.HandleID, "the lease survives continue-as-new")

	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("can")
	ready2 := h2.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	app2 := h2.UpdateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 10, 3, "z")})
	disp2 := h2.UpdateAt(3*time.Second, "", workflows.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.LiveSession, state)
	require.NoError(t, h2.Env.GetWorkflowError())
	app2.OK(t)
	disp2.OK(t)
	var info2 workflows.SessionInfo
	ready2.Decode(t, &info2)
	require.Equal(t, int64(10), info2.NextSeq)
	require.Equal(t, []string{"dispose:dispose"}, h2.Hooks.Log())
	evs := sessiontest.Stored(t, h.Store, "can")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 15)
	sessiontest.RequireReleased(t, h.Store, "can")
}

func TestForkCopiesParentPrefix(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("child")
	sessiontest.WriteStored(t, h.Store, session.Header{ID: "parent", CreatedAt: 1, Cwd: "/p"}, 0, append(sessiontest.LiveTurn(t, 0, 1, "a"), sessiontest.LiveTurn(t, 5, 2, "b")...))
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 6, 2, "c")})
	disp := h.UpdateAt(3*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "child", Fork: &workflows.ForkSeed{ParentSessionID: "parent", Count: 5}})
	require.NoError(t, h.Env.GetWorkflowError())
	app.OK(t)
	disp.OK(t)
	var info workflows.SessionInfo
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
	h.StartedArg(activities.StoreSeedName, 0, &in)
	require.Empty(t, in.Events)
}

// A disposal drains pending appends; a failed drain is a disposal failure
// (collected between the dispose hook and the close).
func TestDisposeReportsDrainFailure(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("dr")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, sessiontest.PlainErr("disk full"))
	h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	pending := h.UpdateNoWaitAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateNoWaitAt(2*time.Second+10*time.Millisecond, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "dr", Options: &workflows.Options{AppendWindowMs: 200}})
	ready.OK(t)
	sessiontest.RequireMessage(t, pending.Failure(t), "disk full")
	app := sessiontest.AppErr(t, disp.Failure(t))
	require.Equal(t, "AggregateError", app.Type())
	var members []workflows.ErrorInfo
	require.NoError(t, app.Details(&members))
	require.Equal(t, []workflows.ErrorInfo{{Message: "disk full", Type: "Error"}, {Message: "close exploded", Type: "Error"}}, members)
	// Nothing was ever stored, so the close erased it.
	sessiontest.RequireErased(t, h.Store, "dr")
}
