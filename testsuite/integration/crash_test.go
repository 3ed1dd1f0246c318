package integration

// The agent loop survives a kill -9 of its worker process: mid-stream the
// model call is retried on the next worker and stores one message; mid-tool
// a tool that is not idempotent gets the TOOL_OUTCOME_UNKNOWN result and is
// not run again, an idempotent one runs again and its result is stored;
// a workflow that dies mid-turn is closed by resume as before.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// crashOptions make an activity of a killed worker time out (and be
// retried on the next worker) within about 2 s of its last heartbeat.
var crashOptions = &wire.Options{HeartbeatTimeoutMs: 2000}

// scriptFile writes the provider script of responses.
func scriptFile(t *testing.T, responses ...scripted.Response) string {
	t.Helper()
	b, err := json.Marshal(scripted.Responses(responses...))
	require.NoError(t, err)
	return writeScript(t, string(b))
}

// watchEnd follows the turn that claims messageID to its end.
func (w *world) watchEnd(id, messageID string) sfclient.TurnProgress {
	w.t.Helper()
	var end sfclient.TurnProgress
	for p, err := range w.client().WatchTurn(w.ctx(), id, messageID, sfclient.WatchOptions{Interval: 50 * time.Millisecond, Events: sfclient.StoreReader(w.store)}) {
		require.NoError(w.t, err)
		end = p
	}
	require.Equal(w.t, sfclient.ProgressEnded, end.Kind)
	return end
}

// lines counts the lines of a file, 0 when it does not exist.
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "\n")
}

// toolCallsOf counts the stored tool/call events of each call id.
func toolCallsOf(t *testing.T, evs []session.Event) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range evs {
		if e.Type == wire.TypeToolCall {
			c, err := e.ToolCall()
			require.NoError(t, err)
			out[c.CallID]++
		}
	}
	return out
}

// A kill -9 of the worker while the model streams: nothing of the stream
// is stored; the next worker's retry of the model call streams it again
// and stores exactly one assistant/message for the step.
func TestCrashMidStream(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	text := strings.Repeat("abcdefghij", 6)
	answer := scripted.Response{Text: text, ChunkSize: 3, DelayMs: 150}
	// The first worker's model stalls after three chunks (nine characters)
	// until the kill, so the kill lands mid-stream however late the watch
	// sees them; the next worker's model streams the whole answer.
	stalled := scriptFile(t, answer.WithStall(3))
	script := scriptFile(t, answer)
	first := w.startProc(workerBin, "--provider-script", stalled, "--log-level", "warn")
	id := w.id("crash-stream")
	wid := wire.WorkflowID(id)
	run, in := w.startTurn(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Options: crashOptions}, "stream it")
	c := w.client()
	shown := ""
	for p, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 20 * time.Millisecond}) {
		require.NoError(t, err)
		require.NotEqual(t, sfclient.ProgressEnded, p.Kind, "the turn ended before the kill")
		if p.Kind == sfclient.ProgressText {
			shown += p.Text
			if len(shown) >= 9 {
				break
			}
		}
	}
	first.kill()
	require.Equal(t, []string{"turn/start", "step/start", "user/message"}, eventTypes(readAll(t, w, id)),
		"nothing of the stream is stored before its end")

	w.startProc(workerBin, "--provider-script", script, "--log-level", "warn")
	end := w.watchEnd(id, in.MessageID)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	require.Equal(t, text, sfclient.AnswerText(end.Events))
	evs := readAll(t, w, id)
	requireContiguous(t, evs)
	evs = withoutRecords(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, eventTypes(evs))
	m, err := evs[3].AssistantMessage()
	require.NoError(t, err)
	require.Equal(t, int64(1), m.Turn)
	require.Equal(t, int64(1), m.Step)
	require.False(t, m.Interrupted)
	require.Equal(t, "assistant-1-1", m.Message.ID)
	require.Equal(t, []wire.ContentBlock{{Type: "text", Text: text}}, m.Message.Content)
	require.Equal(t, `{"turn":1,"reason":{"kind":"completed"}}`, string(evs[5].Data))
	attempts := attemptsOf(w.history(wid, run.GetRunID()), wire.CallModelActivity)
	require.Len(t, attempts, 1, "one model call")
	require.GreaterOrEqual(t, attempts[0], int32(2), "the model call was retried after the kill")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
}

