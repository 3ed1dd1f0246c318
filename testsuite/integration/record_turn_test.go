package integration

// Recorded paths of the agent loop: a turn with tool calls, and a turn
// cancelled while the model streams. They run the real agent activities
// with the scripted provider and the built-in tools.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths,
		recordPath{name: "turn-tools", agent: scriptedAgent(
			scripted.Response{Text: "Reading.", ToolCalls: []scripted.Call{
				{ID: "c1", Name: "read_file", Arguments: `{"path":"a.txt"}`},
				{ID: "c2", Name: "list_dir", Arguments: `{}`},
				{ID: "c3", Name: "write_file", Arguments: `{"path":"b.txt","content":"beta"}`},
			}},
			scripted.Text("Done: alpha.").WithChunkSize(3),
		), run: recordTurnTools},
		recordPath{name: "turn-cancel", agent: scriptedAgent(
			scripted.Response{Text: "partial answer", ChunkSize: 4, Stall: &scripted.Stall{AfterChunks: 2}},
		), run: recordTurnCancel},
		recordPath{name: "turn-continue-as-new", continueAsNew: true, agent: scriptedAgent(scripted.Text("all read")), run: recordTurnContinueAsNew},
	)
}

// scriptedAgent configures the worker with a scripted provider playing
// responses.
func scriptedAgent(responses ...scripted.Response) func(t *testing.T) workerapp.AgentConfig {
	return func(t *testing.T) workerapp.AgentConfig {
		p, err := scripted.New(scripted.Responses(responses...))
		require.NoError(t, err)
		return workerapp.AgentConfig{Providers: provider.Set{"scripted": p}}
	}
}

var scriptedRoute = &wire.AgentOptions{Provider: "scripted", Model: "m1"}

func (w *world) client() *sfclient.Client {
	return sfclient.New(w.c, sfclient.Options{TaskQueue: w.taskQueue})
}

