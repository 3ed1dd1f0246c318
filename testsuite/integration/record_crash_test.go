package integration

// The recorded path of a crashed turn: worker processes killed with
// SIGKILL mid-stream and mid-tool, the model and tool activities retried on
// the next worker.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths, recordPath{name: "turn-crash", processes: true, run: recordTurnCrash})
}

// recordTurnCrash: a Followup whose model call streams slowly; the worker
// is killed mid-stream and a second one retries the call; its tool calls
// (an idempotent one that blocks on its first run, a read that finishes and
// waits staged) run, the second worker is killed mid-tool and a third one
// runs the idempotent tool again; the next step answers; Dispose.
func recordTurnCrash(t *testing.T, w *world) []fixture {
	_, crashBin := workerBinaries(t)
	cwd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("alpha\n"), 0o644))
	first := scripted.Response{Text: "Counting and reading.", ChunkSize: 2, DelayMs: 150, ToolCalls: []scripted.Call{
		{ID: "c1", Name: "slow_count", Arguments: `{"name":"slow","firstRunMs":300000}`},
		{ID: "c2", Name: "read_file", Arguments: `{"path":"a.txt"}`},
	}}
	script := scriptFile(t, first, scripted.Text("Counted twice."))
	// The first worker's model stalls after its first chunk until the kill,
	// so the kill lands mid-stream however late the watch sees the text.
	stalled := scriptFile(t, first.WithStall(1), scripted.Text("Counted twice."))
	proc := w.startProc(crashBin, "--provider-script", stalled)
	id := w.id("rec-turn-crash")
	wid := wire.WorkflowID(id)
	run, in := w.startTurn(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Options: crashOptions, Meta: &wire.SessionMeta{Cwd: cwd}}, "count")
	c := w.client()
	for p, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 20 * time.Millisecond}) {
		require.NoError(t, err)
		if p.Kind == sfclient.ProgressText {
			break
		}
	}
	proc.kill()
	proc = w.startProc(crashBin, "--provider-script", script)
	require.True(t, awaitCtx(w.ctx(), func() bool {
		st, err := c.LoopState(w.ctx(), id)
		require.NoError(t, err)
		return lines(t, filepath.Join(cwd, "slow.runs")) == 1 && len(st.Calls) == 2 && st.Calls[1].State == wire.CallDone
	}), "the slow call never started beside a finished one")
	proc.kill()
	w.startProc(crashBin, "--provider-script", script)
	end := w.watchEnd(id, in.MessageID)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	require.Equal(t, "Counted twice.", sfclient.AnswerText(end.Events))
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := readAll(t, w, id)
	requireContiguous(t, evs)
	evs = withoutRecords(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/call", "tool/result", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end"}, eventTypes(evs))
	require.Equal(t, map[string]int{"c1": 1, "c2": 1}, toolCallsOf(t, evs))
	hist := w.history(wid, run.GetRunID())
	model := attemptsOf(hist, wire.CallModelActivity)
	require.Len(t, model, 2)
	require.GreaterOrEqual(t, model[0], int32(2), "the first model call was retried after the kill")
	tools := attemptsOf(hist, wire.RunToolActivity)
	require.Len(t, tools, 2)
	require.GreaterOrEqual(t, tools[0], int32(2), "the slow tool call was retried after the kill")
	return only("turn-crash", wid, run)
}

func init() {
	recordPaths = append(recordPaths, recordPath{name: "turn-max-tokens-steer", agent: scriptedAgent(
		scripted.Response{Text: "cut off", ChunkSize: 1, DelayMs: 100, Finish: "max-tokens", ToolCalls: []scripted.Call{
			{ID: "c1", Name: "list_dir", Arguments: `{"pa`},
		}},
		scripted.Text("answered"),
	), run: recordTurnMaxTokensSteer})
}

// recordTurnMaxTokensSteer: a Followup whose model call finishes at its
// token limit with a tool call while a Steer waits: the call is not run but
// closed by CloseCalls (the close-unresolved-calls version marker) before
// the next step, which answers; Dispose.
func recordTurnMaxTokensSteer(t *testing.T, w *world) []fixture {
	id := w.id("rec-turn-maxtokens")
	wid := wire.WorkflowID(id)
	run, in := w.startTurn(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Meta: &wire.SessionMeta{Cwd: t.TempDir()}}, "list")
	c := w.client()
	for p, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 20 * time.Millisecond}) {
		require.NoError(t, err)
		if p.Kind == sfclient.ProgressText {
			break
		}
	}
	_, err := c.Steer(w.ctx(), id, wire.InputRequest{MessageID: "m2", Content: json.RawMessage(`"go on"`)})
	require.NoError(t, err)
	end := w.watchEnd(id, in.MessageID)
	require.Equal(t, "max-tokens", end.Info.Reason.Kind)
	require.Equal(t, []string{"m1", "m2"}, end.Info.Claimed)
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := readAll(t, w, id)
	requireContiguous(t, evs)
	evs = withoutRecords(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/result", "step/end",
		"step/start", "user/message", "assistant/message", "step/end", "turn/end"}, eventTypes(evs))
	r, err := evs[5].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "MAX_TOKENS_NOT_RUN", r.Error.Code)
	require.Equal(t, 1, scheduled(w.history(wid, run.GetRunID()), wire.CloseCallsActivity))
	return only("turn-max-tokens-steer", wid, run)
}
