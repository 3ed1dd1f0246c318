package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// A configured agent's permission options reach the create the loop
// starts: the session pins its preset, mode and policy, and its allow
// rules, as a create with those agentOptions does.
func TestLoopConfiguredAgentPermissions(t *testing.T) {
	h := sessiontest.NewHarness(t)
	h.WaitFor(5*time.Second, "the fallback create started", h.LoopChildStarted(2))
	ready := h.UpdateAt(5*time.Second, wire.WorkflowID("lp"), wire.UpdateWaitReady)
	h.At(10*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{Agents: []wire.AgentConfig{{
		ID: "main", SessionID: "lp", Cwd: "/w", Preset: "read-only",
		ApprovalRules: []wire.ApprovalRule{{Tool: "run_command", CommandPrefix: "go test"}},
	}}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Empty(t, res.ConfigStartFailures)
	require.True(t, res.Children[1].WasLive)
	evs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, h.Store, "lp"))
	require.Equal(t, []string{"permission/preset", "sandbox/mode", "approval/policy", "approval/rules"}, sessiontest.Types(evs))
	for i, want := range []string{`{"preset":"read-only"}`, `{"mode":"read-only"}`, `{"policy":"ask"}`,
		`{"rules":[{"tool":"run_command","commandPrefix":"go test"}]}`} {
		require.JSONEq(t, want, string(evs[i].Data), "event %d", i)
	}
}

// A configured agent's permission options are validated at loop start,
// before anything starts, with the create's typed errors naming the agent.
func TestLoopConfiguredAgentPermissionsValidated(t *testing.T) {
	timeout := 0.5
	for _, c := range []struct {
		name string
		cfg  wire.AgentConfig
		want string
	}{
		{"policy", wire.AgentConfig{ID: "main", ApprovalPolicy: "sometimes"}, `agent "main": agentOptions.approvalPolicy must be "ask" or "never"`},
		{"mode", wire.AgentConfig{ID: "main", SandboxMode: "open"}, `agent "main": agent sandboxMode must be "read-only", "workspace-write" or "danger-full-access"`},
		{"preset", wire.AgentConfig{ID: "main", Preset: "custom"}, `agent "main": agentOptions.preset must be "read-only", "workspace-write" or "danger-full-access"`},
		{"conflict", wire.AgentConfig{ID: "main", Preset: "read-only", ApprovalPolicy: "never"}, `agent "main": agentOptions.sandboxMode and approvalPolicy must agree with agentOptions.preset`},
		{"timeout", wire.AgentConfig{ID: "main", ApprovalTimeoutMs: &timeout}, `agent "main": agentOptions.approvalTimeoutMs must be a positive safe integer`},
		{"rule", wire.AgentConfig{ID: "main", ApprovalRules: []wire.ApprovalRule{{Tool: "run_command", CommandPrefix: "make && rm"}}},
			`agent "main": agentOptions.approvalRules: the command prefix "make && rm" is not a run of plain words`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := sessiontest.NewHarness(t)
			h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{Agents: []wire.AgentConfig{c.cfg}})
			app := sessiontest.AppErr(t, h.Env.GetWorkflowError())
			require.Equal(t, "TypeError", app.Type())
			require.Equal(t, c.want, app.Message())
			require.Empty(t, h.StartedNames())
		})
	}
}

// A loop run that predates configured permissions (its version not taken)
// ignores them, as those runs did: an invalid one refuses nothing and the
// create pins none.
func TestLoopConfiguredAgentPermissionsBeforeTheirVersion(t *testing.T) {
	h := sessiontest.NewHarness(t)
	h.Env.OnGetVersion("loop-agent-permissions", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	h.WaitFor(5*time.Second, "the fallback create started", h.LoopChildStarted(2))
	ready := h.UpdateAt(5*time.Second, wire.WorkflowID("lp"), wire.UpdateWaitReady)
	h.At(10*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{Agents: []wire.AgentConfig{{
		ID: "main", SessionID: "lp", Cwd: "/w", Preset: "danger-full-access", ApprovalPolicy: "sometimes",
	}}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Empty(t, res.ConfigStartFailures)
	require.True(t, res.Children[1].WasLive)
	// Nothing was stored: the session went with the loop.
	sessiontest.RequireErased(t, h.Store, "lp")
}
