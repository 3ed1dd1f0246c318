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
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

func route() *workflows.AgentOptions {
	return &workflows.AgentOptions{Provider: "scripted", Model: "m1"}
}

func prompt(text string) workflows.InputRequest {
	b, _ := json.Marshal(text)
	return workflows.InputRequest{Content: b}
}

func promptID(id, text string) workflows.InputRequest {
	r := prompt(text)
	r.MessageID = id
	return r
}

// loopState queries the top-level session's loop.
func (h *harness) loopState() workflows.LoopState {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(workflows.QueryLoopState)
	require.NoError(h.t, err)
	var s workflows.LoopState
	require.NoError(h.t, v.Get(&s))
	return s
}

// turnsEnded is a waitFor condition: n turns have ended.
func (h *harness) turnsEnded(n int) func() bool {
	return func() bool {
		s := h.loopState()
		k := 0
		for _, r := range s.Recent {
			if r.Reason != nil {
				k++
			}
		}
		return k >= n && s.State == workflows.LoopIdle
	}
}

func reasonKinds(rs []session.TurnEndReason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Kind
	}
	return out
}

func TestTurnPlain(t *testing.T) {
	h := newHarness(t).withID("tp")
	fa := newFakeAgent(h, &fakeResponse{text: "Hello there"})
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, promptID("m-1", "hi"))
	h.waitFor(2*time.Second, "turn 1 ended", h.turnsEnded(1))
	var st workflows.LoopState
	h.at(3*time.Second, func() { st = h.loopState() })
	disp := h.updateAt(4*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tp", AgentOptions: route()})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	disp.ok(t)
	var in workflows.InputResult
	fu.decode(t, &in)
	require.Equal(t, workflows.InputResult{MessageID: "m-1", Target: "next-turn", SplicedSeq: -1}, in)

	evs := stored(t, h.store, "tp")
	requireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, types(evs))
	require.Equal(t, []string{"completed"}, reasonKinds(turnEnds(t, evs)))
	require.Equal(t, `{"id":"m-1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`, string(evs[2].Data))
	require.Equal(t, "append", evs[2].SurfaceOp.Op)
	require.Equal(t, []agent.ModelInput{{Ref: fa.models[0].Ref, Turn: 1, Step: 1, Provider: "scripted", Model: "m1"}}, fa.models)

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
	require.Equal(t, 1, h.count(agent.EndTurnActivity))
}

// A step's tool calls: parallel-safe ones run in a rolling pool of
// maxParallelToolCalls, an exclusive one runs alone once every earlier call
// finished, and later calls wait for it.
func TestTurnToolsPoolAndBarrier(t *testing.T) {
	h := newHarness(t).withID("tt")
	par := func(id string) agent.CallRef { return agent.CallRef{ID: id, Name: "read", Parallel: true} }
	calls := []agent.CallRef{par("c1"), par("c2"), par("c3"), {ID: "c4", Name: "write"}, par("c5"), par("c6")}
	fa := newFakeAgent(h, &fakeResponse{calls: calls}, &fakeResponse{text: "done"})
	fa.tools["read"] = &fakeTool{d: 300 * time.Millisecond}
	fa.tools["write"] = &fakeTool{d: 100 * time.Millisecond}
	opts := route()
	two := 2.0
	opts.MaxParallelToolCalls = &two
	evs := h.runTurns(workflows.CreateSessionRequest{SessionID: "tt", AgentOptions: opts}, prompt("go"))
	requireBalanced(t, evs)

	// Every call dispatched once, with its model-order index.
	byIndex := make([]string, h.count(agent.RunToolActivity))
	require.Len(t, byIndex, 6)
	for i := range byIndex {
		var in agent.ToolInput
		h.startedArg(agent.RunToolActivity, i, &in)
		require.Equal(t, int64(3), in.MessageSeq)
		byIndex[in.Index] = in.CallID
	}
	require.Equal(t, []string{"c1", "c2", "c3", "c4", "c5", "c6"}, byIndex)
	require.Equal(t, 2, fa.maxConc, "the pool holds at most two calls")
	starts := map[string][]string{}
	for _, s := range fa.starts {
		slices.Sort(s.running)
		starts[s.id] = s.running
	}
	require.Empty(t, starts["c4"], "the exclusive call starts alone")
	require.Less(t, slices.Index(fa.ends, "c3"), slices.Index(fa.ends, "c4"))
	for _, id := range []string{"c5", "c6"} {
		require.NotContains(t, starts[id], "c4", "calls after the barrier wait for it")
		require.Less(t, slices.Index(fa.ends, "c4"), slices.Index(fa.ends, id))
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		require.Less(t, slices.Index(fa.ends, id), slices.Index(fa.ends, "c4"))
	}

	require.Equal(t, []string{"completed"}, reasonKinds(turnEnds(t, evs)))
	n := 0
	for _, e := range evs {
		if e.Type == session.TypeToolResult {
			n++
		}
	}
	require.Equal(t, 6, n)
	// Step 2 answers after the tools.
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message"}, types(evs[:4]))
	require.Equal(t, []string{"step/end", "step/start", "assistant/message", "step/end", "turn/end"}, types(evs[len(evs)-5:]))
	require.Len(t, fa.models, 2)
	require.Equal(t, int64(2), fa.models[1].Step)
}