// The exact model-facing text of a TOOL_OUTCOME_UNKNOWN result
// (FORMAT.md §5.3).
const outcomeUnknownText = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."

// A kill -9 of the worker while run_command (not idempotent) runs: its
// tool/call is stored; the next worker's retry does not run the command
// again but stores the TOOL_OUTCOME_UNKNOWN result, and the turn goes on to
// its next step.
func TestCrashMidToolNotIdempotent(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	cwd := t.TempDir()
	// The command outlives the killed worker (run_command puts it in its
	// own process group) until the test releases it, or for at most a
	// minute.
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(cwd, "release"), nil, 0o644) })
	script := scriptFile(t,
		scripted.Response{ToolCalls: []scripted.Call{{ID: "c1", Name: "run_command",
			Arguments: `{"command":"echo run >> runs.txt; for i in $(seq 600); do [ -e release ] && break; sleep 0.1; done; echo released"}`}}},
		scripted.Text("after the crash"),
	)
	args := []string{"--provider-script", script, "--enable-run-command", "--log-level", "warn"}
	first := w.startProc(workerBin, args...)
	id := w.id("crash-tool-unknown")
	wid := wire.WorkflowID(id)
	run, in := w.startTurn(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Options: crashOptions, Meta: &wire.SessionMeta{Cwd: cwd}}, "run it")
	require.True(t, awaitCtx(w.ctx(), func() bool { return lines(t, filepath.Join(cwd, "runs.txt")) == 1 }), "the command never ran")
	first.kill()
	before := readAll(t, w, id)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call"}, eventTypes(withoutRecords(t, before)))

	w.startProc(workerBin, args...)
	// A second run of the command would block until the release: fail as
	// soon as it shows instead of waiting for the turn.
	runs := filepath.Join(cwd, "runs.txt")
	require.True(t, awaitCtx(w.ctx(), func() bool {
		if lines(t, runs) > 1 {
			return true
		}
		// A query sent while the killed worker's sticky queue still holds
		// the run waits for it to time out and may itself time out on a
		// loaded machine: ask again.
		st, err := w.client().LoopState(w.ctx(), id)
		return err == nil && st.State == "idle"
	}), "the turn never went on after the restart")
	require.Equal(t, 1, lines(t, runs), "the command was run again")
	end := w.watchEnd(id, in.MessageID)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	require.Equal(t, "after the crash", sfclient.AnswerText(end.Events))
	evs := readAll(t, w, id)
	requireContiguous(t, evs)
	evs = withoutRecords(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end"}, eventTypes(evs))
	require.Equal(t, map[string]int{"c1": 1}, toolCallsOf(t, evs), "no duplicate tool/call")
	r, err := evs[5].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "interrupted-tool-result-c1-10", r.Message.ID, "after the route, 4 chunks, the message and the tool/call")
	require.Equal(t, []int64{9}, evs[5].SourceEventSeqs)
	require.Equal(t, "TOOL_OUTCOME_UNKNOWN", r.Error.Code)
	require.Equal(t, []wire.ToolResultContent{{Type: "tool-result", ToolCallID: "c1", IsError: true,
		Content: []wire.TextContent{{Type: "text", Text: outcomeUnknownText}}}}, r.Message.Content)
	require.Equal(t, 1, lines(t, filepath.Join(cwd, "runs.txt")), "the command was not run again")
	attempts := attemptsOf(w.history(wid, run.GetRunID()), wire.RunToolActivity)
	require.Len(t, attempts, 1)
	require.GreaterOrEqual(t, attempts[0], int32(2), "the tool activity was retried after the kill")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
}

