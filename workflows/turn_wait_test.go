package workflows_test

// WaitTurn and Followup{wait}: an update that completes with the end of
// the turn it waits for.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

func waitPrompt(id, text string) wire.InputRequest {
	r := sessiontest.PromptID(id, text)
	r.Wait = true
	return r
}

// A Followup with wait and a WaitTurn sent while the turn runs both
// complete with the ended turn; a wait for a turn that already ended is
// answered at once; requests naming no turn or both are refused.
func TestWaitTurnAnsweredAtTurnEnd(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("wt")
	first := &sessiontest.FakeResponse{Text: "answer", Hold: true}
	sessiontest.NewFakeAgent(h, first)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateNoWaitAt(2*time.Second, "", wire.UpdateFollowup, waitPrompt("m-1", "hi"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	byMsg := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{MessageID: "m-1"})
	byTurn := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{Turn: 1})
	var mid wire.LoopState
	h.AtNoWait(4*time.Second, func() {
		mid = h.LoopState()
		close(first.Release)
	})
	h.WaitFor(5*time.Second, "turn 1 ended", h.TurnsEnded(1))
	again := h.UpdateAt(6*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{Turn: 1})
	unknown := h.UpdateAt(6*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{MessageID: "never-sent"})
	none := h.UpdateAt(6*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{})
	both := h.UpdateAt(6*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{Turn: 1, MessageID: "m-1"})
	disp := h.UpdateAt(7*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "wt", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	require.Equal(t, wire.LoopRunning, mid.State, "the waits were sent while the turn ran")

	var in wire.InputResult
	fu.Decode(t, &in)
	require.Equal(t, "m-1", in.MessageID)
	require.NotNil(t, in.Ended, "a Followup with wait returns the ended turn")
	require.Equal(t, int64(1), in.Ended.Turn)
	require.Equal(t, "completed", in.Ended.Reason.Kind)
	require.Equal(t, int64(0), in.Ended.StartSeq)
	require.Equal(t, int64(6), in.Ended.EndSeq)
	require.Equal(t, int64(1), in.Ended.Steps)
	require.Equal(t, []string{"m-1"}, in.Ended.Claimed)
	for _, r := range []*sessiontest.Result{byMsg, byTurn, again} {
		var info wire.TurnInfo
		r.Decode(t, &info)
		require.Equal(t, *in.Ended, info)
	}
	app := sessiontest.AppErr(t, unknown.Failure(t))
	require.Equal(t, "NoSuchTurn", app.Type())
	require.Equal(t, `agent "wt" cannot wait for the turn of message "never-sent": it is neither pending, running nor among the recent turns`, app.Message())
	require.ErrorContains(t, none.Rejection(t), "WaitTurn: give exactly one of a positive turn and a messageId")
	require.ErrorContains(t, both.Rejection(t), "WaitTurn: give exactly one of a positive turn and a messageId")
}

// A turn aborted by Cancel answers its waits with reason aborted; the
// wait of a message the cancel discarded is answered NoSuchTurn; a
// refused model call answers with reason error.
func TestWaitTurnAbortedAndError(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("wc")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "partial", Hold: true},
		&sessiontest.FakeResponse{Refuse: &provider.Error{Status: 400, Code: "invalid_request", Message: "bad request"}})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateNoWaitAt(2*time.Second, "", wire.UpdateFollowup, waitPrompt("f1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	queued := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateFollowup, waitPrompt("f2", "discarded"))
	cancel := h.UpdateNoWaitAt(4*time.Second, "", wire.UpdateCancel, wire.CancelRequest{Cause: "user"})
	h.WaitFor(5*time.Second, "turn 1 ended", h.TurnsEnded(1))
	refused := h.UpdateAt(6*time.Second, "", wire.UpdateFollowup, waitPrompt("f3", "refused"))
	disp := h.UpdateAt(7*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "wc", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	cancel.OK(t)
	disp.OK(t)
	var in wire.InputResult
	fu.Decode(t, &in)
	require.Equal(t, int64(1), in.Ended.Turn)
	require.Equal(t, "aborted", in.Ended.Reason.Kind)
	require.JSONEq(t, `{"kind":"user"}`, string(in.Ended.Reason.Reason))
	app := sessiontest.AppErr(t, queued.Failure(t))
	require.Equal(t, "NoSuchTurn", app.Type())
	var ref wire.InputResult
	refused.Decode(t, &ref)
	require.Equal(t, int64(2), ref.Ended.Turn)
	require.Equal(t, "error", ref.Ended.Reason.Kind)
	require.JSONEq(t, `{"message":"bad request","code":"invalid_request","status":400}`, string(ref.Ended.Reason.Error))
}

// Dispose answers a wait for a turn that will not come with
// LifecycleDisposed, and a wait for the running turn with its aborted end.
func TestWaitTurnDisposed(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("wd")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "so far", Hold: true})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	future := h.UpdateNoWaitAt(2*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{Turn: 2})
	fu := h.UpdateNoWaitAt(2*time.Second, "", wire.UpdateFollowup, waitPrompt("d1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	disp := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "wd", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	app := sessiontest.AppErr(t, future.Failure(t))
	require.Equal(t, "LifecycleDisposed", app.Type())
	require.Equal(t, `agent "wd" lifecycle disposed`, app.Message())
	var in wire.InputResult
	fu.Decode(t, &in)
	require.Equal(t, "aborted", in.Ended.Reason.Kind)
	require.JSONEq(t, `{"kind":"disposed"}`, string(in.Ended.Reason.Reason))
}

// Continue-as-new answers a wait for a turn still to come with
// TurnWaitMoved before the run ends; the next run answers a wait for a
// turn of the previous run at once, and a Followup with wait at its end.
func TestWaitTurnAcrossContinueAsNew(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("wn")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "one"})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, waitPrompt("n1", "one"))
	future := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{Turn: 2})
	h.AtNoWait(4*time.Second, func() { h.Env.SetContinueAsNewSuggested(true) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "wn", AgentOptions: sessiontest.Route()})
	err := h.Env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	ready.OK(t)
	var in wire.InputResult
	fu.Decode(t, &in)
	require.Equal(t, "completed", in.Ended.Reason.Kind)
	app := sessiontest.AppErr(t, future.Failure(t))
	require.Equal(t, "TurnWaitMoved", app.Type())
	require.False(t, app.NonRetryable())
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))

	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("wn")
	sessiontest.NewFakeAgent(h2, &sessiontest.FakeResponse{Text: "two"})
	old := h2.UpdateAt(time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{MessageID: "n1"})
	moved := h2.UpdateNoWaitAt(time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{Turn: 2})
	fu2 := h2.UpdateNoWaitAt(2*time.Second, "", wire.UpdateFollowup, waitPrompt("n2", "two"))
	h2.WaitFor(3*time.Second, "turn 2 ended", h2.TurnsEnded(2))
	disp := h2.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.LiveSession, state)
	require.NoError(t, h2.Env.GetWorkflowError())
	disp.OK(t)
	var info wire.TurnInfo
	old.Decode(t, &info)
	require.Equal(t, *in.Ended, info)
	var in2 wire.InputResult
	fu2.Decode(t, &in2)
	require.Equal(t, int64(2), in2.Ended.Turn)
	require.Equal(t, "completed", in2.Ended.Reason.Kind)
	var info2 wire.TurnInfo
	moved.Decode(t, &info2)
	require.Equal(t, *in2.Ended, info2)
}
