package testsuite

// The agent loop of a live session: Followup, Steer, Inject, Cancel, the
// LoopState query, turns and steps, tool calls, and the turn's ends.

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/internal/sessiontest"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestTurnPlain(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tp")
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.PromptID("m-1", "hi"))
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	var st workflows.LoopState
	h.At(3*time.Second, func() { st = h.LoopState() })
	disp := h.UpdateAt(4*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tp", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	var in workflows.InputResult
	fu.Decode(t, &in)
	require.Equal(t, workflows.InputResult{MessageID: "m-1", Target: "next-turn", SplicedSeq: -1}, in)

	evs := sessiontest.Stored(t, h.Store, "tp")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Equal(t, `{"id":"m-1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`, string(evs[2].Data))
	require.Equal(t, "append", evs[2].SurfaceOp.Op)
	require.Equal(t, []agent.ModelInput{{Ref: fa.Models[0].Ref, Turn: 1, Step: 1, Provider: "scripted", Model: "m1"}}, fa.Models)

	require.Equal(t, workflows.LoopIdle, st.State)
	require.Equal(t, int64(1), st.LastTurn)
	require.Equal(t, int64(6), st.NextSeq)
	require.Len(t, st.Recent, 1)
	require.Equal(t, []string{"m-1"}, st.Recent[0].Claimed)
	require.Equal(t, int64(0), st.Recent[0].StartSeq)
	require.Equal(t, int64(6), st.Recent[0].EndSeq)
	require.Equal(t, int64(1), st.Recent[0].Steps)
	require.Equal(t, "completed", st.Recent[0].Reason.Kind)
	// Plain turn: one batch of the workflow's events, the model call, EndTurn.
	require.Equal(t, 1, h.Count(agent.EndTurnActivity))
}

// A step's tool calls: parallel-safe ones run in a rolling pool of
// maxParallelToolCalls, an exclusive one runs alone once every earlier call
// finished, and later calls wait for it.
func TestTurnToolsPoolAndBarrier(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tt")
	par := func(id string) agent.CallRef { return agent.CallRef{ID: id, Name: "read", Parallel: true} }
	calls := []agent.CallRef{par("c1"), par("c2"), par("c3"), {ID: "c4", Name: "write"}, par("c5"), par("c6")}
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Calls: calls}, &sessiontest.FakeResponse{Text: "done"})
	fa.Tools["read"] = &sessiontest.FakeTool{Duration: 300 * time.Millisecond}
	fa.Tools["write"] = &sessiontest.FakeTool{Duration: 100 * time.Millisecond}
	opts := sessiontest.Route()
	two := 2.0
	opts.MaxParallelToolCalls = &two
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "tt", AgentOptions: opts}, sessiontest.Prompt("go"))
	sessiontest.RequireBalanced(t, evs)

	// Every call dispatched once, with its model-order index.
	byIndex := make([]string, h.Count(agent.RunToolActivity))
	require.Len(t, byIndex, 6)
	for i := range byIndex {
		var in agent.ToolInput
		h.StartedArg(agent.RunToolActivity, i, &in)
		require.Equal(t, int64(3), in.MessageSeq)
		byIndex[in.Index] = in.CallID
	}
	require.Equal(t, []string{"c1", "c2", "c3", "c4", "c5", "c6"}, byIndex)
	require.Equal(t, 2, fa.MaxConc, "the pool holds at most two calls")
	starts := map[string][]string{}
	for _, s := range fa.Starts {
		slices.Sort(s.Running)
		starts[s.ID] = s.Running
	}
	require.Empty(t, starts["c4"], "the exclusive call starts alone")
	require.Less(t, slices.Index(fa.Ends, "c3"), slices.Index(fa.Ends, "c4"))
	for _, id := range []string{"c5", "c6"} {
		require.NotContains(t, starts[id], "c4", "calls after the barrier wait for it")
		require.Less(t, slices.Index(fa.Ends, "c4"), slices.Index(fa.Ends, id))
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		require.Less(t, slices.Index(fa.Ends, id), slices.Index(fa.Ends, "c4"))
	}

	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	n := 0
	for _, e := range evs {
		if e.Type == session.TypeToolResult {
			n++
		}
	}
	require.Equal(t, 6, n)
	// Step 2 answers after the tools.
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message"}, sessiontest.Types(evs[:4]))
	require.Equal(t, []string{"step/end", "step/start", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs[len(evs)-5:]))
	require.Len(t, fa.Models, 2)
	require.Equal(t, int64(2), fa.Models[1].Step)
}