// A Steer while the model streams is claimed by the next step of the same
// turn; a Followup sent during the turn starts the next turn.
func TestTurnSteerAndFollowupDuringTurn(t *testing.T) {
	h := newHarness(t).withID("ts")
	first := &fakeResponse{text: "first", hold: true}
	fa := newFakeAgent(h, first, &fakeResponse{text: "second"}, &fakeResponse{text: "third"})
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, promptID("f1", "one"))
	h.atStarted(2*time.Second, agent.CallModelActivity, func() {})
	steer := h.updateAt(3*time.Second, "", workflows.UpdateSteer, promptID("s1", "steer"))
	later := h.updateAt(3*time.Second, "", workflows.UpdateFollowup, promptID("f2", "two"))
	var mid workflows.LoopState
	h.at(3*time.Second, func() {
		mid = h.loopState()
		close(first.release)
	})
	h.waitFor(4*time.Second, "two turns ended", h.turnsEnded(2))
	var st workflows.LoopState
	h.at(5*time.Second, func() { st = h.loopState() })
	disp := h.updateAt(6*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ts", AgentOptions: route()})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	fu.ok(t)
	disp.ok(t)
	var sr, lr workflows.InputResult
	steer.decode(t, &sr)
	later.decode(t, &lr)
	require.Equal(t, int64(1), sr.Turn, "queued during turn 1")
	require.Equal(t, "next-step", sr.Target)
	require.Equal(t, "next-turn", lr.Target)

	require.Equal(t, workflows.LoopRunning, mid.State)
	require.Equal(t, int64(1), mid.Turn)
	require.Equal(t, int64(1), mid.Step)
	require.Equal(t, []string{"f2"}, mid.Pending.NextTurn)
	require.Equal(t, []string{"s1"}, mid.Pending.NextStep)

	evs := stored(t, h.store, "ts")
	requireBalanced(t, evs)
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message",
		"step/end", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
	}, types(evs))
	require.Equal(t, []string{"one", "steer", "two"}, userTexts(t, evs))
	require.Equal(t, []string{"completed", "completed"}, reasonKinds(turnEnds(t, evs)))
	require.Len(t, st.Recent, 2)
	require.Equal(t, []string{"f1", "s1"}, st.Recent[0].Claimed)
	require.Equal(t, []string{"f2"}, st.Recent[1].Claimed)
	require.Equal(t, int64(10), st.Recent[1].StartSeq)
	require.Len(t, fa.models, 3)
}

