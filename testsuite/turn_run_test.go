package testsuite

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/workflows"
)

// runTurns creates the session of req and, once it is ready, sends each
// input as a Followup one virtual second apart (the first at 2 s), each
// after the previous turn ended; then it disposes the session. Every
// update must succeed. It returns the stored log.
func (h *Harness) RunTurns(req workflows.CreateSessionRequest, inputs ...workflows.InputRequest) []session.Event {
	h.T.Helper()
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fus := make([]*Result, len(inputs))
	for i, in := range inputs {
		at := time.Duration(i+2) * time.Second
		fus[i] = h.UpdateAt(at, "", workflows.UpdateFollowup, in)
		h.WaitFor(at, "turn "+strconv.Itoa(i+1)+" ended", h.TurnsEnded(i+1))
	}
	disp := h.UpdateAt(time.Duration(len(inputs)+2)*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, req)
	require.NoError(h.T, h.Env.GetWorkflowError())
	ready.OK(h.T)
	for _, fu := range fus {
		fu.OK(h.T)
	}
	disp.OK(h.T)
	return Stored(h.T, h.Store, req.SessionID)
}

// runSteeredTurn creates the session of req and, once it is ready, sends
// a Followup ("one") at 2 s; while its model call is held, a Steer
// ("more") at 3 s, and then closes release to let the call return. It
// waits for the turn's end, disposes the session, requires every update
// to succeed and returns the stored log.
func (h *Harness) RunSteeredTurn(req workflows.CreateSessionRequest, release chan struct{}) []session.Event {
	h.T.Helper()
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, Prompt("one"))
	h.AtStarted(2*time.Second, agent.CallModelActivity, func() {})
	steer := h.UpdateAt(3*time.Second, "", workflows.UpdateSteer, Prompt("more"))
	h.At(3*time.Second, func() { close(release) })
	h.WaitFor(3*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(4*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, req)
	require.NoError(h.T, h.Env.GetWorkflowError())
	for _, r := range []*Result{ready, fu, steer, disp} {
		r.OK(h.T)
	}
	return Stored(h.T, h.Store, req.SessionID)
}

// injectAcrossWedgedOwner runs S0-32 on session id: turn 1 ("first")
// completes under the owner, an idle Inject ("later", id i1) is stored,
// the owner is wedged (its lease forfeited) and a resume, whose agent
// resumer installs, sends a followup ("second", id f2) that claims the
// inject. owner installs the first agent. It checks the loop states and
// the log's shape and returns the stored log.
func InjectAcrossWedgedOwner(h *Harness, id string, owner, resumer func(*Harness)) []session.Event {
	t := h.T
	t.Helper()
	owner(h)
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, PromptID("f1", "first"))
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	inj := h.UpdateAt(3*time.Second, "", workflows.UpdateInject, PromptID("i1", "later"))
	var idle, resumed workflows.LoopState
	var after []session.Event
	h.At(4*time.Second, func() {
		lease, err := h.Store.ForceUnlock(context.Background(), id)
		require.NoError(t, err)
		require.NotNil(t, lease)

		h2 := NewHarnessOn(t, h.Store).WithID(id)
		resumer(h2)
		ready2 := h2.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
		h2.At(2*time.Second, func() { idle = h2.LoopState() })
		fu2 := h2.UpdateAt(3*time.Second, "", workflows.UpdateFollowup, PromptID("f2", "second"))
		h2.WaitFor(3*time.Second, "turn 2 ended", h2.TurnsEnded(1))
		h2.At(4*time.Second, func() { resumed = h2.LoopState() })
		disp2 := h2.UpdateAt(5*time.Second, "", workflows.UpdateDispose)
		h2.Env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: id, AgentOptions: Route()})
		require.NoError(t, h2.Env.GetWorkflowError())
		ready2.OK(t)
		fu2.OK(t)
		disp2.OK(t)
		after = Stored(t, h.Store, id)
	})
	h.At(5*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, AgentOptions: Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	inj.OK(t)

	require.Equal(t, workflows.LoopIdle, idle.State)
	require.Equal(t, []string{"i1"}, idle.Pending.NextStep, "the stored inject is pending after the resume")
	require.Empty(t, idle.Recent, "nothing woke the agent")
	require.Len(t, resumed.Recent, 1)
	require.Equal(t, []string{"i1", "f2"}, resumed.Recent[0].Claimed)
	RequireBalanced(t, after)
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
		"agent/inbox/spliced", "session/end-seed",
		"turn/start", "agent/inbox/spliced", "step/start", "user/message", "user/message", "assistant/message", "step/end", "turn/end",
	}, Types(after))
	require.Equal(t, `{"turn":2}`, string(after[8].Data))
	require.Equal(t, `{"target":"next-step","start":0,"removedCount":1,"inserted":[]}`, string(after[9].Data))
	require.Equal(t, []string{"first", "later", "second"}, UserTexts(t, after))
	RequireReleased(t, h.Store, id)
	return after
}

// agentActivities returns the agent activities over the harness's store,
// offering providers and the built-in tools plus extra.
func AgentActivities(h *Harness, providers provider.Set, extra ...tool.Tool) *agent.Activities {
	h.T.Helper()
	reg, err := tool.NewRegistry(append(tool.Builtins(tool.BuiltinOptions{}), extra...)...)
	require.NoError(h.T, err)
	return &agent.Activities{Store: h.Store, Providers: providers, Tools: reg, HeartbeatInterval: 20 * time.Millisecond}
}

// scriptedProvider returns a scripted provider playing responses.
func ScriptedProvider(t *testing.T, responses ...scripted.Response) *scripted.Provider {
	t.Helper()
	p, err := scripted.New(scripted.Responses(responses...))
	require.NoError(t, err)
	return p
}

// useRealAgentTools registers the agent activities over the harness's
// store with a scripted provider and the built-in tools plus extra.
func UseRealAgentTools(h *Harness, extra []tool.Tool, responses ...scripted.Response) {
	h.T.Helper()
	h.Env.RegisterActivity(AgentActivities(h, provider.Set{"scripted": ScriptedProvider(h.T, responses...)}, extra...))
}
