package integration

// Recorded path of approvals (the tool-approvals and permission-pins
// gates): a session created with the workspace-write preset (policy ask)
// pins its permission facts; a write_file call waits for a Decide that
// allows it and adds an allow rule, the next call the rule matches runs
// without asking; SetPermissions switches the preset between turns.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths, recordPath{name: "turn-approval", agent: scriptedAgent(
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "c1", Name: "write_file", Arguments: `{"path":"src/a.txt","content":"a"}`},
			{ID: "c2", Name: "write_file", Arguments: `{"path":"src/b.txt","content":"b"}`},
		}},
		scripted.Text("Written."),
	), run: recordTurnApproval})
}

// recordTurnApproval: create with the preset, a Followup whose first call
// waits for its approval; Decide allows it with a rule; the turn ends;
// SetPermissions, which changes the policy and stores its notice; Dispose.
func recordTurnApproval(t *testing.T, w *world) []fixture {
	id := w.id("rec-turn-approval")
	wid := wire.WorkflowID(id)
	cwd := t.TempDir()
	opts := *scriptedRoute
	opts.Preset = wire.PresetWorkspaceWrite
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: &opts, Meta: &wire.SessionMeta{Cwd: cwd}})
	w.awaitLive(id)
	c := w.client()
	in, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"write them"`)})
	require.NoError(t, err)
	var pending []wire.PendingApproval
	require.Eventually(t, func() bool {
		pending, err = c.PendingApprovals(w.ctx(), id)
		require.NoError(t, err)
		return len(pending) > 0
	}, time.Minute, 20*time.Millisecond)
	require.Equal(t, "c1", pending[0].CallID)
	res, err := c.Decide(w.ctx(), id, wire.DecideRequest{ID: pending[0].ID, Outcome: wire.OutcomeAllowedOnce, Remember: &wire.ApprovalRule{Tool: "write_file", PathPrefix: "src"}})
	require.NoError(t, err)
	require.Equal(t, "allowed-once", res.Outcome)
	end := w.watchEnd(id, in.MessageID)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	for _, f := range []string{"a.txt", "b.txt"} {
		_, err := os.Stat(filepath.Join(cwd, "src", f))
		require.NoError(t, err)
	}
	p, err := c.SetPermissions(w.ctx(), id, wire.SetPermissionsRequest{Preset: wire.PresetDangerFullAccess})
	require.NoError(t, err)
	require.Equal(t, "never", p.ApprovalPolicy)
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := withoutRecords(t, readAll(t, w, id))
	require.Equal(t, []string{"permission/preset", "sandbox/mode", "approval/policy"}, eventTypes(evs)[:3])
	require.Equal(t, 1, countType(evs, wire.TypeApprovalAsked), "the rule let c2 run unasked")
	require.Equal(t, 1, countType(evs, wire.TypeApprovalRules))
	require.Equal(t, []string{"permission/preset", "sandbox/mode", "approval/policy", "agent/inbox/spliced"}, eventTypes(evs)[len(evs)-4:],
		"the policy's change with its notice (the approval-policy-notice version)")
	return only("turn-approval", wid, run)
}