// A Steer while the model streams is claimed by the next step of the same
// turn; a Followup sent during the turn starts the next turn.
func TestTurnSteerAndFollowupDuringTurn(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ts")
	first := &sessiontest.FakeResponse{Text: "first", Hold: true}
	fa := sessiontest.NewFakeAgent(h, first, &sessiontest.FakeResponse{Text: "second"}, &sessiontest.FakeResponse{Text: "third"})
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, agent.CallModelActivity, func() {})
	steer := h.UpdateAt(3*time.Second, "", workflows.UpdateSteer, sessiontest.PromptID("s1", "steer"))
	later := h.UpdateAt(3*time.Second, "", workflows.UpdateFollowup, sessiontest.PromptID("f2", "two"))
	var mid workflows.LoopState
	h.At(3*time.Second, func() {
		mid = h.LoopState()
		close(first.Release)
	})
	h.WaitFor(4*time.Second, "two turns ended", h.TurnsEnded(2))
	var st workflows.LoopState
	h.At(5*time.Second, func() { st = h.LoopState() })
	disp := h.UpdateAt(6*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ts", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	var sr, lr workflows.InputResult
	steer.Decode(t, &sr)
	later.Decode(t, &lr)
	require.Equal(t, int64(1), sr.Turn, "queued during turn 1")
	require.Equal(t, "next-step", sr.Target)
	require.Equal(t, "next-turn", lr.Target)

	require.Equal(t, workflows.LoopRunning, mid.State)
	require.Equal(t, int64(1), mid.Turn)
	require.Equal(t, int64(1), mid.Step)
	require.Equal(t, []string{"f2"}, mid.Pending.NextTurn)
	require.Equal(t, []string{"s1"}, mid.Pending.NextStep)

	evs := sessiontest.Stored(t, h.Store, "ts")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message",
		"step/end", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
	}, sessiontest.Types(evs))
	require.Equal(t, []string{"one", "steer", "two"}, sessiontest.UserTexts(t, evs))
	require.Equal(t, []string{"completed", "completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Len(t, st.Recent, 2)
	require.Equal(t, []string{"f1", "s1"}, st.Recent[0].Claimed)
	require.Equal(t, []string{"f2"}, st.Recent[1].Claimed)
	require.Equal(t, int64(10), st.Recent[1].StartSeq)
	require.Len(t, fa.Models, 3)
}

// An Inject while idle is stored as agent/inbox/spliced and wakes nothing;
// the next turn claims it (with a deletion splice) before its followup.
func TestTurnInjectIdle(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ti")
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "ok"})
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	inj := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, sessiontest.PromptID("i1", "context"))
	var idle workflows.LoopState
	h.At(10*time.Second, func() { idle = h.LoopState() })
	fu := h.UpdateAt(11*time.Second, "", workflows.UpdateFollowup, sessiontest.PromptID("f1", "question"))
	h.WaitFor(11*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(12*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ti", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	var ir workflows.InputResult
	inj.Decode(t, &ir)
	require.Equal(t, workflows.InputResult{MessageID: "i1", Target: "next-step", SplicedSeq: 0}, ir)
	require.Equal(t, workflows.LoopIdle, idle.State)
	require.Equal(t, []string{"i1"}, idle.Pending.NextStep)
	require.Empty(t, idle.Recent, "an inject wakes nothing")

	evs := sessiontest.Stored(t, h.Store, "ti")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start", "user/message", "user/message",
		"assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, `{"target":"next-step","start":0,"inserted":[{"id":"i1","role":"user","content":[{"type":"text","text":"context"}],"source":{"kind":"user"}}]}`, string(evs[0].Data))
	require.Equal(t, `{"target":"next-step","start":0,"removedCount":1,"inserted":[]}`, string(evs[2].Data))
	require.Equal(t, []string{"context", "question"}, sessiontest.UserTexts(t, evs))
	require.Len(t, fa.Models, 1)
}

// Cancel while the model streams: the activity is cancelled, its
// interrupted anchor lands before turn/end{aborted, reason:{kind:user}};
// Cancel returns once the turn ended. Pending inputs are discarded.
func TestTurnCancelMidModel(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tc")
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "partial answer", Hold: true}, &sessiontest.FakeResponse{Text: "after"})
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, agent.CallModelActivity, func() {})
	queued := h.UpdateAt(3*time.Second, "", workflows.UpdateFollowup, sessiontest.PromptID("f2", "discarded"))
	cancel := h.UpdateAt(3*time.Second, "", workflows.UpdateCancel, workflows.CancelRequest{Cause: "user"})
	var after workflows.LoopState
	h.At(4*time.Second, func() { after = h.LoopState() })
	// A followup after the cancel runs its turn.
	next := h.UpdateAt(5*time.Second, "", workflows.UpdateFollowup, sessiontest.PromptID("f3", "again"))
	h.WaitFor(5*time.Second, "turn 2 ended", h.TurnsEnded(2))
	idleCancel := h.UpdateAt(6*time.Second, "", workflows.UpdateCancel, workflows.CancelRequest{Cause: "parent"})
	badCause := h.UpdateAt(6*time.Second, "", workflows.UpdateCancel, workflows.CancelRequest{Cause: "disposed"})
	disp := h.UpdateAt(7*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tc", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	queued.OK(t)
	next.OK(t)
	disp.OK(t)
	var cr workflows.CancelResult
	cancel.Decode(t, &cr)
	require.True(t, cr.Cancelled)
	require.Equal(t, int64(1), cr.Turn)
	require.Equal(t, "aborted", cr.Reason.Kind)
	require.JSONEq(t, `{"kind":"user"}`, string(cr.Reason.Reason))
	require.Equal(t, []string{"f2"}, cr.Discarded)
	var idle workflows.CancelResult
	idleCancel.Decode(t, &idle)
	require.Equal(t, workflows.CancelResult{}, idle, "cancel while idle is a no-op")
	require.ErrorContains(t, badCause.Rejection(t), `Cancel: cause must be "user" or "parent", not "disposed"`)
	require.Equal(t, workflows.LoopIdle, after.State)
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
	h.StartedArg(agent.EndTurnActivity, 0, &end)
	require.Equal(t, agent.EndTurnInput{Ref: end.Ref, Turn: 1, Step: 1, MessageSeq: -1, Reason: end.Reason}, end)
	require.Equal(t, []string{"one", "again"}, sessiontest.UserTexts(t, evs))
	require.Len(t, fa.Models, 2)
}