// An Inject while idle is stored as agent/inbox/spliced and wakes nothing;
// the next turn claims it (with a deletion splice) before its followup.
func TestTurnInjectIdle(t *testing.T) {
	h := newHarness(t).withID("ti")
	fa := newFakeAgent(h, &fakeResponse{text: "ok"})
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	inj := h.updateAt(2*time.Second, "", workflows.UpdateInject, promptID("i1", "context"))
	var idle workflows.LoopState
	h.at(10*time.Second, func() { idle = h.loopState() })
	fu := h.updateAt(11*time.Second, "", workflows.UpdateFollowup, promptID("f1", "question"))
	h.waitFor(11*time.Second, "turn 1 ended", h.turnsEnded(1))
	disp := h.updateAt(12*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ti", AgentOptions: route()})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	fu.ok(t)
	disp.ok(t)
	var ir workflows.InputResult
	inj.decode(t, &ir)
	require.Equal(t, workflows.InputResult{MessageID: "i1", Target: "next-step", SplicedSeq: 0}, ir)
	require.Equal(t, workflows.LoopIdle, idle.State)
	require.Equal(t, []string{"i1"}, idle.Pending.NextStep)
	require.Empty(t, idle.Recent, "an inject wakes nothing")

	evs := stored(t, h.store, "ti")
	requireBalanced(t, evs)
	require.Equal(t, []string{"agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start", "user/message", "user/message",
		"assistant/message", "step/end", "turn/end"}, types(evs))
	require.Equal(t, `{"target":"next-step","start":0,"inserted":[{"id":"i1","role":"user","content":[{"type":"text","text":"context"}],"source":{"kind":"user"}}]}`, string(evs[0].Data))
	require.Equal(t, `{"target":"next-step","start":0,"removedCount":1,"inserted":[]}`, string(evs[2].Data))
	require.Equal(t, []string{"context", "question"}, userTexts(t, evs))
	require.Len(t, fa.models, 1)
}

// Cancel while the model streams: the activity is cancelled, its
// interrupted anchor lands before turn/end{aborted, reason:{kind:user}};
// Cancel returns once the turn ended. Pending inputs are discarded.
func TestTurnCancelMidModel(t *testing.T) {
	h := newHarness(t).withID("tc")
	fa := newFakeAgent(h, &fakeResponse{text: "partial answer", hold: true}, &fakeResponse{text: "after"})
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, promptID("f1", "one"))
	h.atStarted(2*time.Second, agent.CallModelActivity, func() {})
	queued := h.updateAt(3*time.Second, "", workflows.UpdateFollowup, promptID("f2", "discarded"))
	cancel := h.updateAt(3*time.Second, "", workflows.UpdateCancel, workflows.CancelRequest{Cause: "user"})
	var after workflows.LoopState
	h.at(4*time.Second, func() { after = h.loopState() })
	// A followup after the cancel runs its turn.
	next := h.updateAt(5*time.Second, "", workflows.UpdateFollowup, promptID("f3", "again"))
	h.waitFor(5*time.Second, "turn 2 ended", h.turnsEnded(2))
	idleCancel := h.updateAt(6*time.Second, "", workflows.UpdateCancel, workflows.CancelRequest{Cause: "parent"})
	badCause := h.updateAt(6*time.Second, "", workflows.UpdateCancel, workflows.CancelRequest{Cause: "disposed"})
	disp := h.updateAt(7*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tc", AgentOptions: route()})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	fu.ok(t)
	queued.ok(t)
	next.ok(t)
	disp.ok(t)
	var cr workflows.CancelResult
	cancel.decode(t, &cr)
	require.True(t, cr.Cancelled)
	require.Equal(t, int64(1), cr.Turn)
	require.Equal(t, "aborted", cr.Reason.Kind)
	require.JSONEq(t, `{"kind":"user"}`, string(cr.Reason.Reason))
	require.Equal(t, []string{"f2"}, cr.Discarded)
	var idle workflows.CancelResult
	idleCancel.decode(t, &idle)
	require.Equal(t, workflows.CancelResult{}, idle, "cancel while idle is a no-op")
	require.ErrorContains(t, badCause.rejection(t), `Cancel: cause must be "user" or "parent", not "disposed"`)
	require.Equal(t, workflows.LoopIdle, after.State)
	require.Empty(t, after.Pending.NextTurn)

	evs := stored(t, h.store, "tc")
	requireBalanced(t, evs)
	// The test environment resolves a cancelled activity at once, without
	// waiting for it (WaitForCancellation is not emulated), so the model
	// activity's interrupted anchor is checked on the dev server
	// (testsuite/integration); here the turn closes with the step open.
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, types(evs))
	require.Equal(t, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}`, string(evs[4].Data))
	var end agent.EndTurnInput
	h.startedArg(agent.EndTurnActivity, 0, &end)
	require.Equal(t, agent.EndTurnInput{Ref: end.Ref, Turn: 1, Step: 1, MessageSeq: -1, Reason: end.Reason}, end)
	require.Equal(t, []string{"one", "again"}, userTexts(t, evs))
	require.Len(t, fa.models, 2)
}

// Cancel while tools run: started calls drain, the undispatched ones get
// their tool/call and ABORTED_BEFORE_DISPATCH result from EndTurn, and the
// turn ends aborted.
func TestTurnCancelSkipsUndispatchedCalls(t *testing.T) {
	h := newHarness(t).withID("tk")
	slow := &fakeTool{hold: true, release: make(chan struct{})}
	calls := []agent.CallRef{{ID: "c1", Name: "slow"}, {ID: "c2", Name: "read", Parallel: true}, {ID: "c3", Name: "read", Parallel: true}}
	fa := newFakeAgent(h, &fakeResponse{calls: calls})
	fa.tools["slow"] = slow
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, prompt("go"))
	h.atStarted(2*time.Second, agent.RunToolActivity, func() {})
	cancel := h.updateNoWaitAt(3*time.Second, "", workflows.UpdateCancel, workflows.CancelRequest{Cause: "parent"})
	var mid workflows.LoopState
	h.atNoWait(4*time.Second, func() {
		mid = h.loopState()
		close(slow.release)
	})
	h.waitFor(5*time.Second, "turn 1 ended", h.turnsEnded(1))
	disp := h.updateAt(6*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tk", AgentOptions: route()})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	fu.ok(t)
	disp.ok(t)
	require.Equal(t, workflows.LoopRunning, mid.State, "the started call drains before the turn ends")
	require.Equal(t, []workflows.CallState{
		{ID: "c1", Name: "slow", Index: 0, State: "running"},
		{ID: "c2", Name: "read", Index: 1, State: "skipped"},
		{ID: "c3", Name: "read", Index: 2, State: "skipped"},
	}, mid.Calls)
	var cr workflows.CancelResult
	cancel.decode(t, &cr)
	require.Equal(t, "aborted", cr.Reason.Kind)
	require.Equal(t, 1, h.count(agent.RunToolActivity))
	var end agent.EndTurnInput
	h.startedArg(agent.EndTurnActivity, 0, &end)
	require.Equal(t, []string{"c2", "c3"}, end.Skipped)
	require.Equal(t, int64(3), end.MessageSeq)
	require.Equal(t, int64(1), end.Step)

	evs := stored(t, h.store, "tk")
	requireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message",
		"tool/call", "tool/result", "tool/call", "tool/result", "tool/call", "tool/result", "step/end", "turn/end"}, types(evs))
	require.Equal(t, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"parent"}}}`, string(evs[11].Data))
	require.Len(t, fa.models, 1)
}

