package integration

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths, recordPath{name: "turn-subagent", agent: func(t *testing.T) workerapp.AgentConfig {
		s := scripted.Script{Responses: []scripted.Response{
			scripted.ToolCalls(
				scripted.Call{ID: "c1", Name: "subagent", Arguments: `{"description":"Say one","prompt":"TASK-R1: reply ONE"}`},
				scripted.Call{ID: "c2", Name: "subagent", Arguments: `{"description":"Say two","prompt":"TASK-R2: reply TWO"}`},
			),
			scripted.Text("Both answered."),
		}}.WithBranch("TASK-R1", scripted.Text("ONE")).WithBranch("TASK-R2", scripted.Text("TWO"))
		p, err := scripted.New(s)
		require.NoError(t, err)
		return workerapp.AgentConfig{Providers: provider.Set{"scripted": p}}
	}, run: recordTurnSubagent})
}

// recordTurnSubagent: a Followup whose turn calls the subagent tool twice
// in one step: the subagent-tool version marker, for each call a RunTool
// that plans it, a child CreateSession (its task, its one turn, its
// self-disposal) and a RunTool storing its answer; then the answer; Dispose.
// The first child's own history is recorded too.
func recordTurnSubagent(t *testing.T, w *world) []fixture {
	id := w.id("rec-turn-subagent")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Meta: &wire.SessionMeta{Cwd: t.TempDir()}})
	w.awaitLive(id)
	c := w.client()
	in, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"delegate both"`)})
	require.NoError(t, err)
	var end sfclient.TurnProgress
	for p, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 20 * time.Millisecond, Events: sfclient.StoreReader(w.store)}) {
		require.NoError(t, err)
		end = p
	}
	require.Equal(t, sfclient.ProgressEnded, end.Kind)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	require.Equal(t, "Both answered.", sfclient.AnswerText(end.Events))
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := withoutRecords(t, readAll(t, w, id))
	var results []string
	var children []string
	for _, e := range evs {
		switch e.Type {
		case wire.TypeToolCall:
			children = append(children, agent.ChildSessionID(id, e.Seq))
		case wire.TypeToolResult:
			r, err := e.ToolResult()
			require.NoError(t, err)
			results = append(results, r.Message.Content[0].Content[0].Text)
		}
	}
	require.Equal(t, []string{"ONE", "TWO"}, results)
	require.Len(t, children, 2)
	child := withoutRecords(t, readAll(t, w, children[0]))
	require.Equal(t, "subagent/descriptor", child[4].Type)
	desc, err := w.c.DescribeWorkflow(w.ctx(), wire.WorkflowID(children[0]), "")
	require.NoError(t, err)
	return []fixture{
		{name: "turn-subagent", workflowID: wid, runID: run.GetRunID()},
		{name: "turn-subagent-child", workflowID: wire.WorkflowID(children[0]), runID: desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()},
	}
}
