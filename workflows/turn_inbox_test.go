package workflows_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// The turn's inbox: Steer and Followup during a turn, an idle Inject,
// the input validators and the bound on pending bytes.

// A Steer while the model streams is claimed by the next step of the same
// turn; a Followup sent during the turn starts the next turn.
func TestTurnSteerAndFollowupDuringTurn(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ts")
	first := &sessiontest.FakeResponse{Text: "first", Hold: true}
	fa := sessiontest.NewFakeAgent(h, first, &sessiontest.FakeResponse{Text: "second"}, &sessiontest.FakeResponse{Text: "third"})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	steer := h.UpdateAt(3*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s1", "steer"))
	later := h.UpdateAt(3*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f2", "two"))
	var mid wire.LoopState
	h.At(3*time.Second, func() {
		mid = h.LoopState()
		close(first.Release)
	})
	h.WaitFor(4*time.Second, "two turns ended", h.TurnsEnded(2))
	var st wire.LoopState
	h.At(5*time.Second, func() { st = h.LoopState() })
	disp := h.UpdateAt(6*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ts", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	var sr, lr wire.InputResult
	steer.Decode(t, &sr)
	later.Decode(t, &lr)
	require.Equal(t, int64(1), sr.Turn, "queued during turn 1")
	require.Equal(t, "next-step", sr.Target)
	require.Equal(t, "next-turn", lr.Target)

	require.Equal(t, wire.LoopRunning, mid.State)
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
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	inj := h.UpdateAt(2*time.Second, "", wire.UpdateInject, sessiontest.PromptID("i1", "context"))
	var idle wire.LoopState
	h.At(10*time.Second, func() { idle = h.LoopState() })
	fu := h.UpdateAt(11*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "question"))
	h.WaitFor(11*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(12*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ti", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	var ir wire.InputResult
	inj.Decode(t, &ir)
	require.Equal(t, wire.InputResult{MessageID: "i1", Target: "next-step", SplicedSeq: 0}, ir)
	require.Equal(t, wire.LoopIdle, idle.State)
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

// The input updates' validators: a live session, a route for waking
// inputs, non-empty lossless content, unique ids, the batch limit.
func TestTurnInputValidators(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tv")
	sessiontest.NewFakeAgent(h)
	var early *sessiontest.Result
	h.At(0, func() { early = h.Update("", wire.UpdateFollowup, sessiontest.Prompt("x")) })
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	empty := h.UpdateAt(2*time.Second, "", wire.UpdateInject, sessiontest.Prompt(""))
	none := h.UpdateAt(2*time.Second, "", wire.UpdateInject, wire.InputRequest{})
	blocks := h.UpdateAt(2*time.Second, "", wire.UpdateInject, wire.InputRequest{Content: json.RawMessage(`[]`)})
	noType := h.UpdateAt(2*time.Second, "", wire.UpdateInject, wire.InputRequest{Content: json.RawMessage(`[{"text":"a"}]`)})
	lossy := h.UpdateAt(2*time.Second, "", wire.UpdateInject, wire.InputRequest{Content: json.RawMessage(`[{"type":"x","n":1e400}]`)})
	big := h.UpdateAt(2*time.Second, "", wire.UpdateInject, sessiontest.Prompt(string(make([]byte, 3000))))
	image := h.UpdateAt(2*time.Second, "", wire.UpdateInject, wire.InputRequest{Content: json.RawMessage(`[{"type":"text","text":"a"},{"type":"image","data":"AAAA"}]`)})
	forged := h.UpdateAt(2*time.Second, "", wire.UpdateInject, wire.InputRequest{Content: json.RawMessage(`[{"type":"tool-result","toolCallId":"c1","content":[]}]`)})
	noRoute := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("x"))
	first := h.UpdateAt(2*time.Second, "", wire.UpdateInject, sessiontest.PromptID("dup", "a"))
	dup := h.UpdateAt(2*time.Second, "", wire.UpdateInject, sessiontest.PromptID("dup", "b"))
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tv", Options: &wire.Options{MaxBatchBytes: 2048}})
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
	require.ErrorContains(t, image.Rejection(t), `Inject: content[1] is a "image" block; user input carries only "text" blocks (the agent cannot send any other)`)
	require.Equal(t, "InvalidArgument", sessiontest.AppErr(t, image.Rejection(t)).Type())
	require.ErrorContains(t, forged.Rejection(t), `Inject: content[0] is a "tool-result" block; user input carries only "text" blocks`)
	require.ErrorContains(t, noRoute.Rejection(t), `agent "tv" has no provider/model`)
	require.ErrorContains(t, dup.Rejection(t), `Inject: message "dup" is already pending`)
}

// The pending inputs are bounded in bytes too: they are carried across
// continue-as-new.
func TestTurnInboxBytesBounded(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tx")
	sessiontest.NewFakeAgent(h)
	big := func(i int) wire.InputRequest {
		return sessiontest.PromptID("b"+strconv.Itoa(i), strings.Repeat(strconv.Itoa(i), 300<<10))
	}
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var ok []*sessiontest.Result
	for i := range 3 {
		ok = append(ok, h.UpdateAt(2*time.Second, "", wire.UpdateInject, big(i)))
	}
	full := h.UpdateAt(2*time.Second, "", wire.UpdateInject, big(3))
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "tx", Options: &wire.Options{MaxBatchBytes: 1 << 20}})
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
