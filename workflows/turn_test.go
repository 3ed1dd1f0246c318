package workflows_test

// The agent loop's turns in a live session: a plain turn, the LoopState
// query, and the turn's ends (refused, max tokens, step limit, a failed
// model activity, a dispose mid-turn), with Append refused while a turn
// runs.

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestTurnPlain(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tp")
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("m-1", "hi"))
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	var st wire.LoopState
	h.At(3*time.Second, func() { st = h.LoopState() })
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tp", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	var in wire.InputResult
	fu.Decode(t, &in)
	require.Equal(t, wire.InputResult{MessageID: "m-1", Target: "next-turn", SplicedSeq: -1}, in)

	evs := sessiontest.Stored(t, h.Store, "tp")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Equal(t, `{"id":"m-1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`, string(evs[2].Data))
	require.Equal(t, "append", evs[2].SurfaceOp.Op)
	require.Equal(t, []agent.ModelInput{{Ref: fa.Models[0].Ref, Turn: 1, Step: 1, Provider: "scripted", Model: "m1", Compacts: true,
		Policy: &agent.ContextPolicy{SandboxMode: "workspace-write", ApprovalPolicy: "never"}, RecordCalls: true, ParallelLimit: 10}}, fa.Models)

	require.Equal(t, wire.LoopIdle, st.State)
	require.Equal(t, int64(1), st.LastTurn)
	require.Equal(t, int64(6), st.NextSeq)
	require.Len(t, st.Recent, 1)
	require.Equal(t, []string{"m-1"}, st.Recent[0].Claimed)
	require.Equal(t, int64(0), st.Recent[0].StartSeq)
	require.Equal(t, int64(6), st.Recent[0].EndSeq)
	require.Equal(t, int64(1), st.Recent[0].Steps)
	require.Equal(t, "completed", st.Recent[0].Reason.Kind)
	// Plain turn: one batch of the workflow's events, the model call, EndTurn.
	require.Equal(t, 1, h.Count(wire.EndTurnActivity))
}

// A refused model call ends the turn "error" with the provider's message
// and code; the session stays live and runs the next turn.
func TestTurnProviderRefused(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tr")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Refuse: &provider.Error{Status: 400, Code: "invalid_request", Message: "bad request"}}, &sessiontest.FakeResponse{Text: "fine"})
	h.RunTurns(workflows.CreateSessionRequest{SessionID: "tr", AgentOptions: sessiontest.Route()}, sessiontest.Prompt("one"), sessiontest.Prompt("two"))
	require.Equal(t, 2, h.Count(wire.CallModelActivity), "a refused call is not retried")
	evs := sessiontest.Stored(t, h.Store, "tr")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, `{"turn":1,"reason":{"kind":"error","error":{"message":"bad request","code":"invalid_request","status":400}}}`, string(evs[4].Data))
	require.Equal(t, []string{"error", "completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}

// max-tokens is sticky: a later step that completes keeps the turn's
// max-tokens end. A finish of max-tokens runs no tool calls.
func TestTurnMaxTokensSticky(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tm")
	first := &sessiontest.FakeResponse{Text: "cut", Finish: provider.FinishMaxTokens, Hold: true}
	sessiontest.NewFakeAgent(h, first, &sessiontest.FakeResponse{Text: "rest"})
	evs := h.RunSteeredTurn(workflows.CreateSessionRequest{SessionID: "tm", AgentOptions: sessiontest.Route()}, first.Release)
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end",
		"step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, []string{"max-tokens"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}

// maxSteps: a turn that would open one more step ends "blocked" without a
// step/start.
func TestTurnStepLimitBlocked(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tb")
	call := func(i int) *sessiontest.FakeResponse {
		return &sessiontest.FakeResponse{Calls: []agent.CallRef{{ID: "c" + strconv.Itoa(i), Name: "read", Parallel: true}}}
	}
	sessiontest.NewFakeAgent(h, call(1), call(2), call(3))
	opts := sessiontest.Route()
	two := 2.0
	opts.MaxSteps = &two
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "tb", AgentOptions: opts}, sessiontest.Prompt("loop"))
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/result",
		"step/end", "step/start", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, []string{"blocked"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Equal(t, 2, h.Count(wire.CallModelActivity))
}

// Append is refused while a turn runs, with the TurnRunning type, and
// accepted again between turns.
func TestTurnAppendRefusedWhileRunning(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ta")
	first := &sessiontest.FakeResponse{Text: "x", Hold: true}
	sessiontest.NewFakeAgent(h, first)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	during := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.Ev(t, "todo/write", 3, map[string]any{"x": 1})}})
	h.At(3*time.Second, func() { close(first.Release) })
	h.WaitFor(3*time.Second, "turn 1 ended", h.TurnsEnded(1))
	between := h.UpdateAt(4*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.Ev(t, "todo/write", 6, map[string]any{"x": 1})}})
	disp := h.UpdateAt(5*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ta", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	app := sessiontest.RequireMessage(t, during.Rejection(t), `agent "ta" is running turn 1; append between turns`)
	require.Equal(t, "TurnRunning", app.Type())
	require.True(t, app.NonRetryable())
	var r wire.AppendResult
	between.Decode(t, &r)
	require.Equal(t, int64(7), r.NextSeq)
	evs := sessiontest.Stored(t, h.Store, "ta")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, "todo/write", evs[6].Type)
}

// Dispose during a turn cancels it with cause "disposed", waits for its
// end, then disposes.
func TestTurnDisposeMidTurn(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("td")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "so far", Hold: true})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "td", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	var dr wire.DisposeResult
	disp.Decode(t, &dr)
	evs := sessiontest.Stored(t, h.Store, "td")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, int64(len(evs)), dr.NextSeq)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}`, string(evs[4].Data))
	sessiontest.RequireReleased(t, h.Store, "td")
	names := h.StartedNames()
	require.Less(t, slices.Index(names, wire.EndTurnActivity), slices.Index(names, wire.CloseHandleName))
}

// Any other failure of the model activity ends the turn "error" with the
// activity error's type as the code.
func TestTurnModelActivityFailure(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tf")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Err: temporal.NewNonRetryableApplicationError(`unknown model provider "nope"`, "UnknownProvider", nil)})
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "tf", AgentOptions: sessiontest.Route()}, sessiontest.Prompt("one"))
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, `{"turn":1,"reason":{"kind":"error","error":{"message":"unknown model provider \"nope\"","code":"UnknownProvider"}}}`, string(evs[len(evs)-1].Data))
}
