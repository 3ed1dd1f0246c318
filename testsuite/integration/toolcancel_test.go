package integration

// run_command's limits on the dev server, driven through the public client
// with the scripted provider: a cancelled or disposed turn kills its running
// command (and what the command detached) at once and stores the ABORTED
// result with the output so far; a command's timeout fires before its tool
// activity's.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths, recordPath{name: "turn-cancel-tool", agent: func(t *testing.T) workerapp.AgentConfig {
		args, err := json.Marshal(map[string]string{"command": "echo started; echo $$ > shell.pid; sleep 45"})
		require.NoError(t, err)
		cfg := scriptedAgent(scripted.Response{ToolCalls: []scripted.Call{{ID: "c1", Name: "run_command", Arguments: string(args)}}})(t)
		cfg.EnableRunCommand = true
		return cfg
	}, run: recordTurnCancelTool})
}

// recordTurnCancelTool: a Followup whose turn runs a command; Cancel
// while it runs: the cancel-running-tools version marker, the RunTool
// activity cancelled, its ABORTED result completing it, EndTurn; Dispose.
func recordTurnCancelTool(t *testing.T, w *world) []fixture {
	id := w.id("rec-turn-cancel-tool")
	cwd := t.TempDir()
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Meta: &wire.SessionMeta{Cwd: cwd}})
	w.awaitLive(id)
	c := w.client()
	_, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"run it"`)})
	require.NoError(t, err)
	shell := pidIn(t, w, cwd, "shell.pid")
	res, err := c.CancelTurn(w.ctx(), id, wire.CauseUser, false)
	require.NoError(t, err)
	require.Equal(t, "aborted", res.Reason.Kind)
	requireGone(t, shell, "the command's shell")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := withoutRecords(t, readAll(t, w, id))
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message",
		"tool/call", "tool/result", "step/end", "turn/end"}, eventTypes(evs))
	r, err := evs[5].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "ABORTED", r.Error.Code)
	markers, cancels := 0, 0
	for _, e := range w.history(wire.WorkflowID(id), run.GetRunID()).Events {
		if a := e.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "Version" &&
			string(a.GetDetails()["change-id"].GetPayloads()[0].GetData()) == `"cancel-running-tools"` {
			markers++
		}
		if e.GetActivityTaskCancelRequestedEventAttributes() != nil {
			cancels++
		}
	}
	require.Equal(t, 1, markers, "the cancel-running-tools version marker")
	require.Equal(t, 1, cancels, "the running RunTool cancelled")
	return only("turn-cancel-tool", wire.WorkflowID(id), run)
}

// longCommand prints, starts a child that leaves its process group (it
// writes its pid once it has), writes the shell's pid and sleeps 45 s.
const longCommand = `echo started; setsid sh -c 'echo $$ > detached.pid; exec sleep 300' >/dev/null 2>&1 </dev/null & ` +
	`until [ -s detached.pid ]; do sleep 0.01; done; echo $$ > shell.pid; sleep 45`

// pidIn waits for the pid the command writes to cwd/name.
func pidIn(t *testing.T, w *world, cwd, name string) int {
	t.Helper()
	var pid int
	w.awaitCond("the command wrote "+name, func() bool {
		b, err := os.ReadFile(filepath.Join(cwd, name))
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		return true
	})
	return pid
}

// requireGone waits until pid is no running process (a zombie counts as
// gone: its parent reaps it).
func requireGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s (pid %d) still runs 30s after its call ended: %s", what, pid, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startLongCommand starts a session whose turn runs longCommand and then
// a read_file, and returns once the command's processes are up.
func startLongCommand(t *testing.T, name string) (w *world, id, cwd string, run client.WorkflowRun, shell, detached int, started time.Time) {
	w = newWorld(t, shared, jsonl.CompressionZstd)
	args, err := json.Marshal(map[string]string{"command": longCommand})
	require.NoError(t, err)
	w.agent = scriptedAgent(scripted.Response{ToolCalls: []scripted.Call{
		{ID: "c1", Name: "run_command", Arguments: string(args)},
		{ID: "c2", Name: "read_file", Arguments: `{"path":"a.txt"}`},
	}})(t)
	w.agent.EnableRunCommand = true
	w.startWorker()
	id = w.id(name)
	cwd = t.TempDir()
	r := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Meta: &wire.SessionMeta{Cwd: cwd}})
	w.awaitLive(id)
	_, err = w.client().Followup(w.ctx(), id, wire.InputRequest{Content: json.RawMessage(`"run it"`)})
	require.NoError(t, err)
	detached = pidIn(t, w, cwd, "detached.pid")
	shell = pidIn(t, w, cwd, "shell.pid")
	return w, id, cwd, r, shell, detached, time.Now()
}

// requireAborted checks the turn's stored calls: c1 ABORTED with the
// command's output so far, c2 never dispatched, the turn ended aborted
// with cause.
func requireAborted(t *testing.T, w *world, id, cause string) {
	t.Helper()
	evs := withoutRecords(t, readAll(t, w, id))
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message",
		"tool/call", "tool/result", "tool/call", "tool/result", "step/end", "turn/end"}, eventTypes(evs))
	r1, err := evs[5].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "c1", r1.Message.Source.CallID)
	require.NotNil(t, r1.Error, "the command's result: %s", evs[5].Data)
	require.Equal(t, "ABORTED", r1.Error.Code, "the command's result: %s", evs[5].Data)
	require.Equal(t, "started\nError: the tool call was cancelled and the command was killed", r1.Message.Content[0].Content[0].Text)
	r2, err := evs[7].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "ABORTED_BEFORE_DISPATCH", r2.Error.Code)
	require.Equal(t, fmt.Sprintf(`{"turn":1,"reason":{"kind":"aborted","reason":{"kind":%q}}}`, cause), string(evs[9].Data))
}

// A cancel while run_command runs `sleep 45` kills it (and the child it
// detached with setsid) at once and stores ABORTED with its output; the
// undispatched call is closed ABORTED_BEFORE_DISPATCH.
func TestTurnCancelKillsRunningCommandOnServer(t *testing.T) {
	t.Parallel()
	w, id, _, run, shell, detached, started := startLongCommand(t, "turn-cancel-command")
	res, err := w.client().CancelTurn(w.ctx(), id, wire.CauseParent, false)
	require.NoError(t, err)
	require.Equal(t, "aborted", res.Reason.Kind)
	// The turn ended before the command would have: it did not wait for it.
	require.Less(t, time.Since(started), 45*time.Second, "the cancel waited for the command to finish")
	requireGone(t, shell, "the command's shell")
	requireGone(t, detached, "the child the command detached")
	requireAborted(t, w, id, "parent")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
}

// Dispose while run_command runs kills it the same way before the session
// closes.
func TestTurnDisposeKillsRunningCommandOnServer(t *testing.T) {
	t.Parallel()
	w, id, _, run, shell, detached, started := startLongCommand(t, "turn-dispose-command")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	require.Less(t, time.Since(started), 45*time.Second, "dispose waited for the command to finish")
	requireGone(t, shell, "the command's shell")
	requireGone(t, detached, "the child the command detached")
	requireAborted(t, w, id, "disposed")
}

// A run_command whose timeoutMs (an hour) outlasts its tool activity
// (activityTimeoutMs 20 s) times out before the activity does: the result
// is COMMAND_TIMEOUT with the output, not TOOL_OUTCOME_UNKNOWN, and the
// turn goes on.
func TestRunCommandTimesOutBeforeItsActivityOnServer(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.agent = scriptedAgent(
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "c1", Name: "run_command", Arguments: `{"command":"echo started; sleep 3600","timeoutMs":3600000}`},
		}},
		scripted.Text("after the timeout"),
	)(t)
	w.agent.EnableRunCommand = true
	w.startWorker()
	id := w.id("command-activity-timeout")
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute,
		Meta: &wire.SessionMeta{Cwd: t.TempDir()}, Options: &wire.Options{ActivityTimeoutMs: 20000}})
	w.awaitLive(id)
	c := w.client()
	in, err := c.Followup(w.ctx(), id, wire.InputRequest{Content: json.RawMessage(`"run it"`)})
	require.NoError(t, err)
	var end sfclient.TurnProgress
	for p, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 100 * time.Millisecond}) {
		require.NoError(t, err)
		end = p
	}
	require.Equal(t, "completed", end.Info.Reason.Kind)
	evs := readAll(t, w, id)
	var result *session.Event
	for i := range evs {
		if evs[i].Type == wire.TypeToolResult {
			result = &evs[i]
		}
	}
	require.NotNil(t, result, "no tool/result in %v", eventTypes(evs))
	r, err := result.ToolResult()
	require.NoError(t, err)
	require.NotNil(t, r.Error, "the command's result: %s", result.Data)
	require.Equal(t, "COMMAND_TIMEOUT", r.Error.Code, "the command's result: %s", result.Data)
	text := r.Message.Content[0].Content[0].Text
	require.True(t, strings.HasPrefix(text, "started\nError: the command timed out after "), text)
	require.True(t, strings.HasSuffix(text, " (the most the tool call's time limit allows) and was killed"), text)
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
}
