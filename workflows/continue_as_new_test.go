package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// Continue-as-new: a live session's next run carries its handle, its
// cursor and its inbox, and waits for a running turn.

func TestContinueAsNewCarriesHandleAndCursor(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("can")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	first := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	second := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 5, 2, "y")})
	// Suggested while the second append is in flight: it is stored first,
	// then the run continues as new.
	h.AtNoWait(3*time.Second+100*time.Millisecond, func() { h.Env.SetContinueAsNewSuggested(true) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "can", Hooks: wire.Hooks{DisposeActivity: sessiontest.HookDispose}})
	err := h.Env.GetWorkflowError()
	var sr wire.AppendResult
	first.OK(t)
	second.Decode(t, &sr)
	require.Equal(t, int64(10), sr.NextSeq)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	require.Equal(t, wire.LiveSessionName, can.WorkflowType.Name)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	var info wire.SessionInfo
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
	ready2 := h2.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app2 := h2.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 10, 3, "z")})
	disp2 := h2.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.LiveSession, state)
	require.NoError(t, h2.Env.GetWorkflowError())
	app2.OK(t)
	disp2.OK(t)
	var info2 wire.SessionInfo
	ready2.Decode(t, &info2)
	require.Equal(t, int64(10), info2.NextSeq)
	require.Equal(t, []string{"dispose:dispose"}, h2.Hooks.Log())
	evs := sessiontest.Stored(t, h.Store, "can")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 15)
	sessiontest.RequireReleased(t, h.Store, "can")
}

// Continue-as-new happens only while idle and carries the pending inputs
// and the recent turns: the next run claims the carried inject.
func TestTurnContinueAsNewCarriesInbox(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tn")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "one"})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	inj := h.UpdateAt(3*time.Second, "", wire.UpdateInject, sessiontest.PromptID("i1", "carried"))
	h.At(4*time.Second, func() { h.Env.SetContinueAsNewSuggested(true) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tn", AgentOptions: sessiontest.Route()})
	err := h.Env.GetWorkflowError()
	ready.OK(t)
	fu.OK(t)
	inj.OK(t)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	require.NotNil(t, state.Inbox)
	require.Len(t, state.Inbox.NextStep, 1)
	require.Equal(t, "i1", state.Inbox.NextStep[0].ID)
	require.True(t, state.Inbox.NextStep[0].Stored)
	require.Len(t, state.RecentTurns, 1)
	require.Equal(t, sessiontest.Route(), state.AgentOptions)
	require.Equal(t, int64(1), state.LastTurn)

	// The next run.
	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("tn")
	fa2 := sessiontest.NewFakeAgent(h2, &sessiontest.FakeResponse{Text: "two"})
	fu2 := h2.UpdateAt(time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f2", "two"))
	h2.WaitFor(time.Second, "turn 2 ended", h2.TurnsEnded(2))
	var st wire.LoopState
	h2.At(2*time.Second, func() { st = h2.LoopState() })
	disp := h2.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.LiveSession, state)
	require.NoError(t, h2.Env.GetWorkflowError())
	fu2.OK(t)
	disp.OK(t)
	require.Len(t, st.Recent, 2)
	require.Equal(t, []string{"i1", "f2"}, st.Recent[1].Claimed)
	evs := sessiontest.Stored(t, h.Store, "tn")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"one", "carried", "two"}, sessiontest.UserTexts(t, evs))
	require.Equal(t, int64(2), fa2.Models[0].Turn)
}

// Continue-as-new suggested during a turn waits for the turn to end.
func TestTurnContinueAsNewWaitsForTheTurn(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tw")
	first := &sessiontest.FakeResponse{Text: "long", Hold: true}
	sessiontest.NewFakeAgent(h, first)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() { h.Env.SetContinueAsNewSuggested(true) })
	var mid wire.LoopState
	h.At(3*time.Second, func() {
		mid = h.LoopState()
		close(first.Release)
	})
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tw", AgentOptions: sessiontest.Route()})
	err := h.Env.GetWorkflowError()
	ready.OK(t)
	fu.OK(t)
	require.Equal(t, wire.LoopRunning, mid.State, "still running after the suggestion")
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	evs := sessiontest.Stored(t, h.Store, "tw")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, int64(len(evs)), state.NextSeq)
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Len(t, state.RecentTurns, 1)
	require.NotNil(t, state.Inbox)
	require.Empty(t, state.Inbox.NextTurn, "nothing pending")
	require.Empty(t, state.Inbox.NextStep, "nothing pending")
	require.False(t, state.Inbox.Wake)
	require.Len(t, state.Inbox.Claimed, 1, "the claimed input is kept, so that its update delivered again to the next run is not stored twice")
	require.Equal(t, state.RecentTurns[0].Claimed, []string{state.Inbox.Claimed[0].ID})
}
