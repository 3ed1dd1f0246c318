package workflows_test

// Behaviour of the agent loop's inbox around a running turn: what a cancel
// keeps, how queued followups become turns, and waits for messages never
// sent.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// A cancel with keepInbox keeps the inputs queued during the turn; neither
// they nor the cancelled turn start a turn by themselves; the next waking
// input starts one that claims them, in order.
func TestCancelKeepInboxKeepsInputsWithoutWaking(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("keep")
	first := &sessiontest.FakeResponse{Text: "partial", Hold: true}
	fake := sessiontest.NewFakeAgent(h, first, &sessiontest.FakeResponse{Text: "two"}, &sessiontest.FakeResponse{Text: "three"})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	f1 := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	f2 := h.UpdateAt(3*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f2", "kept followup"))
	s2 := h.UpdateAt(3*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s2", "kept steer"))
	cancel := h.UpdateAt(4*time.Second, "", wire.UpdateCancel, wire.CancelRequest{Cause: "user", KeepInbox: true})
	// An hour later the loop is still idle with both inputs pending.
	var later wire.LoopState
	var callsLater int
	h.At(time.Hour, func() {
		later = h.LoopState()
		callsLater = h.Count(wire.CallModelActivity)
	})
	f3 := h.UpdateAt(time.Hour+time.Second, "", wire.UpdateFollowup, waitPrompt("f3", "wake up"))
	var final wire.LoopState
	h.At(time.Hour+30*time.Second, func() { final = h.LoopState() })
	disp := h.UpdateAt(time.Hour+time.Minute, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "keep", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	f1.OK(t)
	f2.OK(t)
	s2.OK(t)
	disp.OK(t)
	var cr wire.CancelResult
	cancel.Decode(t, &cr)
	require.True(t, cr.Cancelled)
	require.Equal(t, "aborted", cr.Reason.Kind)
	require.Empty(t, cr.Discarded, "keepInbox discarded inputs")

	require.Equal(t, wire.LoopIdle, later.State, "the kept inputs or the cancelled turn started a turn")
	require.Equal(t, int64(1), later.LastTurn)
	require.Equal(t, []string{"f2"}, later.Pending.NextTurn)
	require.Equal(t, []string{"s2"}, later.Pending.NextStep)
	require.Equal(t, 1, callsLater, "a model call ran before the next waking input")

	// The waking input starts turn 2, which claims the kept followup and
	// steer; the waking input itself is the next turn's.
	var in wire.InputResult
	f3.Decode(t, &in)
	require.NotNil(t, in.Ended)
	require.Equal(t, int64(3), in.Ended.Turn)
	require.Equal(t, []string{"f3"}, in.Ended.Claimed)
	require.Len(t, final.Recent, 3)
	require.Equal(t, int64(2), final.Recent[1].Turn)
	require.Equal(t, "completed", final.Recent[1].Reason.Kind)
	require.Equal(t, []string{"s2", "f2"}, final.Recent[1].Claimed, "turn 2 claims the kept inputs (next-step first, LIFECYCLE.md §13.2)")
	require.Len(t, fake.Models, 3)
}

// Two Followups queued while a turn runs become two turns, one each, and
// each WaitTurn for them is answered with its own turn.
func TestTwoQueuedFollowupsBecomeTwoTurns(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("two")
	first := &sessiontest.FakeResponse{Text: "first", Hold: true}
	sessiontest.NewFakeAgent(h, first, &sessiontest.FakeResponse{Text: "second"}, &sessiontest.FakeResponse{Text: "third"})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	f1 := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	f2 := h.UpdateAt(3*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f2", "two"))
	f3 := h.UpdateAt(3*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f3", "three"))
	w2 := h.UpdateNoWaitAt(4*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{MessageID: "f2"})
	w3 := h.UpdateNoWaitAt(4*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{MessageID: "f3"})
	var mid wire.LoopState
	h.AtNoWait(5*time.Second, func() {
		mid = h.LoopState()
		close(first.Release)
	})
	// Dispose waits for both waits to settle.
	disp := h.UpdateAt(7*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "two", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	f1.OK(t)
	disp.OK(t)
	require.Equal(t, wire.LoopRunning, mid.State)
	require.Equal(t, []string{"f2", "f3"}, mid.Pending.NextTurn)
	for _, f := range []*sessiontest.Result{f2, f3} {
		var in wire.InputResult
		f.Decode(t, &in)
		require.Equal(t, wire.TargetNextTurn, in.Target)
		require.Equal(t, int64(1), in.Turn, "queued while turn 1 ran")
	}
	for i, w := range []*sessiontest.Result{w2, w3} {
		var info wire.TurnInfo
		w.Decode(t, &info)
		want := int64(i + 2)
		require.Equal(t, want, info.Turn)
		require.Equal(t, []string{[]string{"f2", "f3"}[i]}, info.Claimed)
		require.Equal(t, "completed", info.Reason.Kind)
	}
}

// A WaitTurn for a message never sent, while a turn runs, is answered
// NoSuchTurn, not with the running turn nor after it.
func TestWaitTurnForUnsentMessageWhileRunning(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("unsent")
	first := &sessiontest.FakeResponse{Text: "busy", Hold: true}
	sessiontest.NewFakeAgent(h, first)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	f1 := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	var before wire.LoopState
	h.AtNoWait(3*time.Second, func() { before = h.LoopState() })
	unsent := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{MessageID: "never-sent"})
	var after wire.LoopState
	var answered bool
	h.AtNoWait(4*time.Second, func() {
		after = h.LoopState()
		answered = unsent.Settled()
		close(first.Release)
	})
	h.WaitFor(5*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(6*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "unsent", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	f1.OK(t)
	disp.OK(t)
	require.Equal(t, wire.LoopRunning, before.State, "the wait was sent while turn 1 ran")
	require.Equal(t, wire.LoopRunning, after.State, "turn 1 still ran")
	require.True(t, answered, "the wait was not answered while turn 1 ran")
	app := sessiontest.AppErr(t, unsent.Failure(t))
	require.Equal(t, "NoSuchTurn", app.Type())
	require.Equal(t, `agent "unsent" cannot wait for the turn of message "never-sent": it is neither pending, running nor among the recent turns`, app.Message())
}