// Cancel while tools run: started calls drain, the undispatched ones get
// their tool/call and ABORTED_BEFORE_DISPATCH result from EndTurn, and the
// turn ends aborted.
func TestTurnCancelSkipsUndispatchedCalls(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tk")
	slow := &sessiontest.FakeTool{Hold: true, Release: make(chan struct{})}
	calls := []agent.CallRef{{ID: "c1", Name: "slow"}, {ID: "c2", Name: "read", Parallel: true}, {ID: "c3", Name: "read", Parallel: true}}
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Calls: calls})
	fa.Tools["slow"] = slow
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.Prompt("go"))
	h.AtStarted(2*time.Second, agent.RunToolActivity, func() {})
	cancel := h.UpdateNoWaitAt(3*time.Second, "", workflows.UpdateCancel, workflows.CancelRequest{Cause: "parent"})
	var mid workflows.LoopState
	h.AtNoWait(4*time.Second, func() {
		mid = h.LoopState()
		close(slow.Release)
	})
	h.WaitFor(5*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(6*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tk", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	require.Equal(t, workflows.LoopRunning, mid.State, "the started call drains before the turn ends")
	require.Equal(t, []workflows.CallState{
		{ID: "c1", Name: "slow", Index: 0, State: "running"},
		{ID: "c2", Name: "read", Index: 1, State: "skipped"},
		{ID: "c3", Name: "read", Index: 2, State: "skipped"},
	}, mid.Calls)
	var cr workflows.CancelResult
	cancel.Decode(t, &cr)
	require.Equal(t, "aborted", cr.Reason.Kind)
	require.Equal(t, 1, h.Count(agent.RunToolActivity))
	var end agent.EndTurnInput
	h.StartedArg(agent.EndTurnActivity, 0, &end)
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

// A refused model call ends the turn "error" with the provider's message
// and code; the session stays live and runs the next turn.
func TestTurnProviderRefused(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tr")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Refuse: &provider.Error{Status: 400, Code: "invalid_request", Message: "bad request"}}, &sessiontest.FakeResponse{Text: "fine"})
	h.RunTurns(workflows.CreateSessionRequest{SessionID: "tr", AgentOptions: sessiontest.Route()}, sessiontest.Prompt("one"), sessiontest.Prompt("two"))
	require.Equal(t, 2, h.Count(agent.CallModelActivity), "a refused call is not retried")
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
	require.Equal(t, 2, h.Count(agent.CallModelActivity))
}

// Append is refused while a turn runs, with the TurnRunning type, and
// accepted again between turns.
func TestTurnAppendRefusedWhileRunning(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ta")
	first := &sessiontest.FakeResponse{Text: "x", Hold: true}
	sessiontest.NewFakeAgent(h, first)
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.Prompt("one"))
	h.AtStarted(2*time.Second, agent.CallModelActivity, func() {})
	during := h.UpdateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.Ev(t, "todo/write", 3, map[string]any{"x": 1})}})
	h.At(3*time.Second, func() { close(first.Release) })
	h.WaitFor(3*time.Second, "turn 1 ended", h.TurnsEnded(1))
	between := h.UpdateAt(4*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.Ev(t, "todo/write", 6, map[string]any{"x": 1})}})
	disp := h.UpdateAt(5*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ta", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	app := sessiontest.RequireMessage(t, during.Rejection(t), `agent "ta" is running turn 1; append between turns`)
	require.Equal(t, "TurnRunning", app.Type())
	require.True(t, app.NonRetryable())
	var r workflows.AppendResult
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
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.Prompt("one"))
	h.AtStarted(2*time.Second, agent.CallModelActivity, func() {})
	disp := h.UpdateAt(3*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "td", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	var dr workflows.DisposeResult
	disp.Decode(t, &dr)
	evs := sessiontest.Stored(t, h.Store, "td")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, int64(len(evs)), dr.NextSeq)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}`, string(evs[4].Data))
	sessiontest.RequireReleased(t, h.Store, "td")
	names := h.StartedNames()
	require.Less(t, slices.Index(names, agent.EndTurnActivity), slices.Index(names, activities.CloseHandleName))
}

// The input updates' validators: a live session, a route for waking
// inputs, non-empty lossless content, unique ids, the batch limit.
func TestTurnInputValidators(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tv")
	sessiontest.NewFakeAgent(h)
	var early *sessiontest.Result
	h.At(0, func() { early = h.Update("", workflows.UpdateFollowup, sessiontest.Prompt("x")) })
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	empty := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, sessiontest.Prompt(""))
	none := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, workflows.InputRequest{})
	blocks := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, workflows.InputRequest{Content: json.RawMessage(`[]`)})
	noType := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, workflows.InputRequest{Content: json.RawMessage(`[{"text":"a"}]`)})
	lossy := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, workflows.InputRequest{Content: json.RawMessage(`[{"type":"x","n":1e400}]`)})
	big := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, sessiontest.Prompt(string(make([]byte, 3000))))
	noRoute := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.Prompt("x"))
	first := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, sessiontest.PromptID("dup", "a"))
	dup := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, sessiontest.PromptID("dup", "b"))
	disp := h.UpdateAt(3*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tv", Options: &workflows.Options{MaxBatchBytes: 2048}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	first.OK(t)
	require.ErrorContains(t, early.Rejection(t), `session "tv" is not live`)
	require.ErrorContains(t, empty.Rejection(t), "Inject: content must not be empty")
	require.ErrorContains(t, none.Rejection(t), "Inject: content is required")
	require.ErrorContains(t, blocks.Rejection(t), "Inject: content must not be empty")
	require.ErrorContains(t, noType.Rejection(t), `Inject: content[0] must be an object with a non-empty string "type"`)
	require.ErrorContains(t, lossy.Rejection(t), "Inject: content is not losslessly JSON-serializable")
	require.Equal(t, "BatchTooLarge", sessiontest.AppErr(t, big.Rejection(t)).Type())
	require.ErrorContains(t, noRoute.Rejection(t), `agent "tv" has no provider/model`)
	require.ErrorContains(t, dup.Rejection(t), `Inject: message "dup" is already pending`)
}

// Continue-as-new happens only while idle and carries the pending inputs
// and the recent turns: the next run claims the carried inject.
func TestTurnContinueAsNewCarriesInbox(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tn")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "one"})
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	inj := h.UpdateAt(3*time.Second, "", workflows.UpdateInject, sessiontest.PromptID("i1", "carried"))
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
	fu2 := h2.UpdateAt(time.Second, "", workflows.UpdateFollowup, sessiontest.PromptID("f2", "two"))
	h2.WaitFor(time.Second, "turn 2 ended", h2.TurnsEnded(2))
	var st workflows.LoopState
	h2.At(2*time.Second, func() { st = h2.LoopState() })
	disp := h2.UpdateAt(3*time.Second, "", workflows.UpdateDispose)
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
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.Prompt("one"))
	h.AtStarted(2*time.Second, agent.CallModelActivity, func() { h.Env.SetContinueAsNewSuggested(true) })
	var mid workflows.LoopState
	h.At(3*time.Second, func() {
		mid = h.LoopState()
		close(first.Release)
	})
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tw", AgentOptions: sessiontest.Route()})
	err := h.Env.GetWorkflowError()
	ready.OK(t)
	fu.OK(t)
	require.Equal(t, workflows.LoopRunning, mid.State, "still running after the suggestion")
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	evs := sessiontest.Stored(t, h.Store, "tw")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, int64(len(evs)), state.NextSeq)
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Len(t, state.RecentTurns, 1)
	require.Nil(t, state.Inbox)
}

// The pending inputs are bounded in bytes too: they are carried across
// continue-as-new.
func TestTurnInboxBytesBounded(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tx")
	sessiontest.NewFakeAgent(h)
	big := func(i int) workflows.InputRequest {
		return sessiontest.PromptID("b"+strconv.Itoa(i), strings.Repeat(strconv.Itoa(i), 300<<10))
	}
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	var ok []*sessiontest.Result
	for i := range 3 {
		ok = append(ok, h.UpdateAt(2*time.Second, "", workflows.UpdateInject, big(i)))
	}
	full := h.UpdateAt(2*time.Second, "", workflows.UpdateInject, big(3))
	disp := h.UpdateAt(3*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tx", Options: &workflows.Options{MaxBatchBytes: 1 << 20}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	for _, r := range ok {
		r.OK(t)
	}
	app := sessiontest.RequireMessage(t, full.Rejection(t), `agent "tx" holds 921864 bytes of pending inputs; a message of 307288 bytes would exceed 1048576; wait for a turn to claim them`)
	require.Equal(t, "InboxFull", app.Type())
	require.Len(t, sessiontest.Stored(t, h.Store, "tx"), 3)
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

// A tool activity that fails (its store failed) stops dispatching; the
// started calls drain and the turn ends "error" with the activity's error;
// EndTurn is given the step's message and its undispatched calls to close
// (D40).
func TestTurnToolActivityFailure(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tg")
	calls := []agent.CallRef{{ID: "c1", Name: "bad", Parallel: true}, {ID: "c2", Name: "slow", Parallel: true}, {ID: "c3", Name: "write"}}
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Calls: calls})
	fa.Tools["bad"] = &sessiontest.FakeTool{Fail: temporal.NewNonRetryableApplicationError("disk full", "IOError", nil)}
	fa.Tools["slow"] = &sessiontest.FakeTool{Duration: 300 * time.Millisecond}
	h.RunTurns(workflows.CreateSessionRequest{SessionID: "tg", AgentOptions: sessiontest.Route()}, sessiontest.Prompt("go"))
	require.Equal(t, 2, h.Count(agent.RunToolActivity), "c3 is not dispatched")
	require.Equal(t, []string{"c1", "c2"}, sortedCopy(fa.Ends), "the started calls drained")
	var end agent.EndTurnInput
	h.StartedArg(agent.EndTurnActivity, 0, &end)
	require.Equal(t, []string{"c3"}, end.Skipped)
	require.Equal(t, int64(3), end.MessageSeq)
	require.Equal(t, int64(1), end.Step)
	require.Equal(t, "error", end.Reason.Kind)
	require.JSONEq(t, `{"message":"disk full","code":"IOError"}`, string(end.Reason.Error))
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
