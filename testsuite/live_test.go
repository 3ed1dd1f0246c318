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
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestAppendsCoalesceWithinWindow(t *testing.T) {
	h := newHarness(t).withID("co")
	turn := liveTurn(t, 0, 1, "x")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	a := h.updateNoWaitAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[:2]})
	b := h.updateNoWaitAt(2*time.Second+50*time.Millisecond, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[2:4]})
	c := h.updateNoWaitAt(2*time.Second+150*time.Millisecond, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[4:]})
	late := h.updateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 5, 2, "y")})
	disp := h.updateAt(4*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "co", Options: &workflows.Options{AppendWindowMs: 200}})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	disp.ok(t)
	var ra, rb, rc, rl workflows.AppendResult
	a.decode(t, &ra)
	b.decode(t, &rb)
	c.decode(t, &rc)
	late.decode(t, &rl)
	require.Equal(t, int64(5), ra.NextSeq)
	require.Equal(t, int64(5), rc.NextSeq)
	require.Equal(t, int64(10), rl.NextSeq)
	require.Equal(t, 2, h.count(activities.AppendBatchName), "three appends in one window, one later")
	evs := stored(t, h.store, "co")
	requireContiguous(t, evs)
	require.Len(t, evs, 10)
}

// Without an explicit window, appends are group-committed: a lone append is
// stored at once (no timer), and appends that arrive while a store is in
// flight are stored together by the next one.
func TestAppendsGroupCommit(t *testing.T) {
	h := newHarness(t).withID("gc")
	turn := liveTurn(t, 0, 1, "x")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	// The store takes 500 ms; b and c arrive while a's store runs.
	h.env.OnActivity(h.acts.AppendBatch, mock.Anything, mock.Anything).After(500 * time.Millisecond).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			return h.acts.AppendBatch(ctx, in)
		})
	a := h.updateNoWaitAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[:2]})
	b := h.updateNoWaitAt(2*time.Second+100*time.Millisecond, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[2:4]})
	c := h.updateNoWaitAt(2*time.Second+200*time.Millisecond, "", workflows.UpdateAppend, workflows.AppendRequest{Events: turn[4:]})
	disp := h.updateAt(4*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "gc"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	disp.ok(t)
	var ra, rb, rc workflows.AppendResult
	a.decode(t, &ra)
	b.decode(t, &rb)
	c.decode(t, &rc)
	require.Equal(t, int64(2), ra.NextSeq, "a is stored alone, without waiting for a window")
	require.Equal(t, int64(5), rb.NextSeq)
	require.Equal(t, int64(5), rc.NextSeq, "b and c share the next store")
	require.Equal(t, 2, h.count(activities.AppendBatchName))
	evs := stored(t, h.store, "gc")
	requireContiguous(t, evs)
	require.Len(t, evs, 5)
}

func TestAppendValidator(t *testing.T) {
	h := newHarness(t).withID("val")
	big := ev(t, "todo/write", 0, map[string]any{"text": strings.Repeat("x", 4096)})
	surface := turnStart(t, 0, 1)
	surface.SurfaceOp = session.AppendOp()
	var early *result
	h.at(0, func() {
		early = h.update("", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{turnStart(t, 0, 1)}})
	})
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	gap := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{turnStart(t, 5, 1)}})
	empty := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{})
	tooBig := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{big}})
	invalid := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{surface}})
	first := h.updateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	retry := h.updateAt(4*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	conflict := h.updateAt(5*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "different")})
	after := h.newResult(workflows.UpdateAppend)
	var disp *result
	h.at(6*time.Second, func() {
		disp = h.update("", workflows.UpdateDispose)
		h.send(after, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{turnStart(t, 5, 2)}})
	})
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "val", Options: &workflows.Options{MaxBatchBytes: 2048}})
	require.NoError(t, h.env.GetWorkflowError())

	ready.ok(t)
	require.ErrorContains(t, early.rejection(t), `session "val" is not live`)
	require.ErrorContains(t, gap.rejection(t), `append seq mismatch for "val": expected 0 at index 0, got 5`)
	require.ErrorContains(t, empty.rejection(t), "append batch must not be empty")
	require.ErrorContains(t, tooBig.rejection(t), "exceeds the batch limit of 2048 bytes")
	require.ErrorContains(t, invalid.rejection(t), "invalid session event")
	var r workflows.AppendResult
	first.decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	retry.decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Equal(t, "SeqMismatch", appErr(t, conflict.failure(t)).Type())
	require.ErrorContains(t, after.rejection(t), `agent "val" lifecycle disposed`)
	disp.ok(t)
	require.Len(t, stored(t, h.store, "val"), 5)
}

func TestCancelWhileLiveDisposes(t *testing.T) {
	h := newHarness(t).withID("cx")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	pending := h.updateNoWaitAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	h.atNoWait(2*time.Second+10*time.Millisecond, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "cx", Hooks: allHooks})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	var r workflows.AppendResult
	pending.decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Len(t, stored(t, h.store, "cx"), 5, "the pending append was drained")
	require.Contains(t, h.hooks.log(), "dispose:dispose")
	require.Equal(t, workflows.PhaseClosed, h.describe("").Phase)
	requireReleased(t, h.store, "cx")
}

