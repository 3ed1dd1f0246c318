package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// Cancel during a turn: the model call interrupted, the undispatched
// tool calls skipped.

// Cancel while the model streams: the activity is cancelled, its
// interrupted anchor lands before turn/end{aborted, reason:{kind:user}};
// Cancel returns once the turn ended. Pending inputs are discarded.
func TestTurnCancelMidModel(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tc")
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "partial answer", Hold: true}, &sessiontest.FakeResponse{Text: "after"})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	queued := h.UpdateAt(3*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f2", "discarded"))
	cancel := h.UpdateAt(3*time.Second, "", wire.UpdateCancel, wire.CancelRequest{Cause: "user"})
	var after wire.LoopState
	h.At(4*time.Second, func() { after = h.LoopState() })
	// A followup after the cancel runs its turn.
	next := h.UpdateAt(5*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f3", "again"))
	h.WaitFor(5*time.Second, "turn 2 ended", h.TurnsEnded(2))
	idleCancel := h.UpdateAt(6*time.Second, "", wire.UpdateCancel, wire.CancelRequest{Cause: "parent"})
	badCause := h.UpdateAt(6*time.Second, "", wire.UpdateCancel, wire.CancelRequest{Cause: "disposed"})
	disp := h.UpdateAt(7*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tc", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	queued.OK(t)
	next.OK(t)
	disp.OK(t)
	var cr wire.CancelResult
	cancel.Decode(t, &cr)
	require.True(t, cr.Cancelled)
	require.Equal(t, int64(1), cr.Turn)
	require.Equal(t, "aborted", cr.Reason.Kind)
	require.JSONEq(t, `{"kind":"user"}`, string(cr.Reason.Reason))
	require.Equal(t, []string{"f2"}, cr.Discarded)
	var idle wire.CancelResult
	idleCancel.Decode(t, &idle)
	require.Equal(t, wire.CancelResult{}, idle, "cancel while idle is a no-op")
	require.ErrorContains(t, badCause.Rejection(t), `Cancel: cause must be "user" or "parent", not "disposed"`)
	require.Equal(t, wire.LoopIdle, after.State)
	require.Empty(t, after.Pending.NextTurn)

	evs := sessiontest.Stored(t, h.Store, "tc")
	sessiontest.RequireBalanced(t, evs)
	// The test environment resolves a cancelled activity at once, without
	// waiting for it (WaitForCancellation is not emulated), so the model
	// activity's interrupted anchor is checked on the dev server
	// (testsuite/integration); here the turn closes with the step open.
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}`, string(evs[4].Data))
	var end agent.EndTurnInput
	h.StartedArg(wire.EndTurnActivity, 0, &end)
	require.Equal(t, agent.EndTurnInput{Ref: end.Ref, Turn: 1, Step: 1, MessageSeq: -1, Reason: end.Reason, ExpectSeq: 3}, end, "the workflow's cursor after the opening batch")
	require.Equal(t, []string{"one", "again"}, sessiontest.UserTexts(t, evs))
	require.Len(t, fa.Models, 2)
}

// Cancel while tools run, in a run before the cancel-running-tools
// version: started calls drain, the undispatched ones get their tool/call
// and ABORTED_BEFORE_DISPATCH result from EndTurn, and the turn ends
// aborted. The version's path (the started calls cancelled, each storing
// its ABORTED result under wait-for-cancellation, which the test
// environment does not emulate) is checked on the dev server
// (testsuite/integration TestTurnCancelKillsRunningCommandOnServer and the
// turn-cancel-tool history).
func TestTurnCancelSkipsUndispatchedCalls(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tk")
	h.Env.OnGetVersion("cancel-running-tools", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	slow := &sessiontest.FakeTool{Hold: true, Release: make(chan struct{})}
	calls := []agent.CallRef{{ID: "c1", Name: "slow"}, {ID: "c2", Name: "read", Parallel: true}, {ID: "c3", Name: "read", Parallel: true}}
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Calls: calls})
	fa.Tools["slow"] = slow
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("go"))
	h.AtStarted(2*time.Second, wire.RunToolActivity, func() {})
	cancel := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateCancel, wire.CancelRequest{Cause: "parent"})
	var mid wire.LoopState
	h.AtNoWait(4*time.Second, func() {
		mid = h.LoopState()
		close(slow.Release)
	})
	h.WaitFor(5*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(6*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tk", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	require.Equal(t, wire.LoopRunning, mid.State, "the started call drains before the turn ends")
	require.Equal(t, []wire.CallState{
		{ID: "c1", Name: "slow", Index: 0, State: "running"},
		{ID: "c2", Name: "read", Index: 1, State: "skipped"},
		{ID: "c3", Name: "read", Index: 2, State: "skipped"},
	}, mid.Calls)
	var cr wire.CancelResult
	cancel.Decode(t, &cr)
	require.Equal(t, "aborted", cr.Reason.Kind)
	require.Equal(t, 1, h.Count(wire.RunToolActivity))
	var end agent.EndTurnInput
	h.StartedArg(wire.EndTurnActivity, 0, &end)
	require.Equal(t, []string{"c2", "c3"}, end.Skipped)
	require.Equal(t, int64(3), end.MessageSeq)
	require.Equal(t, int64(1), end.Step)

	evs := sessiontest.Stored(t, h.Store, "tk")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message",
		"tool/call", "tool/result", "tool/call", "tool/result", "tool/call", "tool/result", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"parent"}}}`, string(evs[11].Data))
	require.Len(t, fa.Models, 1)
}
