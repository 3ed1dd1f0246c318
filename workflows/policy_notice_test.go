package workflows_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// A SetPermissions that changes the approval policy stores, after the
// approval/policy, the notice the harness's setPolicy injects: an
// agent/inbox/spliced next-step insertion of a user/message from the
// plugin user-approval saying what changed. It wakes nothing; the next
// turn's first step claims it. A change of the mode alone, or a policy set
// to what it was, stores no notice.
func TestSetPermissionsPolicyNotice(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("pn")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "ok"})
	opts := sessiontest.Route()
	opts.ApprovalPolicy = "ask"
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	set := h.UpdateAt(2*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{Preset: "danger-full-access"})
	var idle wire.LoopState
	h.At(3*time.Second, func() { idle = h.LoopState() })
	same := h.UpdateAt(4*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{ApprovalPolicy: "never", SandboxMode: "read-only"})
	fu := h.UpdateAt(5*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "hello"))
	h.WaitFor(6*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(10*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "pn", AgentOptions: opts})
	require.NoError(t, h.Env.GetWorkflowError())
	for _, r := range []*sessiontest.Result{ready, set, same, fu, disp} {
		r.OK(t)
	}
	require.Equal(t, wire.LoopIdle, idle.State, "the notice woke no turn")
	require.Len(t, idle.Pending.NextStep, 1)

	evs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, h.Store, "pn"))
	require.Equal(t, []string{
		"permission/preset", "sandbox/mode", "approval/policy",
		"permission/preset", "sandbox/mode", "approval/policy", "agent/inbox/spliced",
		"sandbox/mode",
		"turn/start", "agent/inbox/spliced", "step/start", "user/message", "user/message", "assistant/message", "step/end", "turn/end",
	}, sessiontest.Types(evs))
	require.JSONEq(t, `{"policy":"never"}`, string(evs[5].Data))
	var splice struct {
		Target   string            `json:"target"`
		Start    int64             `json:"start"`
		Inserted []json.RawMessage `json:"inserted"`
	}
	require.NoError(t, json.Unmarshal(evs[6].Data, &splice))
	require.Equal(t, "next-step", splice.Target)
	require.Equal(t, int64(0), splice.Start)
	require.Len(t, splice.Inserted, 1)
	var msg map[string]any
	require.NoError(t, json.Unmarshal(splice.Inserted[0], &msg))
	require.NotEmpty(t, msg["id"])
	delete(msg, "id")
	require.Equal(t, map[string]any{
		"role":    "user",
		"content": []any{map[string]any{"type": "text", "text": `The approval policy changed from "ask" to "never" (changed by the user).`}},
		"source":  map[string]any{"kind": "plugin", "plugin": "user-approval"},
	}, msg)
	// The next turn's step claims it with the followup.
	var claimed []string
	for _, e := range evs[11:13] {
		var m struct {
			Content []wire.TextContent `json:"content"`
		}
		require.NoError(t, json.Unmarshal(e.Data, &m))
		claimed = append(claimed, m.Content[0].Text)
	}
	require.ElementsMatch(t, []string{`The approval policy changed from "ask" to "never" (changed by the user).`, "hello"}, claimed)
	f := session.FoldPermissions(evs)
	require.Equal(t, "never", f.ApprovalPolicy)
}

// A run that predates the notice (its version not taken) stores the
// policy only, as those runs did.
func TestSetPermissionsPolicyNoticeBeforeItsVersion(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("pv")
	h.Env.OnGetVersion("approval-policy-notice", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	set := h.UpdateAt(2*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{ApprovalPolicy: "ask"})
	var idle wire.LoopState
	h.At(3*time.Second, func() { idle = h.LoopState() })
	disp := h.UpdateAt(10*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "pv", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	for _, r := range []*sessiontest.Result{ready, set, disp} {
		r.OK(t)
	}
	require.Empty(t, idle.Pending.NextStep)
	evs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, h.Store, "pv"))
	require.Equal(t, []string{"permission/preset", "approval/policy"}, sessiontest.Types(evs))
}
