package workflows_test

// S0-32 with the loop's turns over the fake agent activities.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// S0-32 with real turns: an idle Inject after a completed turn is stored
// as agent/inbox/spliced; the owner is wedged (its lease forfeited); a
// resume finds the message pending (no synthetic turn, nothing woken) and
// the next turn claims it, with its deletion splice, before the followup.
func TestTurnS0_32_InjectSurvivesWedgedOwner(t *testing.T) {
	injectAcrossWedgedOwner(sessiontest.NewHarness(t).WithID("t32"), "t32",
		func(h *sessiontest.Harness) { sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "one"}) },
		func(h *sessiontest.Harness) { sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "two"}) })
}

// injectAcrossWedgedOwner runs S0-32 on session id: turn 1 ("first")
// completes under the owner, an idle Inject ("later", id i1) is stored,
// the owner is wedged (its lease forfeited) and a resume, whose agent
// resumer installs, sends a followup ("second", id f2) that claims the
// inject. owner installs the first agent. It checks the loop states and
// the log's shape and returns the stored log.
func injectAcrossWedgedOwner(h *sessiontest.Harness, id string, owner, resumer func(*sessiontest.Harness)) []session.Event {
	t := h.T
	t.Helper()
	owner(h)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "first"))
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	inj := h.UpdateAt(3*time.Second, "", wire.UpdateInject, sessiontest.PromptID("i1", "later"))
	var idle, resumed wire.LoopState
	var after []session.Event
	h.At(4*time.Second, func() {
		lease, err := h.Store.ForceUnlock(context.Background(), id)
		require.NoError(t, err)
		require.NotNil(t, lease)

		h2 := sessiontest.NewHarnessOn(t, h.Store).WithID(id)
		resumer(h2)
		ready2 := h2.UpdateAt(time.Second, "", wire.UpdateWaitReady)
		h2.At(2*time.Second, func() { idle = h2.LoopState() })
		fu2 := h2.UpdateAt(3*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f2", "second"))
		// The resume's recent turns start with turn 1, the log's latest.
		h2.WaitFor(3*time.Second, "turn 2 ended", h2.TurnsEnded(2))
		h2.At(4*time.Second, func() { resumed = h2.LoopState() })
		disp2 := h2.UpdateAt(5*time.Second, "", wire.UpdateDispose)
		h2.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: id, AgentOptions: sessiontest.Route()})
		require.NoError(t, h2.Env.GetWorkflowError())
		ready2.OK(t)
		fu2.OK(t)
		disp2.OK(t)
		after = sessiontest.Stored(t, h.Store, id)
	})
	h.At(5*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	inj.OK(t)

	require.Equal(t, wire.LoopIdle, idle.State)
	require.Equal(t, []string{"i1"}, idle.Pending.NextStep, "the stored inject is pending after the resume")
	require.Len(t, idle.Recent, 1, "nothing woke the agent; the log's latest turn is recent")
	require.Equal(t, int64(1), idle.Recent[0].Turn)
	require.Equal(t, []string{"f1"}, idle.Recent[0].Claimed)
	require.Equal(t, "completed", idle.Recent[0].Reason.Kind)
	require.Len(t, resumed.Recent, 2)
	require.Equal(t, idle.Recent[0], resumed.Recent[0])
	require.Equal(t, []string{"i1", "f2"}, resumed.Recent[1].Claimed)
	sessiontest.RequireBalanced(t, after)
	after = sessiontest.WithoutRecords(t, after)
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
		"agent/inbox/spliced", "session/end-seed",
		"turn/start", "agent/inbox/spliced", "step/start", "user/message", "user/message", "assistant/message", "step/end", "turn/end",
	}, sessiontest.Types(after))
	require.Equal(t, `{"turn":2}`, string(after[8].Data))
	require.Equal(t, `{"target":"next-step","start":0,"removedCount":1,"inserted":[]}`, string(after[9].Data))
	require.Equal(t, []string{"first", "later", "second"}, sessiontest.UserTexts(t, after))
	sessiontest.RequireReleased(t, h.Store, id)
	return after
}
