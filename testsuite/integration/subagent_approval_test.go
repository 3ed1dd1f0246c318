package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

// A parent whose subagentApprovalPolicy is ask (the user's policy over the
// harness's delegation rule): its child asks before its write_file; the
// parent's LoopState lists the child's question with the child's
// sessionId; a Decide sent to that session, as a client reads it there,
// lets the write run; the child's answer reaches the parent, and the
// question leaves the parent's list. The child's log pins the policy with
// source delegation.
func TestSubagentApprovalSurfacesInTheParent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	s := scripted.Script{Responses: []scripted.Response{
		scripted.ToolCall("p1", "subagent", `{"description":"Write it","prompt":"TASK-W: write a note"}`),
		scripted.Text("PARENT_DONE"),
	}}.WithBranch("TASK-W",
		scripted.ToolCall("w1", "write_file", `{"path":"note.txt","content":"hello"}`),
		scripted.Text("WROTE"),
	)
	p, err := scripted.New(s)
	require.NoError(t, err)
	w.agent = workerapp.AgentConfig{Providers: provider.Set{"scripted": p}}
	w.startWorker()
	id := w.id("sub-approval")
	cwd := t.TempDir()
	opts := &wire.AgentOptions{Provider: "scripted", Model: "m1", SubagentApprovalPolicy: "ask"}
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: opts, Meta: &wire.SessionMeta{Cwd: cwd}})
	w.awaitLive(id)
	c := w.client()
	in, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"delegate"`)})
	require.NoError(t, err)

	var asked wire.PendingApproval
	w.awaitCond("the child's question in the parent's LoopState", func() bool {
		st, err := c.LoopState(w.ctx(), id)
		if err != nil || len(st.Approvals) == 0 {
			return false
		}
		asked = st.Approvals[0]
		return true
	})
	require.Equal(t, "write_file", asked.Tool)
	require.Equal(t, "w1", asked.CallID)
	require.NotEmpty(t, asked.SessionID)
	_, err = os.Stat(filepath.Join(cwd, "note.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing written before the decision")

	_, err = c.Decide(w.ctx(), asked.SessionID, wire.DecideRequest{ID: asked.ID, Outcome: wire.OutcomeAllowedOnce})
	require.NoError(t, err)
	info, err := c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{MessageID: in.MessageID})
	require.NoError(t, err)
	require.Equal(t, "completed", info.Reason.Kind)
	st, err := c.LoopState(w.ctx(), id)
	require.NoError(t, err)
	require.Empty(t, st.Approvals, "the question leaves the parent's list")
	b, err := os.ReadFile(filepath.Join(cwd, "note.txt"))
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))

	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := withoutRecords(t, readAll(t, w, id))
	var results []string
	for _, e := range evs {
		if e.Type == wire.TypeToolResult {
			r, err := e.ToolResult()
			require.NoError(t, err)
			results = append(results, r.Message.Content[0].Content[0].Text)
		}
		if e.Type == wire.TypeToolCall {
			require.Equal(t, agent.ChildSessionID(id, e.Seq), asked.SessionID)
		}
	}
	require.Equal(t, []string{"WROTE"}, results)
	child := withoutRecords(t, readAll(t, w, asked.SessionID))
	require.JSONEq(t, `{"policy":"ask","source":"delegation"}`, string(child[0].Data))
}