// recordTurnTools: a Followup whose turn calls two parallel-safe tools and
// an exclusive one, then answers; the client watches it; Dispose.
func recordTurnTools(t *testing.T, w *world) []fixture {
	id := w.id("rec-turn-tools")
	wid := wire.WorkflowID(id)
	cwd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("alpha\n"), 0o644))
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Meta: &wire.SessionMeta{Cwd: cwd}})
	w.awaitLive(id)
	c := w.client()
	in, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"read a.txt"`)})
	require.NoError(t, err)
	var kinds []string
	var end sfclient.TurnProgress
	for p, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 20 * time.Millisecond, Events: sfclient.StoreReader(w.store)}) {
		require.NoError(t, err)
		kinds = append(kinds, p.Kind)
		end = p
	}
	require.Equal(t, sfclient.ProgressEnded, end.Kind)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	require.Equal(t, "Done: alpha.", sfclient.AnswerText(end.Events))
	require.Contains(t, kinds, sfclient.ProgressToolFinished)
	b, err := os.ReadFile(filepath.Join(cwd, "b.txt"))
	require.NoError(t, err)
	require.Equal(t, "beta", string(b))
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := withoutRecords(t, readAll(t, w, id))
	types := eventTypes(evs)
	require.Len(t, types, 15)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message"}, types[:4])
	require.Equal(t, []string{"tool/call", "tool/call", "tool/result", "tool/result"}, types[4:8],
		"the model call recorded the two parallel-safe calls it started at once")
	require.Equal(t, []string{"tool/call", "tool/result"}, types[8:10], "the exclusive call runs alone, last")
	require.Equal(t, []string{"step/end", "step/start", "assistant/message", "step/end", "turn/end"}, types[10:])
	var results []string
	for _, e := range evs {
		if e.Type == wire.TypeToolResult {
			r, err := e.ToolResult()
			require.NoError(t, err)
			results = append(results, r.Message.Source.CallID)
		}
	}
	require.Equal(t, []string{"c1", "c2", "c3"}, results)
	return only("turn-tools", wid, run)
}

// recordTurnCancel: a Followup whose model call stalls after showing text;
// Cancel aborts it: the model activity stores its interrupted anchor before
// the turn ends (wait-for-cancellation); Dispose.
func recordTurnCancel(t *testing.T, w *world) []fixture {
	id := w.id("rec-turn-cancel")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	w.awaitLive(id)
	c := w.client()
	in, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"tell me"`)})
	require.NoError(t, err)
	// Wait until the stream has shown its text.
	for p, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 20 * time.Millisecond}) {
		require.NoError(t, err)
		if p.Kind == sfclient.ProgressText {
			break
		}
	}
	res, err := c.CancelTurn(w.ctx(), id, wire.CauseUser, false)
	require.NoError(t, err)
	require.True(t, res.Cancelled)
	require.Equal(t, "aborted", res.Reason.Kind)
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := withoutRecords(t, readAll(t, w, id))
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, eventTypes(evs))
	m, err := evs[3].AssistantMessage()
	require.NoError(t, err)
	require.True(t, m.Interrupted)
	require.Equal(t, "partial ", m.Message.Content[0].Text)
	require.Equal(t, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}`, string(evs[5].Data))
	return only("turn-cancel", wid, run)
}

func readAll(t *testing.T, w *world, id string) []session.Event {
	t.Helper()
	stored, err := sfclient.StoreReader(w.store).ReadEvents(w.ctx(), id, 0, -1)
	require.NoError(t, err)
	evs, err := session.FromWireEvents(stored)
	require.NoError(t, err)
	return evs
}

func eventTypes(evs []session.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// recordTurnContinueAsNew: idle Injects (each stored as a splice) until the
// server suggests continue-as-new; the run continues as LiveSession
// carrying them; a Followup's turn there claims them all (one deletion
// splice) with the followup; Dispose.
func recordTurnContinueAsNew(t *testing.T, w *world) []fixture {
	id := w.id("rec-turn-can")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	w.awaitLive(id)
	latest := func() string {
		desc, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
		require.NoError(t, err)
		return desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	c := w.client()
	n := 0
	for ; latest() == run.GetRunID(); n++ {
		require.Less(t, n, canHistoryLimit, "the run never continued as new")
		res, err := c.Inject(w.ctx(), id, wire.InputRequest{MessageID: fmt.Sprintf("i%d", n), Content: json.RawMessage(`"note"`)})
		require.NoError(t, err)
		require.Equal(t, int64(n), res.SplicedSeq)
	}
	require.Positive(t, n)
	w.awaitLive(id)
	st, err := c.LoopState(w.ctx(), id)
	require.NoError(t, err)
	require.Len(t, st.Pending.NextStep, n, "the injects crossed continue-as-new")
	in, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "f1", Content: json.RawMessage(`"go"`)})
	require.NoError(t, err)
	var end sfclient.TurnProgress
	for p, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 20 * time.Millisecond}) {
		require.NoError(t, err)
		end = p
	}
	require.Equal(t, "completed", end.Info.Reason.Kind)
	require.Len(t, end.Info.Claimed, n+1)
	w.dispose(id)
	evs := readAll(t, w, id)
	types := eventTypes(evs)
	require.Equal(t, []string{"turn/start", "agent/inbox/spliced", "step/start"}, types[n:n+3])
	require.Equal(t, fmt.Sprintf(`{"target":"next-step","start":0,"removedCount":%d,"inserted":[]}`, n), string(evs[n+1].Data))
	require.Equal(t, []string{"assistant/message", "step/end", "turn/end"}, types[len(types)-3:])
	runs := w.runs(wid, run.GetRunID())
	require.Len(t, runs, 2, "one continue-as-new")
	return []fixture{
		{name: "turn-continue-as-new", workflowID: wid, runID: runs[0]},
		{name: "turn-continue-as-new-live", workflowID: wid, runID: runs[1]},
	}
}
