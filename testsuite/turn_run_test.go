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
func (h *harness) runTurns(req workflows.CreateSessionRequest, inputs ...workflows.InputRequest) []session.Event {
	h.t.Helper()
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fus := make([]*result, len(inputs))
	for i, in := range inputs {
		at := time.Duration(i+2) * time.Second
		fus[i] = h.updateAt(at, "", workflows.UpdateFollowup, in)
		h.waitFor(at, "turn "+strconv.Itoa(i+1)+" ended", h.turnsEnded(i+1))
	}
	disp := h.updateAt(time.Duration(len(inputs)+2)*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, req)
	require.NoError(h.t, h.env.GetWorkflowError())
	ready.ok(h.t)
	for _, fu := range fus {
		fu.ok(h.t)
	}
	disp.ok(h.t)
	return stored(h.t, h.store, req.SessionID)
}

// runSteeredTurn creates the session of req and, once it is ready, sends
// a Followup ("one") at 2 s; while its model call is held, a Steer
// ("more") at 3 s, and then closes release to let the call return. It
// waits for the turn's end, disposes the session, requires every update
// to succeed and returns the stored log.
func (h *harness) runSteeredTurn(req workflows.CreateSessionRequest, release chan struct{}) []session.Event {
	h.t.Helper()
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, prompt("one"))
	h.atStarted(2*time.Second, agent.CallModelActivity, func() {})
	steer := h.updateAt(3*time.Second, "", workflows.UpdateSteer, prompt("more"))
	h.at(3*time.Second, func() { close(release) })
	h.waitFor(3*time.Second, "turn 1 ended", h.turnsEnded(1))
	disp := h.updateAt(4*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, req)
	require.NoError(h.t, h.env.GetWorkflowError())
	for _, r := range []*result{ready, fu, steer, disp} {
		r.ok(h.t)
	}
	return stored(h.t, h.store, req.SessionID)
}

// injectAcrossWedgedOwner runs S0-32 on session id: turn 1 ("first")
// completes under the owner, an idle Inject ("later", id i1) is stored,
// the owner is wedged (its lease forfeited) and a resume, whose agent
// resumer installs, sends a followup ("second", id f2) that claims the
// inject. owner installs the first agent. It checks the loop states and
// the log's shape and returns the stored log.
func injectAcrossWedgedOwner(h *harness, id string, owner, resumer func(*harness)) []session.Event {
	t := h.t
	t.Helper()
	owner(h)
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.updateAt(2*time.Second, "", workflows.UpdateFollowup, promptID("f1", "first"))
	h.waitFor(2*time.Second, "turn 1 ended", h.turnsEnded(1))
	inj := h.updateAt(3*time.Second, "", workflows.UpdateInject, promptID("i1", "later"))
	var idle, resumed workflows.LoopState
	var after []session.Event
	h.at(4*time.Second, func() {
		lease, err := h.store.ForceUnlock(context.Background(), id)
		require.NoError(t, err)
		require.NotNil(t, lease)

		h2 := newHarnessOn(t, h.store).withID(id)
		resumer(h2)
		ready2 := h2.updateAt(time.Second, "", workflows.UpdateWaitReady)
		h2.at(2*time.Second, func() { idle = h2.loopState() })
		fu2 := h2.updateAt(3*time.Second, "", workflows.UpdateFollowup, promptID("f2", "second"))
		h2.waitFor(3*time.Second, "turn 2 ended", h2.turnsEnded(1))
		h2.at(4*time.Second, func() { resumed = h2.loopState() })
		disp2 := h2.updateAt(5*time.Second, "", workflows.UpdateDispose)
		h2.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: id, AgentOptions: route()})
		require.NoError(t, h2.env.GetWorkflowError())
		ready2.ok(t)
		fu2.ok(t)
		disp2.ok(t)
		after = stored(t, h.store, id)
	})
	h.at(5*time.Second, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, AgentOptions: route()})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	fu.ok(t)
	inj.ok(t)

	require.Equal(t, workflows.LoopIdle, idle.State)
	require.Equal(t, []string{"i1"}, idle.Pending.NextStep, "the stored inject is pending after the resume")
	require.Empty(t, idle.Recent, "nothing woke the agent")
	require.Len(t, resumed.Recent, 1)
	require.Equal(t, []string{"i1", "f2"}, resumed.Recent[0].Claimed)
	requireBalanced(t, after)
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
		"agent/inbox/spliced", "session/end-seed",
		"turn/start", "agent/inbox/spliced", "step/start", "user/message", "user/message", "assistant/message", "step/end", "turn/end",
	}, types(after))
	require.Equal(t, `{"turn":2}`, string(after[8].Data))
	require.Equal(t, `{"target":"next-step","start":0,"removedCount":1,"inserted":[]}`, string(after[9].Data))
	require.Equal(t, []string{"first", "later", "second"}, userTexts(t, after))
	requireReleased(t, h.store, id)
	return after
}

// agentActivities returns the agent activities over the harness's store,
// offering providers and the built-in tools plus extra.
func agentActivities(h *harness, providers provider.Set, extra ...tool.Tool) *agent.Activities {
	h.t.Helper()
	reg, err := tool.NewRegistry(append(tool.Builtins(tool.BuiltinOptions{}), extra...)...)
	require.NoError(h.t, err)
	return &agent.Activities{Store: h.store, Providers: providers, Tools: reg, HeartbeatInterval: 20 * time.Millisecond}
}

// scriptedProvider returns a scripted provider playing responses.
func scriptedProvider(t *testing.T, responses ...scripted.Response) *scripted.Provider {
	t.Helper()
	p, err := scripted.New(scripted.Responses(responses...))
	require.NoError(t, err)
	return p
}

// useRealAgentTools registers the agent activities over the harness's
// store with a scripted provider and the built-in tools plus extra.
func useRealAgentTools(h *harness, extra []tool.Tool, responses ...scripted.Response) {
	h.t.Helper()
	h.env.RegisterActivity(agentActivities(h, provider.Set{"scripted": scriptedProvider(h.t, responses...)}, extra...))
}