// A refused model call ends the turn "error" with the provider's message
// and code; the session stays live and runs the next turn.
func TestTurnProviderRefused(t *testing.T) {
	h := newHarness(t).withID("tr")
	newFakeAgent(h, &fakeResponse{refuse: &provider.Error{Status: 400, Code: "invalid_request", Message: "bad request"}}, &fakeResponse{text: "fine"})
	h.runTurns(workflows.CreateSessionRequest{SessionID: "tr", AgentOptions: route()}, prompt("one"), prompt("two"))
	require.Equal(t, 2, h.count(agent.CallModelActivity), "a refused call is not retried")
	evs := stored(t, h.store, "tr")
	requireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, types(evs))
	require.Equal(t, `{"turn":1,"reason":{"kind":"error","error":{"message":"bad request","code":"invalid_request","status":400}}}`, string(evs[4].Data))
	require.Equal(t, []string{"error", "completed"}, reasonKinds(turnEnds(t, evs)))
}

// max-tokens is sticky: a later step that completes keeps the turn's
// max-tokens end. A finish of max-tokens runs no tool calls.
func TestTurnMaxTokensSticky(t *testing.T) {
	h := newHarness(t).withID("tm")
	first := &fakeResponse{text: "cut", finish: provider.FinishMaxTokens, hold: true}
	newFakeAgent(h, first, &fakeResponse{text: "rest"})
	evs := h.runSteeredTurn(workflows.CreateSessionRequest{SessionID: "tm", AgentOptions: route()}, first.release)
	requireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end",
		"step/start", "user/message", "assistant/message", "step/end", "turn/end"}, types(evs))
	require.Equal(t, []string{"max-tokens"}, reasonKinds(turnEnds(t, evs)))
}