// A kill -9 of the worker while an idempotent tool runs, beside a
// parallel call that finished (its result staged behind the first): the
// next worker runs the idempotent tool again and stores its real result,
// then the staged one, in model order; no tool/call is stored twice.
func TestCrashMidToolIdempotent(t *testing.T) {
	t.Parallel()
	_, crashBin := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	cwd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("alpha\n"), 0o644))
	script := scriptFile(t,
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "c1", Name: "slow_count", Arguments: `{"name":"slow","firstRunMs":300000}`},
			{ID: "c2", Name: "read_file", Arguments: `{"path":"a.txt"}`},
		}},
		scripted.Text("after the crash"),
	)
	first := w.startProc(crashBin, "--provider-script", script)
	id := w.id("crash-tool-rerun")
	wid := wire.WorkflowID(id)
	run, in := w.startTurn(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Options: crashOptions, Meta: &wire.SessionMeta{Cwd: cwd}}, "count")
	c := w.client()
	require.True(t, awaitCtx(w.ctx(), func() bool {
		st, err := c.LoopState(w.ctx(), id)
		require.NoError(t, err)
		return lines(t, filepath.Join(cwd, "slow.runs")) == 1 && len(st.Calls) == 2 && st.Calls[1].State == wire.CallDone
	}), "the slow call never started beside a finished one")
	first.kill()
	before := readAll(t, w, id)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/call"}, eventTypes(withoutRecords(t, before)),
		"c2's result waits, staged, behind c1")

	w.startProc(crashBin, "--provider-script", script)
	end := w.watchEnd(id, in.MessageID)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	evs := readAll(t, w, id)
	requireContiguous(t, evs)
	evs = withoutRecords(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/call", "tool/result", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end"}, eventTypes(evs))
	require.Equal(t, map[string]int{"c1": 1, "c2": 1}, toolCallsOf(t, evs), "no duplicate tool/call")
	r1, err := evs[6].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "c1", r1.Message.Source.CallID)
	require.Nil(t, r1.Error)
	require.Equal(t, []wire.ToolResultContent{{Type: "tool-result", ToolCallID: "c1", Content: []wire.TextContent{{Type: "text", Text: "run 2"}}}}, r1.Message.Content,
		"the idempotent tool ran again and its real result is stored")
	r2, err := evs[7].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "c2", r2.Message.Source.CallID)
	require.False(t, r2.Message.Content[0].IsError)
	require.Contains(t, r2.Message.Content[0].Content[0].Text, "alpha")
	require.Equal(t, 2, lines(t, filepath.Join(cwd, "slow.runs")))
	attempts := attemptsOf(w.history(wid, run.GetRunID()), wire.RunToolActivity)
	require.Len(t, attempts, 2)
	require.GreaterOrEqual(t, attempts[0], int32(2), "c1's activity was retried after the kill")
	require.Equal(t, int32(1), attempts[1], "c2's activity finished before the kill")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
}

// A session whose workflow dies mid-turn (its worker killed while a tool
// runs, its workflow terminated) is closed by resume exactly as before the
// agent loop: the closers of FORMAT.md §5.3, turn/end {interrupted}.
func TestCrashWorkflowDiesMidTurn(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	cwd := t.TempDir()
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(cwd, "release"), nil, 0o644) })
	script := scriptFile(t,
		scripted.Response{Text: "running", ToolCalls: []scripted.Call{
			{ID: "c1", Name: "run_command", Arguments: `{"command":"echo run >> runs.txt; for i in $(seq 600); do [ -e release ] && break; sleep 0.1; done"}`},
			{ID: "c2", Name: "list_dir", Arguments: `{}`},
		}},
	)
	first := w.startProc(workerBin, "--provider-script", script, "--enable-run-command", "--log-level", "warn")
	id := w.id("crash-workflow")
	wid := wire.WorkflowID(id)
	run, _ := w.startTurn(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Options: crashOptions, Meta: &wire.SessionMeta{Cwd: cwd}}, "run it")
	require.True(t, awaitCtx(w.ctx(), func() bool { return lines(t, filepath.Join(cwd, "runs.txt")) == 1 }), "the command never ran")
	first.kill()
	require.NoError(t, w.c.TerminateWorkflow(w.ctx(), wid, run.GetRunID(), "the machine crashed"))
	before := readAll(t, w, id)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call"}, eventTypes(withoutRecords(t, before)))
	closers, err := session.InterruptedTurnClosers(before)
	require.NoError(t, err)
	require.Equal(t, []string{"tool/result", "tool/result", "step/end", "turn/end"}, eventTypes(closers))

	w.startWorker()
	forfeit := true
	resumed := w.resume(wire.ResumeSessionRequest{ResumeSessionID: id, ForfeitDeadOwner: &forfeit})
	w.awaitLive(id)
	evs := readAll(t, w, id)
	requireContiguous(t, evs)
	requireSameEvents(t, before, evs[:len(before)])
	requireSameEvents(t, closers, evs[len(before):len(before)+len(closers)])
	te, err := evs[len(before)+3].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "interrupted", te.Reason.Kind)
	st, err := w.client().LoopState(w.ctx(), id)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.LastTurn)
	w.dispose(id)
	require.NoError(t, resumed.Get(w.ctx(), nil))
}
