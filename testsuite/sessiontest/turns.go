package sessiontest

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// RunTurns creates the session of req and, once it is ready, sends each
// input as a Followup one virtual second apart (the first at 2 s), each
// after the previous turn ended; then it disposes the session. Every
// update must succeed. It returns the stored log.
func (h *Harness) RunTurns(req workflows.CreateSessionRequest, inputs ...wire.InputRequest) []session.Event {
	h.T.Helper()
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fus := make([]*Result, len(inputs))
	for i, in := range inputs {
		at := time.Duration(i+2) * time.Second
		fus[i] = h.UpdateAt(at, "", wire.UpdateFollowup, in)
		h.WaitFor(at, "turn "+strconv.Itoa(i+1)+" ended", h.TurnsEnded(i+1))
	}
	disp := h.UpdateAt(time.Duration(len(inputs)+2)*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, req)
	require.NoError(h.T, h.Env.GetWorkflowError())
	ready.OK(h.T)
	for _, fu := range fus {
		fu.OK(h.T)
	}
	disp.OK(h.T)
	return Stored(h.T, h.Store, req.SessionID)
}

// RunSteeredTurn creates the session of req and, once it is ready, sends
// a Followup ("one") at 2 s; while its model call is held, a Steer
// ("more") at 3 s, and then closes release to let the call return. It
// waits for the turn's end, disposes the session, requires every update
// to succeed and returns the stored log.
func (h *Harness) RunSteeredTurn(req workflows.CreateSessionRequest, release chan struct{}) []session.Event {
	h.T.Helper()
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, Prompt("one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	steer := h.UpdateAt(3*time.Second, "", wire.UpdateSteer, Prompt("more"))
	h.At(3*time.Second, func() { close(release) })
	h.WaitFor(3*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, req)
	require.NoError(h.T, h.Env.GetWorkflowError())
	for _, r := range []*Result{ready, fu, steer, disp} {
		r.OK(h.T)
	}
	return Stored(h.T, h.Store, req.SessionID)
}

// AgentActivities returns the agent activities over the harness's runtime
// (the store activities' own), offering providers and the built-in tools
// plus extra.
func AgentActivities(h *Harness, providers provider.Set, extra ...tool.Tool) *agent.Activities {
	h.T.Helper()
	reg, err := tool.NewRegistry(append(tool.Builtins(tool.BuiltinOptions{}), extra...)...)
	require.NoError(h.T, err)
	return &agent.Activities{Runtime: h.Acts.Runtime, Providers: providers, Tools: reg}
}

// ScriptedProvider returns a scripted provider playing responses.
func ScriptedProvider(t *testing.T, responses ...scripted.Response) *scripted.Provider {
	t.Helper()
	p, err := scripted.New(scripted.Responses(responses...))
	require.NoError(t, err)
	return p
}

// UseRealAgentTools registers the agent activities over the harness's
// store with a scripted provider and the built-in tools plus extra.
func UseRealAgentTools(h *Harness, extra []tool.Tool, responses ...scripted.Response) {
	h.T.Helper()
	h.Env.RegisterActivity(AgentActivities(h, provider.Set{"scripted": ScriptedProvider(h.T, responses...)}, extra...))
}

// Route is the agent route of the turn tests: the scripted provider,
// model m1.
func Route() *wire.AgentOptions {
	return &wire.AgentOptions{Provider: "scripted", Model: "m1"}
}

// Prompt is a Followup, Steer or Inject request carrying text.
func Prompt(text string) wire.InputRequest {
	b, _ := json.Marshal(text)
	return wire.InputRequest{Content: b}
}

// PromptID is Prompt with the client-chosen message id.
func PromptID(id, text string) wire.InputRequest {
	r := Prompt(text)
	r.MessageID = id
	return r
}

// LoopState queries the top-level session's loop.
func (h *Harness) LoopState() wire.LoopState {
	h.T.Helper()
	v, err := h.Env.QueryWorkflow(wire.QueryLoopState)
	require.NoError(h.T, err)
	var s wire.LoopState
	require.NoError(h.T, v.Get(&s))
	return s
}

// TurnsEnded is a WaitFor condition: n turns have ended.
func (h *Harness) TurnsEnded(n int) func() bool {
	return func() bool {
		s := h.LoopState()
		k := 0
		for _, r := range s.Recent {
			if r.Reason != nil {
				k++
			}
		}
		return k >= n && s.State == wire.LoopIdle
	}
}

// ReasonKinds lists the kinds of the turn-end reasons rs.
func ReasonKinds(rs []wire.TurnEndReason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Kind
	}
	return out
}

// ResumeAndDispose resumes id on st in a fresh environment, returns the
// SessionInfo and disposes the session.
func ResumeAndDispose(t *testing.T, st *jsonl.Store, id string, extra ...func(*Harness)) (wire.SessionInfo, *Harness) {
	t.Helper()
	h := NewHarnessOn(t, st).WithID(id)
	for _, f := range extra {
		f(h)
	}
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: id, Hooks: AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	var info wire.SessionInfo
	ready.Decode(t, &info)
	disp.OK(t)
	RequireReleased(t, st, id)
	return info, h
}