func TestOwnerUnloadWhileLiveDisposes(t *testing.T) {
	h := newHarness(t).withID("ou")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	h.at(3*time.Second, func() { h.env.SignalWorkflow(workflows.SignalOwnerUnload, nil) })
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ou"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	app.ok(t)
	require.Len(t, stored(t, h.store, "ou"), 5)
	requireReleased(t, h.store, "ou")
}

func TestAppendFailureFailsPendingAndRecovers(t *testing.T) {
	h := newHarness(t).withID("af")
	h.env.OnActivity(h.acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, plainErr("disk full")).Once()
	h.env.OnActivity(h.acts.AppendBatch, mock.Anything, mock.Anything).Return(h.acts.AppendBatch)
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	failed := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	again := h.updateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	disp := h.updateAt(4*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "af"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	disp.ok(t)
	requireMessage(t, failed.failure(t), "disk full")
	var r workflows.AppendResult
	again.decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Len(t, stored(t, h.store, "af"), 5)
}

func TestContinueAsNewCarriesHandleAndCursor(t *testing.T) {
	h := newHarness(t).withID("can")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	first := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	second := h.updateNoWaitAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 5, 2, "y")})
	// Suggested while the second append is in flight: it is stored first,
	// then the run continues as new.
	h.atNoWait(3*time.Second+100*time.Millisecond, func() { h.env.SetContinueAsNewSuggested(true) })
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "can", Hooks: workflows.Hooks{DisposeActivity: hookDispose}})
	err := h.env.GetWorkflowError()
	var sr workflows.AppendResult
	first.ok(t)
	second.decode(t, &sr)
	require.Equal(t, int64(10), sr.NextSeq)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	require.Equal(t, workflows.LiveSessionName, can.WorkflowType.Name)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Equal(t, info.Handle, state.Handle)
	require.Equal(t, int64(10), state.NextSeq)
	require.Equal(t, int64(2), state.LastTurn)
	require.Equal(t, hookDispose, state.DisposeActivity)
	require.Len(t, stored(t, h.store, "can"), 10)
	lease, lerr := h.store.LeaseOf(context.Background(), "can")
	require.NoError(t, lerr)
	require.Equal(t, state.Handle.HandleID, lease.HandleID, "the lease survives continue-as-new")

	h2 := newHarnessOn(t, h.store).withID("can")
	ready2 := h2.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app2 := h2.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 10, 3, "z")})
	disp2 := h2.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h2.env.ExecuteWorkflow(workflows.LiveSession, state)
	require.NoError(t, h2.env.GetWorkflowError())
	app2.ok(t)
	disp2.ok(t)
	var info2 workflows.SessionInfo
	ready2.decode(t, &info2)
	require.Equal(t, int64(10), info2.NextSeq)
	require.Equal(t, []string{"dispose:dispose"}, h2.hooks.log())
	evs := stored(t, h.store, "can")
	requireContiguous(t, evs)
	require.Len(t, evs, 15)
	requireReleased(t, h.store, "can")
}

func TestForkCopiesParentPrefix(t *testing.T) {
	h := newHarness(t).withID("child")
	writeStored(t, h.store, session.Header{ID: "parent", CreatedAt: 1, Cwd: "/p"}, 0, append(liveTurn(t, 0, 1, "a"), liveTurn(t, 5, 2, "b")...))
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 6, 2, "c")})
	disp := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "child", Fork: &workflows.ForkSeed{ParentSessionID: "parent", Count: 5}})
	require.NoError(t, h.env.GetWorkflowError())
	app.ok(t)
	disp.ok(t)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Equal(t, int64(6), info.NextSeq)
	require.Equal(t, int64(5), info.InheritedEventCount)
	require.Equal(t, int64(1), info.LastTurn)
	require.True(t, info.Header.IsSeeded)
	require.Equal(t, "parent", info.Header.ParentSession)
	evs := stored(t, h.store, "child")
	requireContiguous(t, evs)
	require.Len(t, evs, 11)
	inherited, err := evs[5].IsInheritedMarker()
	require.NoError(t, err)
	require.True(t, inherited)
	// The fork's events never went through history: no activity input
	// carried them.
	var in activities.StoreSeedInput
	h.startedArg(activities.StoreSeedName, 0, &in)
	require.Empty(t, in.Events)
}

// A disposal drains pending appends; a failed drain is a disposal failure
// (collected between the dispose hook and the close).
func TestDisposeReportsDrainFailure(t *testing.T) {
	h := newHarness(t).withID("dr")
	h.env.OnActivity(h.acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, plainErr("disk full"))
	h.env.OnActivity(h.acts.CloseHandle, mock.Anything, mock.Anything).Return(closeErr(h.acts, "close exploded"))
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	pending := h.updateNoWaitAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	disp := h.updateNoWaitAt(2*time.Second+10*time.Millisecond, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "dr", Options: &workflows.Options{AppendWindowMs: 200}})
	ready.ok(t)
	requireMessage(t, pending.failure(t), "disk full")
	app := appErr(t, disp.failure(t))
	require.Equal(t, "AggregateError", app.Type())
	var members []workflows.ErrorInfo
	require.NoError(t, app.Details(&members))
	require.Equal(t, []workflows.ErrorInfo{{Message: "disk full", Type: "Error"}, {Message: "close exploded", Type: "Error"}}, members)
	// Nothing was ever stored, so the close erased it.
	requireErased(t, h.store, "dr")
}
