package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// runLive runs the session workflow wf with req on h until a dispose, and
// returns its permissions once live.
func runLive(t *testing.T, h *sessiontest.Harness, wf, req any) wire.Permissions {
	t.Helper()
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var live wire.LoopState
	h.At(2*time.Second, func() { live = h.LoopState() })
	disp := h.UpdateAt(10*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(wf, req)
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	require.NotNil(t, live.Permissions)
	return *live.Permissions
}

// permissionEvents returns the log's permission events as "type data".
func permissionEvents(t *testing.T, st *jsonl.Store, id string) []string {
	t.Helper()
	var out []string
	for _, e := range sessiontest.WithoutRecords(t, sessiontest.Stored(t, st, id)) {
		switch e.Type {
		case wire.TypePermissionPreset, wire.TypeSandboxMode, wire.TypeApprovalPolicy, wire.TypeApprovalRules:
			out = append(out, e.Type+" "+string(e.Data))
		}
	}
	return out
}

// A worker's permission defaults are the permissions of a session whose
// options set none, pinned in its log at create; the log's facts then win
// over any worker's defaults at resume.
func TestWorkerPermissionDefaults(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("wd")
	h.Acts.Runtime.Permissions = activities.PermissionDefaults{SandboxMode: "read-only", ApprovalPolicy: "ask"}
	p := runLive(t, h, workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "wd", AgentOptions: sessiontest.Route()})
	require.Equal(t, wire.Permissions{SandboxMode: "read-only", ApprovalPolicy: "ask", Preset: "read-only"}, p)
	want := []string{`permission/preset {"preset":"read-only"}`, `sandbox/mode {"mode":"read-only"}`, `approval/policy {"policy":"ask"}`}
	require.Equal(t, want, permissionEvents(t, h.Store, "wd"))

	// Resumed on a worker whose defaults differ: the log's facts stand and
	// nothing is pinned again.
	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("wd")
	h2.Acts.Runtime.Permissions = activities.PermissionDefaults{SandboxMode: "danger-full-access", ApprovalPolicy: "never"}
	p = runLive(t, h2, workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "wd"})
	require.Equal(t, wire.Permissions{SandboxMode: "read-only", ApprovalPolicy: "ask", Preset: "read-only"}, p)
	require.Equal(t, want, permissionEvents(t, h.Store, "wd"))

	// A resume's own options still win over the log's.
	h3 := sessiontest.NewHarnessOn(t, h.Store).WithID("wd")
	h3.Acts.Runtime.Permissions = activities.PermissionDefaults{ApprovalPolicy: "ask"}
	p = runLive(t, h3, workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "wd", AgentOptions: &wire.AgentOptions{ApprovalPolicy: "never"}})
	require.Equal(t, wire.Permissions{SandboxMode: "read-only", ApprovalPolicy: "never"}, p)
	require.Equal(t, append(want, `approval/policy {"policy":"never"}`), permissionEvents(t, h.Store, "wd"))
}

// A log that records no permission takes a worker's default at resume,
// which pins it (with the knobs it completes); a knob the log records
// keeps the log's value.
func TestWorkerPermissionDefaultsFillAResumedLog(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionNone)
	sessiontest.Persisted(t, st, "bare", "")
	h := sessiontest.NewHarnessOn(t, st).WithID("bare")
	h.Acts.Runtime.Permissions = activities.PermissionDefaults{ApprovalPolicy: "ask"}
	p := runLive(t, h, workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "bare"})
	require.Equal(t, wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "ask", Preset: "workspace-write"}, p)
	require.Equal(t, []string{`permission/preset {"preset":"workspace-write"}`, `sandbox/mode {"mode":"workspace-write"}`, `approval/policy {"policy":"ask"}`},
		permissionEvents(t, st, "bare"))
	f := session.FoldPermissions(sessiontest.Stored(t, st, "bare"))
	require.Equal(t, "ask", f.ApprovalPolicy)

	// The mode is the log's, whatever the worker's default mode.
	h2 := sessiontest.NewHarnessOn(t, st).WithID("bare")
	h2.Acts.Runtime.Permissions = activities.PermissionDefaults{SandboxMode: "danger-full-access", ApprovalPolicy: "never"}
	p = runLive(t, h2, workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "bare"})
	require.Equal(t, wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "ask", Preset: "workspace-write"}, p)
	require.Len(t, permissionEvents(t, st, "bare"), 3, "nothing pinned again")
}

// A session's options win over the worker's defaults.
func TestWorkerPermissionDefaultsUnderOptions(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("wo")
	h.Acts.Runtime.Permissions = activities.PermissionDefaults{SandboxMode: "read-only", ApprovalPolicy: "ask"}
	o := sessiontest.Route()
	o.ApprovalPolicy = "never"
	p := runLive(t, h, workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "wo", AgentOptions: o})
	require.Equal(t, wire.Permissions{SandboxMode: "read-only", ApprovalPolicy: "never"}, p)
	require.Equal(t, []string{`sandbox/mode {"mode":"read-only"}`, `approval/policy {"policy":"never"}`}, permissionEvents(t, h.Store, "wo"))
}

// A run that predates worker defaults (its version not taken) ignores
// them, as those runs did: the built-in defaults, nothing pinned.
func TestWorkerPermissionDefaultsBeforeTheirVersion(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("wv")
	h.Env.OnGetVersion("worker-permission-defaults", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	h.Acts.Runtime.Permissions = activities.PermissionDefaults{SandboxMode: "read-only", ApprovalPolicy: "ask"}
	p := runLive(t, h, workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "wv", AgentOptions: sessiontest.Route()})
	require.Equal(t, wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "never"}, p)
	sessiontest.RequireErased(t, h.Store, "wv")
}