// maxSteps: a turn that would open one more step ends "blocked" without a
// step/start.
func TestTurnStepLimitBlocked(t *testing.T) {
	h := newHarness(t).withID("tb")
	call := func(i int) *fakeResponse {
		return &fakeResponse{calls: []agent.CallRef{{ID: "c" + strconv.Itoa(i), Name: "read", Parallel: true}}}
	}
	newFakeAgent(h, call(1), call(2), call(3))
	opts := route()
	two := 2.0
	opts.MaxSteps = &two
	evs := h.runTurns(workflows.CreateSessionRequest{SessionID: "tb", AgentOptions: opts}, prompt("loop"))
	requireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/result",
		"step/end", "step/start", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end"}, types(evs))
	require.Equal(t, []string{"blocked"}, reasonKinds(turnEnds(t, evs)))
	require.Equal(t, 2, h.count(agent.CallModelActivity))
}

// Append is refused while a turn runs, with the TurnRunning type, and
// accepted again between turns.
func TestTurnAppendRefusedWhileRunning(t *testing.T) {
	h := newHarness(t).withID("ta")
	first := &fakeResponse{text: "x", hold: true}
	newFakeAgent(h, first)
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, prompt("one"))
	h.atStarted(2*time.Second, agent.CallModelActivity, func() {})
	during := h.updateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{ev(t, "todo/write", 3, map[string]any{"x": 1})}})
	h.at(3*time.Second, func() { close(first.release) })
	h.waitFor(3*time.Second, "turn 1 ended", h.turnsEnded(1))
	between := h.updateAt(4*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{ev(t, "todo/write", 6, map[string]any{"x": 1})}})
	disp := h.updateAt(5*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ta", AgentOptions: route()})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	fu.ok(t)
	disp.ok(t)
	app := requireMessage(t, during.rejection(t), `agent "ta" is running turn 1; append between turns`)
	require.Equal(t, "TurnRunning", app.Type())
	require.True(t, app.NonRetryable())
	var r workflows.AppendResult
	between.decode(t, &r)
	require.Equal(t, int64(7), r.NextSeq)
	evs := stored(t, h.store, "ta")
	requireBalanced(t, evs)
	require.Equal(t, "todo/write", evs[6].Type)
}

