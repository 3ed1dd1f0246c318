package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// The harness's shipped `read-only` preset (its CLI composition's
// permission table: read-only, workspace-write, danger-full-access) is
// offered: a create naming it pins it with its bundle (read-only, ask), a
// SetPermissions away from it and back to its bundle pins each preset the
// bundle is, and LoopState reports it.
func TestReadOnlyPreset(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ro")
	opts := sessiontest.Route()
	opts.Preset = "read-only"
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var created wire.LoopState
	h.At(2*time.Second, func() { created = h.LoopState() })
	away := h.UpdateAt(3*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{Preset: "workspace-write"})
	back := h.UpdateAt(4*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{SandboxMode: "read-only"})
	disp := h.UpdateAt(10*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ro", AgentOptions: opts})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	require.Equal(t, wire.Permissions{SandboxMode: "read-only", ApprovalPolicy: "ask", Preset: "read-only"}, *created.Permissions)
	var p wire.Permissions
	away.Decode(t, &p)
	require.Equal(t, wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "ask", Preset: "workspace-write"}, p)
	back.Decode(t, &p)
	require.Equal(t, wire.Permissions{SandboxMode: "read-only", ApprovalPolicy: "ask", Preset: "read-only"}, p, "the bundle is the read-only preset's")

	evs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, h.Store, "ro"))
	require.Equal(t, []string{
		"permission/preset", "sandbox/mode", "approval/policy",
		"permission/preset", "sandbox/mode",
		"permission/preset", "sandbox/mode",
	}, sessiontest.Types(evs))
	for i, want := range []string{
		`{"preset":"read-only"}`, `{"mode":"read-only"}`, `{"policy":"ask"}`,
		`{"preset":"workspace-write"}`, `{"mode":"workspace-write"}`,
		`{"preset":"read-only"}`, `{"mode":"read-only"}`,
	} {
		require.JSONEq(t, want, string(evs[i].Data), "event %d", i)
	}
	f := session.FoldPermissions(evs)
	require.Equal(t, "read-only", f.Preset)
}

// A run that predates the read-only preset (its version not taken) refuses
// a create naming it as it did, with its typed error and its text.
func TestReadOnlyPresetRefusedBeforeItsVersion(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ro-old")
	h.Env.OnGetVersion("read-only-preset", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	opts := sessiontest.Route()
	opts.Preset = "read-only"
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ro-old", AgentOptions: opts})
	app := sessiontest.AppErr(t, h.Env.GetWorkflowError())
	require.Equal(t, "TypeError", app.Type())
	require.Equal(t, `agentOptions.preset must be "workspace-write" or "danger-full-access"`, app.Message())
}

// In a run that predates the read-only preset, the bundle (read-only, ask)
// is no preset: a create setting it pins the mode and the policy only, as
// those runs did, so a replay stores the same events.
func TestReadOnlyBundleBeforeItsVersion(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ro-bundle")
	h.Env.OnGetVersion("read-only-preset", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	opts := sessiontest.Route()
	opts.SandboxMode, opts.ApprovalPolicy = "read-only", "ask"
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var created wire.LoopState
	h.At(2*time.Second, func() { created = h.LoopState() })
	disp := h.UpdateAt(10*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ro-bundle", AgentOptions: opts})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	require.Equal(t, wire.Permissions{SandboxMode: "read-only", ApprovalPolicy: "ask"}, *created.Permissions)
	evs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, h.Store, "ro-bundle"))
	require.Equal(t, []string{"sandbox/mode", "approval/policy"}, sessiontest.Types(evs))
}

// Each model call states the session's permissions in effect, for its
// runtime context: those of the create, then those a SetPermissions set.
func TestModelCallsStateThePermissions(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("mp")
	fake := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "one"}, &sessiontest.FakeResponse{Text: "two"})
	opts := sessiontest.Route()
	opts.Preset = "read-only"
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	f1 := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, waitPrompt("f1", "one"))
	set := h.UpdateAt(3*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{Preset: "danger-full-access"})
	f2 := h.UpdateAt(4*time.Second, "", wire.UpdateFollowup, waitPrompt("f2", "two"))
	disp := h.UpdateAt(10*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "mp", AgentOptions: opts})
	require.NoError(t, h.Env.GetWorkflowError())
	for _, r := range []*sessiontest.Result{ready, f1, set, f2, disp} {
		r.OK(t)
	}
	require.Len(t, fake.Models, 2)
	require.Equal(t, &agent.ContextPolicy{SandboxMode: "read-only", ApprovalPolicy: "ask"}, fake.Models[0].Policy)
	require.Equal(t, &agent.ContextPolicy{SandboxMode: "danger-full-access", ApprovalPolicy: "never"}, fake.Models[1].Policy)
}
