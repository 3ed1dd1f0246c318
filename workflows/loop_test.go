package workflows_test

// SessionLoop construction checks and registry rules (LIFECYCLE.md §11).

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestLoopConfigValidation(t *testing.T) {
	cases := []struct {
		name string
		in   wire.SessionLoopInput
		want string
	}{
		{"mutually exclusive", wire.SessionLoopInput{Agents: []wire.AgentConfig{{ID: "main", SessionID: "a", ResumeSessionID: "b"}}},
			`agent "main": sessionId and resumeSessionId are mutually exclusive`},
		{"duplicate identity", wire.SessionLoopInput{Agents: []wire.AgentConfig{{ID: "one", SessionID: "same"}, {ID: "two", ResumeSessionID: "same"}}},
			`agents "one" and "two" use duplicate exact session identity "same"`},
		{"launcher identity duplicates", wire.SessionLoopInput{
			Agents:                    []wire.AgentConfig{{ID: "one", SessionID: "a"}, {ID: "two", SessionID: "b"}},
			ConfiguredAgentIdentities: map[string]wire.AgentIdentity{"two": {ID: "a", Resume: true}}},
			`agents "one" and "two" use duplicate exact session identity "a"`},
		{"max parallel tool calls", wire.SessionLoopInput{MaxParallelToolCalls: sessiontest.F64(0.5)},
			"maxParallelToolCalls must be a positive integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := sessiontest.NewHarness(t)
			h.Env.ExecuteWorkflow(workflows.SessionLoop, c.in)
			sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), c.want)
			require.Empty(t, h.StartedNames())
		})
	}
}

func TestLoopRefusesWorkWhenInactive(t *testing.T) {
	h := sessiontest.NewHarness(t)
	start := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "live"}})
	ready := h.UpdateAt(2*time.Second, wire.WorkflowID("live"), wire.UpdateWaitReady)
	late := h.NewResult(wire.UpdateStart)
	h.At(3*time.Second, func() {
		h.Env.CancelWorkflow()
		h.Send(late, "", wire.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "late"}})
	})
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	start.OK(t)
	ready.OK(t)
	require.ErrorContains(t, late.Rejection(t), "agent loop is not active")
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Len(t, res.Children, 1)
	require.True(t, res.Children[0].WasLive)
	require.Equal(t, wire.ChildSettled, res.Children[0].State)
	require.Nil(t, res.Children[0].Error, "a live child disposes cleanly on deactivation")
	// Never appended to, so its disposal erased it.
	sessiontest.RequireErased(t, h.Store, "live")
}

// dupParent runs a session outside the loop's registry, then a loop: a
// Start of the same id in the loop is refused by Temporal's workflow id
// uniqueness, reported as `session "<id>" already exists`.
func dupParent(ctx workflow.Context) error {
	live := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: wire.WorkflowID("dup")}),
		workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "dup"})
	if err := live.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return err
	}
	loop := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: "loop"}),
		workflows.SessionLoop, wire.SessionLoopInput{})
	if err := loop.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return err
	}
	if err := live.Get(ctx, nil); err != nil {
		return err
	}
	// The loop is cancelled from outside; only its settling matters here.
	_ = loop.Get(ctx, nil)
	return nil
}

func TestLoopStartOfRunningIDAlreadyExists(t *testing.T) {
	h := sessiontest.NewHarness(t)
	h.Env.RegisterWorkflow(dupParent)
	dup := h.UpdateAt(time.Second, "loop", wire.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "dup"}})
	disp := h.UpdateAt(2*time.Second, wire.WorkflowID("dup"), wire.UpdateDispose)
	h.At(3*time.Second, func() { h.Env.CancelWorkflowByID("loop", "") })
	h.Env.ExecuteWorkflow(dupParent)
	require.NoError(t, h.Env.GetWorkflowError())
	app := sessiontest.RequireMessage(t, dup.Failure(t), `session "dup" already exists`)
	disp.OK(t)
	require.Equal(t, "SessionAlreadyExists", app.Type())
	require.Equal(t, 1, h.Count(wire.CreateHandleName))
	sessiontest.RequireErased(t, h.Store, "dup")
}

// A session run recorded before the current message names (its
// "wire-names" version is the default) tells its parent loop it is live
// with the earlier SessionReady name, "session-ready"; the loop still takes
// it and counts the child live (docs/API.md: Names).
func TestLoopTakesTheLegacySessionReadySignal(t *testing.T) {
	h := sessiontest.NewHarness(t)
	h.Env.OnGetVersion("wire-names", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	start := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "old"}})
	ready := h.UpdateAt(2*time.Second, wire.WorkflowID("old"), wire.UpdateWaitReady)
	var live wire.LoopDescription
	h.At(3*time.Second, func() {
		var ok bool
		live, ok = h.LoopDescription()
		require.True(t, ok, "the loop answers Describe")
	})
	h.At(4*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	start.OK(t)
	ready.OK(t)
	require.Len(t, live.Children, 1)
	require.Equal(t, wire.ChildLive, live.Children[0].State)
	require.True(t, live.Children[0].WasLive)
	require.Equal(t, []string{"agentLoop.lifecycle(old)"}, live.Effects)
}