// Dispose during a turn cancels it with cause "disposed", waits for its
// end, then disposes.
func TestTurnDisposeMidTurn(t *testing.T) {
	h := newHarness(t).withID("td")
	newFakeAgent(h, &fakeResponse{text: "so far", hold: true})
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, prompt("one"))
	h.atStarted(2*time.Second, agent.CallModelActivity, func() {})
	disp := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "td", AgentOptions: route()})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	fu.ok(t)
	var dr workflows.DisposeResult
	disp.decode(t, &dr)
	evs := stored(t, h.store, "td")
	requireBalanced(t, evs)
	require.Equal(t, int64(len(evs)), dr.NextSeq)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end"}, types(evs))
	require.Equal(t, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}`, string(evs[4].Data))
	requireReleased(t, h.store, "td")
	names := h.startedNames()
	require.Less(t, slices.Index(names, agent.EndTurnActivity), slices.Index(names, activities.CloseHandleName))
}

// The input updates' validators: a live session, a route for waking
// inputs, non-empty lossless content, unique ids, the batch limit.
func TestTurnInputValidators(t *testing.T) {
	h := newHarness(t).withID("tv")
	newFakeAgent(h)
	var early *result
	h.at(0, func() { early = h.update("", workflows.UpdateFollowup, prompt("x")) })
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	empty := h.updateAt(2*time.Second, "", workflows.UpdateInject, prompt(""))
	none := h.updateAt(2*time.Second, "", workflows.UpdateInject, workflows.InputRequest{})
	blocks := h.updateAt(2*time.Second, "", workflows.UpdateInject, workflows.InputRequest{Content: json.RawMessage(`[]`)})
	noType := h.updateAt(2*time.Second, "", workflows.UpdateInject, workflows.InputRequest{Content: json.RawMessage(`[{"text":"a"}]`)})
	lossy := h.updateAt(2*time.Second, "", workflows.UpdateInject, workflows.InputRequest{Content: json.RawMessage(`[{"type":"x","n":1e400}]`)})
	big := h.updateAt(2*time.Second, "", workflows.UpdateInject, prompt(string(make([]byte, 3000))))
	noRoute := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, prompt("x"))
	first := h.updateAt(2*time.Second, "", workflows.UpdateInject, promptID("dup", "a"))
	dup := h.updateAt(2*time.Second, "", workflows.UpdateInject, promptID("dup", "b"))
	disp := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tv", Options: &workflows.Options{MaxBatchBytes: 2048}})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	disp.ok(t)
	first.ok(t)
	require.ErrorContains(t, early.rejection(t), `session "tv" is not live`)
	require.ErrorContains(t, empty.rejection(t), "Inject: content must not be empty")
	require.ErrorContains(t, none.rejection(t), "Inject: content is required")
	require.ErrorContains(t, blocks.rejection(t), "Inject: content must not be empty")
	require.ErrorContains(t, noType.rejection(t), `Inject: content[0] must be an object with a non-empty string "type"`)
	require.ErrorContains(t, lossy.rejection(t), "Inject: content is not losslessly JSON-serializable")
	require.Equal(t, "BatchTooLarge", appErr(t, big.rejection(t)).Type())
	require.ErrorContains(t, noRoute.rejection(t), `agent "tv" has no provider/model`)
	require.ErrorContains(t, dup.rejection(t), `Inject: message "dup" is already pending`)
}

// Continue-as-new happens only while idle and carries the pending inputs
// and the recent turns: the next run claims the carried inject.
func TestTurnContinueAsNewCarriesInbox(t *testing.T) {
	h := newHarness(t).withID("tn")
	newFakeAgent(h, &fakeResponse{text: "one"})
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, promptID("f1", "one"))
	h.waitFor(2*time.Second, "turn 1 ended", h.turnsEnded(1))
	inj := h.updateAt(3*time.Second, "", workflows.UpdateInject, promptID("i1", "carried"))
	h.at(4*time.Second, func() { h.env.SetContinueAsNewSuggested(true) })
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tn", AgentOptions: route()})
	err := h.env.GetWorkflowError()
	ready.ok(t)
	fu.ok(t)
	inj.ok(t)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	require.NotNil(t, state.Inbox)
	require.Len(t, state.Inbox.NextStep, 1)
	require.Equal(t, "i1", state.Inbox.NextStep[0].ID)
	require.True(t, state.Inbox.NextStep[0].Stored)
	require.Len(t, state.RecentTurns, 1)
	require.Equal(t, route(), state.AgentOptions)
	require.Equal(t, int64(1), state.LastTurn)

	// The next run.
	h2 := newHarnessOn(t, h.store).withID("tn")
	fa2 := newFakeAgent(h2, &fakeResponse{text: "two"})
	fu2 := h2.updateAt(time.Second, "", workflows.UpdateFollowup, promptID("f2", "two"))
	h2.waitFor(time.Second, "turn 2 ended", h2.turnsEnded(2))
	var st workflows.LoopState
	h2.at(2*time.Second, func() { st = h2.loopState() })
	disp := h2.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h2.env.ExecuteWorkflow(workflows.LiveSession, state)
	require.NoError(t, h2.env.GetWorkflowError())
	fu2.ok(t)
	disp.ok(t)
	require.Len(t, st.Recent, 2)
	require.Equal(t, []string{"i1", "f2"}, st.Recent[1].Claimed)
	evs := stored(t, h.store, "tn")
	requireBalanced(t, evs)
	require.Equal(t, []string{"one", "carried", "two"}, userTexts(t, evs))
	require.Equal(t, int64(2), fa2.models[0].Turn)
}

// Continue-as-new suggested during a turn waits for the turn to end.
func TestTurnContinueAsNewWaitsForTheTurn(t *testing.T) {
	h := newHarness(t).withID("tw")
	first := &fakeResponse{text: "long", hold: true}
	newFakeAgent(h, first)
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, prompt("one"))
	h.atStarted(2*time.Second, agent.CallModelActivity, func() { h.env.SetContinueAsNewSuggested(true) })
	var mid workflows.LoopState
	h.at(3*time.Second, func() {
		mid = h.loopState()
		close(first.release)
	})
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tw", AgentOptions: route()})
	err := h.env.GetWorkflowError()
	ready.ok(t)
	fu.ok(t)
	require.Equal(t, workflows.LoopRunning, mid.State, "still running after the suggestion")
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	evs := stored(t, h.store, "tw")
	requireBalanced(t, evs)
	require.Equal(t, int64(len(evs)), state.NextSeq)
	require.Equal(t, []string{"completed"}, reasonKinds(turnEnds(t, evs)))
	require.Len(t, state.RecentTurns, 1)
	require.Nil(t, state.Inbox)
}

// The pending inputs are bounded in bytes too: they are carried across
// continue-as-new.
func TestTurnInboxBytesBounded(t *testing.T) {
	h := newHarness(t).withID("tx")
	newFakeAgent(h)
	big := func(i int) workflows.InputRequest {
		return promptID("b"+strconv.Itoa(i), strings.Repeat(strconv.Itoa(i), 300<<10))
	}
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	var ok []*result
	for i := range 3 {
		ok = append(ok, h.updateAt(2*time.Second, "", workflows.UpdateInject, big(i)))
	}
	full := h.updateAt(2*time.Second, "", workflows.UpdateInject, big(3))
	disp := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tx", Options: &workflows.Options{MaxBatchBytes: 1 << 20}})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	disp.ok(t)
	for _, r := range ok {
		r.ok(t)
	}
	app := requireMessage(t, full.rejection(t), `agent "tx" holds 921864 bytes of pending inputs; a message of 307288 bytes would exceed 1048576; wait for a turn to claim them`)
	require.Equal(t, "InboxFull", app.Type())
	require.Len(t, stored(t, h.store, "tx"), 3)
}

// S0-32 with real turns: an idle Inject after a completed turn is stored
// as agent/inbox/spliced; the owner is wedged (its lease forfeited); a
// resume finds the message pending (no synthetic turn, nothing woken) and
// the next turn claims it, with its deletion splice, before the followup.
func TestTurnS0_32_InjectSurvivesWedgedOwner(t *testing.T) {
	injectAcrossWedgedOwner(newHarness(t).withID("t32"), "t32",
		func(h *harness) { newFakeAgent(h, &fakeResponse{text: "one"}) },
		func(h *harness) { newFakeAgent(h, &fakeResponse{text: "two"}) })
}

// Any other failure of the model activity ends the turn "error" with the
// activity error's type as the code.
func TestTurnModelActivityFailure(t *testing.T) {
	h := newHarness(t).withID("tf")
	newFakeAgent(h, &fakeResponse{err: temporal.NewNonRetryableApplicationError(`unknown model provider "nope"`, "UnknownProvider", nil)})
	evs := h.runTurns(workflows.CreateSessionRequest{SessionID: "tf", AgentOptions: route()}, prompt("one"))
	requireBalanced(t, evs)
	require.Equal(t, `{"turn":1,"reason":{"kind":"error","error":{"message":"unknown model provider \"nope\"","code":"UnknownProvider"}}}`, string(evs[len(evs)-1].Data))
}

// A tool activity that fails (its store failed) stops dispatching; the
// started calls drain and the turn ends "error" with the activity's error;
// EndTurn is given the step's message and its undispatched calls to close
// (D40).
func TestTurnToolActivityFailure(t *testing.T) {
	h := newHarness(t).withID("tg")
	calls := []agent.CallRef{{ID: "c1", Name: "bad", Parallel: true}, {ID: "c2", Name: "slow", Parallel: true}, {ID: "c3", Name: "write"}}
	fa := newFakeAgent(h, &fakeResponse{calls: calls})
	fa.tools["bad"] = &fakeTool{fail: temporal.NewNonRetryableApplicationError("disk full", "IOError", nil)}
	fa.tools["slow"] = &fakeTool{d: 300 * time.Millisecond}
	h.runTurns(workflows.CreateSessionRequest{SessionID: "tg", AgentOptions: route()}, prompt("go"))
	require.Equal(t, 2, h.count(agent.RunToolActivity), "c3 is not dispatched")
	require.Equal(t, []string{"c1", "c2"}, sortedCopy(fa.ends), "the started calls drained")
	var end agent.EndTurnInput
	h.startedArg(agent.EndTurnActivity, 0, &end)
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
