package integration

// Tool-call approvals survive kill -9 of every worker process (docs/API.md
// "Approvals", LIFECYCLE.md §13.7). A call waiting for its Decide holds no
// activity and, without an approval timeout, no timer: the workers can die
// and stay dead for longer than every activity timeout, and the next
// worker finds the same approval waiting. An approval timeout is a
// workflow timer: it fires on the server while no worker runs, and its
// rejection is stored once a worker is back. An approved call runs once:
// a kill while it runs stores its outcome as unknown and never runs it
// again, a kill before it started runs it on the next worker; either way
// its approval/decided is stored before it runs.
//
// The sessions are driven as a client in another language would drive
// them, from docs/API.md alone: the `temporal` CLI starts them, sends
// Followup, Decide, WaitTurn and Dispose and queries LoopState. The test
// reads the store and the server's history only to check.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// temporalCLI runs the `temporal` CLI against the package's server.
type temporalCLI struct {
	w   *world
	bin string
	env []string
}

// newTemporalCLI locates the Temporal CLI of the dev server (the one
// `worker --dev-prepare` builds) with no profile of the machine in effect.
func newTemporalCLI(t *testing.T, w *world) *temporalCLI {
	t.Helper()
	bin, err := devserver.Locate(w.ctx(), devserver.LocateOptions{})
	require.NoError(t, err)
	cfg := t.TempDir()
	env := append(os.Environ(), "TEMPORAL_CONFIG_FILE="+filepath.Join(cfg, "temporal.toml"))
	return &temporalCLI{w: w, bin: bin, env: env}
}

// run runs `temporal args...` against the server and returns its output
// (stdout and stderr) and exit status.
func (c *temporalCLI) run(args ...string) (string, int) {
	c.w.t.Helper()
	ctx, cancel := context.WithTimeout(c.w.ctx(), 90*time.Second)
	defer cancel()
	full := append(args, "--address", shared.address, "--namespace", shared.namespace, "--command-timeout", "60s")
	cmd := exec.CommandContext(ctx, c.bin, full...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	require.NoError(c.w.t, err, "temporal %s", strings.Join(args, " "))
	return string(out), 0
}

// must runs the CLI and requires it to succeed.
func (c *temporalCLI) must(args ...string) string {
	c.w.t.Helper()
	out, code := c.run(args...)
	require.Equal(c.w.t, 0, code, "temporal %s:\n%s", strings.Join(args, " "), out)
	return out
}

// update runs `temporal workflow update execute` of update name with the
// JSON input (none when empty).
func (c *temporalCLI) update(wid, name, input string) (string, int) {
	c.w.t.Helper()
	args := []string{"workflow", "update", "execute", "-o", "json", "--workflow-id", wid, "--name", name}
	if input != "" {
		args = append(args, "--input", input)
	}
	return c.run(args...)
}

// mustUpdate runs an update that must succeed and decodes its result.
func (c *temporalCLI) mustUpdate(wid, name, input string, out any) {
	c.w.t.Helper()
	text, code := c.update(wid, name, input)
	require.Equal(c.w.t, 0, code, "update %s %s:\n%s", name, input, text)
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	require.NoError(c.w.t, json.Unmarshal([]byte(text), &res), text)
	if out != nil {
		require.NoError(c.w.t, json.Unmarshal(res.Result, out), text)
	}
}

// cliLoopState is the part of LoopState a client of approvals reads,
// decoded by the documented field names.
type cliLoopState struct {
	State string `json:"state"`
	Turn  int64  `json:"turn"`
	Calls []struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"calls"`
	Approvals []cliApproval `json:"approvals"`
}

// cliApproval is a pending approval of LoopState.
type cliApproval struct {
	ID         string `json:"id"`
	CallID     string `json:"callId"`
	Tool       string `json:"tool"`
	Turn       int64  `json:"turn"`
	Step       int64  `json:"step"`
	Reason     string `json:"reason"`
	Arguments  string `json:"arguments"`
	AskedAtMs  int64  `json:"askedAtMs"`
	DeadlineMs int64  `json:"deadlineMs"`
}

// loopState queries LoopState with the CLI; ok is false when the query
// failed (no worker answered yet).
func (c *temporalCLI) loopState(wid string) (cliLoopState, string, bool) {
	c.w.t.Helper()
	out, code := c.run("workflow", "query", "-o", "json", "--workflow-id", wid, "--name", "LoopState")
	if code != 0 {
		return cliLoopState{}, out, false
	}
	var res struct {
		QueryResult []cliLoopState `json:"queryResult"`
	}
	require.NoError(c.w.t, json.Unmarshal([]byte(out), &res), out)
	require.Len(c.w.t, res.QueryResult, 1, out)
	return res.QueryResult[0], out, true
}

// awaitApproval polls LoopState until it lists an approval, and returns
// the state.
func (c *temporalCLI) awaitApproval(wid string) cliLoopState {
	c.w.t.Helper()
	var st cliLoopState
	c.w.awaitCond("LoopState of "+wid+" lists a pending approval", func() bool {
		var ok bool
		st, _, ok = c.loopState(wid)
		return ok && len(st.Approvals) > 0
	})
	return st
}

// startSession starts CreateSession for id with the CLI, as docs/API.md's
// worked example does, with the workflow task timeout a killed worker's
// tasks need to move on, and waits until it is live.
func (c *temporalCLI) startSession(id string, agentOptions map[string]any, cwd string) string {
	c.w.t.Helper()
	wid := wire.WorkflowID(id)
	req, err := json.Marshal(map[string]any{
		"sessionId":    id,
		"meta":         map[string]any{"cwd": cwd},
		"agentOptions": agentOptions,
		"options":      map[string]any{"heartbeatTimeoutMs": 2000},
	})
	require.NoError(c.w.t, err)
	c.w.track(wid)
	c.must("workflow", "start", "--task-queue", c.w.taskQueue, "--type", "CreateSession", "--workflow-id", wid,
		"--task-timeout", "1s", "--input", string(req))
	var info struct {
		NextSeq int64 `json:"nextSeq"`
	}
	c.mustUpdate(wid, "WaitReady", "", &info)
	return wid
}

// askOptions are the agent options of an approval session: the scripted
// route and the ask policy, with more options.
func askOptions(more map[string]any) map[string]any {
	o := map[string]any{"provider": "scripted", "model": "m1", "approvalPolicy": "ask"}
	for k, v := range more {
		o[k] = v
	}
	return o
}

// approvalScript is a model that calls run_command with command as c1,
// then answers "done".
func approvalScript(t *testing.T, command string) string {
	t.Helper()
	args, err := json.Marshal(map[string]string{"command": command})
	require.NoError(t, err)
	return scriptFile(t,
		scripted.Response{ToolCalls: []scripted.Call{{ID: "c1", Name: "run_command", Arguments: string(args)}}},
		scripted.Text("done"),
	)
}

// approvalEvents are the approval/asked and approval/decided of a log,
// with the index of the event of each type that follows them.
type approvalEvents struct {
	asked   []map[string]string
	decided []map[string]string
	// decidedAt and resultAt are the indexes of the approval/decided and
	// tool/result events.
	decidedAt, resultAt []int
}

func approvalsOf(t *testing.T, evs []session.Event) approvalEvents {
	t.Helper()
	var a approvalEvents
	for i, e := range evs {
		var d map[string]string
		switch e.Type {
		case "approval/asked":
			require.NoError(t, json.Unmarshal(e.Data, &d))
			a.asked = append(a.asked, d)
		case "approval/decided":
			require.NoError(t, json.Unmarshal(e.Data, &d))
			a.decided = append(a.decided, d)
			a.decidedAt = append(a.decidedAt, i)
		case "tool/result":
			a.resultAt = append(a.resultAt, i)
		}
	}
	return a
}

// turnTypes are the types of a log's events from its first turn/start.
func turnTypes(t *testing.T, evs []session.Event) []string {
	t.Helper()
	types := eventTypes(withoutRecords(t, evs))
	for i, typ := range types {
		if typ == "turn/start" {
			return types[i:]
		}
	}
	t.Fatalf("no turn/start in %v", types)
	return nil
}

// resultOf decodes the tool/result at index i of evs: its error code ("" for
// none) and its text.
func resultOf(t *testing.T, evs []session.Event, i int) (code, text string) {
	t.Helper()
	r, err := evs[i].ToolResult()
	require.NoError(t, err)
	if r.Error != nil {
		code = r.Error.Code
	}
	return code, r.Message.Content[0].Content[0].Text
}

// requireSettled checks a second Decide of a settled approval: refused by
// the CLI with the outcome that stands, and by an SDK client with the
// typed error ApprovalSettled.
func requireSettled(t *testing.T, w *world, cli *temporalCLI, wid string, p cliApproval, outcome string) {
	t.Helper()
	out, code := cli.update(wid, "Decide", fmt.Sprintf(`{"callId":%q,"outcome":"allowed-once"}`, p.CallID))
	require.NotEqual(t, 0, code, "a second Decide was accepted:\n%s", out)
	// The CLI logs the refusal with its message quoted.
	require.Contains(t, out, fmt.Sprintf("is settled already: %s (type: ApprovalSettled, retryable: false)", outcome))
	require.Contains(t, out, p.ID)
	err := w.update(wid, "Decide", nil, map[string]string{"id": p.ID, "outcome": "rejected"})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, "ApprovalSettled", appErr.Type())
}

// requireNoWork checks, on the server, that the session holds no pending
// activity, never started a timer, and scheduled no activity beyond the
// runs it had scheduled: a waiting approval without a timeout needs no
// worker.
func requireNoWork(t *testing.T, w *world, wid string, runs int) {
	t.Helper()
	desc, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
	require.NoError(t, err)
	require.Empty(t, desc.RawResponse.GetPendingActivities(), "an activity is pending while the approval waits")
	n := 0
	for _, e := range w.history(wid, "").Events {
		require.NotEqual(t, enumspb.EVENT_TYPE_TIMER_STARTED, e.GetEventType(), "a timer was started for an approval without a timeout")
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			n++
		}
	}
	require.Equal(t, runs, n, "an activity was scheduled while the approval waits")
}

// Every worker is killed with SIGKILL while a run_command call waits for
// its approval, and none runs for three heartbeat timeouts (each
// activity's limit, 2 s here): the session holds no activity and no timer
// meanwhile. The worker started afterwards lists the same approval; the
// CLI's Decide allowed-once runs the command exactly once and the turn
// completes; a second Decide is refused ApprovalSettled.
func TestApprovalWaitsThroughKillOfEveryWorker(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	cli := newTemporalCLI(t, w)
	cwd := t.TempDir()
	args := []string{"--provider-script", approvalScript(t, "echo run >> runs.txt"), "--enable-run-command", "--log-level", "warn"}
	first, second := w.startProc(workerBin, args...), w.startProc(workerBin, args...)
	id := w.id("approval-kill-all")
	wid := cli.startSession(id, askOptions(nil), cwd)
	var queued struct {
		MessageID string `json:"messageId"`
		Target    string `json:"target"`
	}
	cli.mustUpdate(wid, "Followup", `{"messageId":"m1","content":"append a line to runs.txt"}`, &queued)
	require.Equal(t, "next-turn", queued.Target)

	st := cli.awaitApproval(wid)
	require.Len(t, st.Approvals, 1)
	p := st.Approvals[0]
	require.Equal(t, "c1", p.CallID)
	require.Equal(t, "run_command", p.Tool)
	require.Equal(t, int64(1), p.Turn)
	require.Equal(t, int64(1), p.Step)
	require.JSONEq(t, `{"command":"echo run >> runs.txt"}`, p.Arguments)
	require.Zero(t, p.DeadlineMs, "no approval timeout")
	require.Equal(t, "awaiting-approval", st.Calls[0].State)

	first.kill()
	second.kill()
	evs := readAll(t, w, id)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "approval/asked"}, turnTypes(t, evs))
	asked := approvalsOf(t, evs).asked
	require.Equal(t, []map[string]string{{"id": p.ID, "toolName": "run_command", "callId": "c1", "reason": "run_command requires approval in this session"}}, asked)

	// No worker runs for three heartbeat timeouts; nothing on the server
	// waits for one.
	scheduledAtKill := 0
	for _, e := range w.history(wid, "").Events {
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			scheduledAtKill++
		}
	}
	down := time.Now()
	w.awaitCond("three heartbeat timeouts without a worker", func() bool {
		requireNoWork(t, w, wid, scheduledAtKill)
		return time.Since(down) > 6*time.Second
	})
	require.Equal(t, evs, readAll(t, w, id), "nothing was stored without a worker")
	require.Equal(t, 0, lines(t, filepath.Join(cwd, "runs.txt")))

	w.startProc(workerBin, args...)
	var again cliLoopState
	w.awaitCond("LoopState answered by the new worker", func() bool {
		var ok bool
		again, _, ok = cli.loopState(wid)
		return ok
	})
	require.Equal(t, []cliApproval{p}, again.Approvals, "the same approval waits")
	requireNoWork(t, w, wid, scheduledAtKill)

	var decided struct {
		ID      string `json:"id"`
		CallID  string `json:"callId"`
		Outcome string `json:"outcome"`
	}
	cli.mustUpdate(wid, "Decide", fmt.Sprintf(`{"id":%q,"outcome":"allowed-once"}`, p.ID), &decided)
	require.Equal(t, p.ID, decided.ID)
	require.Equal(t, "c1", decided.CallID)
	require.Equal(t, "allowed-once", decided.Outcome)

	var ended struct {
		Turn   int64 `json:"turn"`
		Reason struct {
			Kind string `json:"kind"`
		} `json:"reason"`
	}
	cli.mustUpdate(wid, "WaitTurn", `{"turn":1}`, &ended)
	require.Equal(t, int64(1), ended.Turn)
	require.Equal(t, "completed", ended.Reason.Kind)
	require.Equal(t, 1, lines(t, filepath.Join(cwd, "runs.txt")), "the command ran exactly once")

	evs = readAll(t, w, id)
	requireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "approval/asked", "approval/decided", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end"}, turnTypes(t, evs))
	a := approvalsOf(t, evs)
	require.Equal(t, []map[string]string{{"id": p.ID, "outcome": "allowed-once"}}, a.decided)
	require.Len(t, a.resultAt, 1)
	require.Less(t, a.decidedAt[0], a.resultAt[0])
	code, _ := resultOf(t, evs, a.resultAt[0])
	require.Empty(t, code, "the command's own result")

	requireSettled(t, w, cli, wid, p, "allowed-once")
	st, _, ok := cli.loopState(wid)
	require.True(t, ok)
	require.Equal(t, "idle", st.State)
	require.Empty(t, st.Approvals)
	cli.mustUpdate(wid, "Dispose", "", nil)
	require.Contains(t, cli.must("workflow", "result", "--workflow-id", wid), "COMPLETED")
	require.Equal(t, 1, lines(t, filepath.Join(cwd, "runs.txt")))
}

// With an approval timeout of 10 s, every worker is killed while the call
// waits (well before the timeout, however loaded the machine): the timeout's workflow timer fires on the server with no worker
// running, and nothing is stored until a worker is back. The new worker
// then stores the rejection (approval/decided rejected, the call's
// APPROVAL_TIMEOUT result), the command never runs, the turn completes,
// and a late Decide is refused ApprovalSettled.
func TestApprovalTimeoutRejectsOnlyThroughTheWorkflowTimer(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	cli := newTemporalCLI(t, w)
	cwd := t.TempDir()
	args := []string{"--provider-script", approvalScript(t, "echo run >> runs.txt"), "--enable-run-command", "--log-level", "warn"}
	first := w.startProc(workerBin, args...)
	id := w.id("approval-timeout-kill")
	wid := cli.startSession(id, askOptions(map[string]any{"approvalTimeoutMs": 10000}), cwd)
	cli.mustUpdate(wid, "Followup", `{"messageId":"m1","content":"append a line to runs.txt"}`, nil)
	st := cli.awaitApproval(wid)
	p := st.Approvals[0]
	require.Equal(t, p.AskedAtMs+10000, p.DeadlineMs)
	first.kill()
	evs := readAll(t, w, id)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "approval/asked"}, turnTypes(t, evs))

	hist := w.history(wid, "")
	var timers int
	for _, e := range hist.Events {
		require.NotEqual(t, enumspb.EVENT_TYPE_TIMER_FIRED, e.GetEventType(), "the timeout ran out before the kill")
		if e.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
			timers++
			require.Equal(t, 10*time.Second, e.GetTimerStartedEventAttributes().GetStartToFireTimeout().AsDuration())
		}
	}
	require.Equal(t, 1, timers, "the approval timeout is one workflow timer")
	w.awaitCond("the approval's timer fired on the server without a worker", func() bool {
		for _, e := range w.history(wid, "").Events {
			if e.GetEventType() == enumspb.EVENT_TYPE_TIMER_FIRED {
				return true
			}
		}
		return false
	})
	require.Equal(t, evs, readAll(t, w, id), "no rejection is stored without a worker")

	w.startProc(workerBin, args...)
	var ended struct {
		Reason struct {
			Kind string `json:"kind"`
		} `json:"reason"`
	}
	cli.mustUpdate(wid, "WaitTurn", `{"turn":1}`, &ended)
	require.Equal(t, "completed", ended.Reason.Kind)
	evs = readAll(t, w, id)
	requireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "approval/asked", "approval/decided", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end"}, turnTypes(t, evs))
	a := approvalsOf(t, evs)
	require.Equal(t, []map[string]string{{"id": p.ID, "outcome": "rejected"}}, a.decided)
	code, text := resultOf(t, evs, a.resultAt[0])
	require.Equal(t, "APPROVAL_TIMEOUT", code)
	require.Equal(t, `Error: no decision on the approval for tool "run_command" within 10s: rejected`, text)
	require.Equal(t, 0, lines(t, filepath.Join(cwd, "runs.txt")), "the rejected command never ran")
	requireSettled(t, w, cli, wid, p, "rejected")
	cli.mustUpdate(wid, "Dispose", "", nil)
}

// blockingCommand appends a line to runs.txt and then blocks until the
// test creates the file release (at the latest after a minute).
const blockingCommand = "echo run >> runs.txt; for i in $(seq 600); do [ -e release ] && break; sleep 0.1; done"

// Every worker is killed while the approved command runs. When it runs,
// its approval/decided is already stored. The next worker's retry finds
// the call decided and started: it stores the TOOL_OUTCOME_UNKNOWN result
// and never runs the command again; the log holds one approval/decided
// allowed-once, before the call's result; a second Decide is refused.
func TestApprovalKillWhileTheApprovedCommandRuns(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	cli := newTemporalCLI(t, w)
	cwd := t.TempDir()
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(cwd, "release"), nil, 0o644) })
	args := []string{"--provider-script", approvalScript(t, blockingCommand), "--enable-run-command", "--log-level", "warn"}
	first, second := w.startProc(workerBin, args...), w.startProc(workerBin, args...)
	id := w.id("approval-kill-running")
	wid := cli.startSession(id, askOptions(nil), cwd)
	cli.mustUpdate(wid, "Followup", `{"messageId":"m1","content":"run it"}`, nil)
	p := cli.awaitApproval(wid).Approvals[0]
	cli.mustUpdate(wid, "Decide", `{"callId":"c1","outcome":"allowed-once"}`, nil)

	runs := filepath.Join(cwd, "runs.txt")
	w.awaitCond("the approved command runs", func() bool { return lines(t, runs) == 1 })
	evs := readAll(t, w, id)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "approval/asked", "approval/decided"}, turnTypes(t, evs),
		"the decision is stored before the command runs")
	first.kill()
	second.kill()

	w.startProc(workerBin, args...)
	// A second run of the command would block until the release: fail as
	// soon as it shows instead of waiting for the turn.
	w.awaitCond("the turn ends or the command runs again", func() bool {
		st, _, ok := cli.loopState(wid)
		return lines(t, runs) > 1 || ok && st.State == "idle"
	})
	require.Equal(t, 1, lines(t, runs), "the command was run again")
	var ended struct {
		Reason struct {
			Kind string `json:"kind"`
		} `json:"reason"`
	}
	cli.mustUpdate(wid, "WaitTurn", `{"turn":1}`, &ended)
	require.Equal(t, "completed", ended.Reason.Kind)
	evs = readAll(t, w, id)
	requireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "approval/asked", "approval/decided", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end"}, turnTypes(t, evs))
	a := approvalsOf(t, evs)
	require.Len(t, a.asked, 1)
	require.Equal(t, []map[string]string{{"id": p.ID, "outcome": "allowed-once"}}, a.decided)
	require.Less(t, a.decidedAt[0], a.resultAt[0])
	code, _ := resultOf(t, evs, a.resultAt[0])
	require.Equal(t, "TOOL_OUTCOME_UNKNOWN", code)
	require.Equal(t, map[string]int{"c1": 1}, toolCallsOf(t, evs))
	requireSettled(t, w, cli, wid, p, "allowed-once")
	cli.mustUpdate(wid, "Dispose", "", nil)
	require.Equal(t, 1, lines(t, runs))
}

// The worker is killed after the Decide was recorded and before the
// approved call's RunTool started: the worker's only activity slot is
// held by another session's command, so the RunTool waits scheduled on
// the server, and nothing of the decision is in the store yet. The next
// worker runs that RunTool (its first attempt): it stores approval/decided
// and then runs the command, once.
func TestApprovalKillBeforeTheApprovedCallStarts(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	cli := newTemporalCLI(t, w)
	cwd, busy := t.TempDir(), t.TempDir()
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(busy, "release"), nil, 0o644) })
	args := []string{"--provider-script", approvalScript(t, blockingCommand), "--enable-run-command", "--log-level", "warn"}
	first := w.startProc(workerBin, append(args, "--max-concurrent-activities", "1")...)
	id := w.id("approval-kill-scheduled")
	wid := cli.startSession(id, askOptions(nil), cwd)
	cli.mustUpdate(wid, "Followup", `{"messageId":"m1","content":"run it"}`, nil)
	p := cli.awaitApproval(wid).Approvals[0]

	// Another session, under the never policy (nothing asks), runs the same
	// command: it holds the worker's one activity slot until the release.
	busyID := w.id("approval-kill-busy")
	busyWID := cli.startSession(busyID, map[string]any{"provider": "scripted", "model": "m1"}, busy)
	cli.mustUpdate(busyWID, "Followup", `{"messageId":"b1","content":"run it"}`, nil)
	w.awaitCond("the other session's command runs", func() bool { return lines(t, filepath.Join(busy, "runs.txt")) == 1 })

	cli.mustUpdate(wid, "Decide", fmt.Sprintf(`{"id":%q,"outcome":"allowed-once"}`, p.ID), nil)
	var pending []*workflowpb.PendingActivityInfo
	w.awaitCond("the approved call's RunTool scheduled", func() bool {
		desc, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
		require.NoError(t, err)
		pending = desc.RawResponse.GetPendingActivities()
		return len(pending) > 0
	})
	require.Len(t, pending, 1)
	pa := pending[0]
	require.Equal(t, "RunTool", pa.GetActivityType().GetName())
	require.Equal(t, enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, pa.GetState(), "the approved call's RunTool has not started")
	evs := readAll(t, w, id)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "approval/asked"}, turnTypes(t, evs),
		"the decision is only in the workflow")
	first.kill()

	w.startProc(workerBin, args...)
	runs := filepath.Join(cwd, "runs.txt")
	w.awaitCond("the approved command runs on the next worker", func() bool { return lines(t, runs) == 1 })
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "release"), nil, 0o644))
	var ended struct {
		Reason struct {
			Kind string `json:"kind"`
		} `json:"reason"`
	}
	cli.mustUpdate(wid, "WaitTurn", `{"turn":1}`, &ended)
	require.Equal(t, "completed", ended.Reason.Kind)
	evs = readAll(t, w, id)
	requireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "approval/asked", "approval/decided", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end"}, turnTypes(t, evs))
	a := approvalsOf(t, evs)
	require.Equal(t, []map[string]string{{"id": p.ID, "outcome": "allowed-once"}}, a.decided)
	require.Less(t, a.decidedAt[0], a.resultAt[0])
	code, _ := resultOf(t, evs, a.resultAt[0])
	require.Empty(t, code, "the command's own result")
	require.Equal(t, 1, lines(t, runs), "the command ran once")
	attempts := attemptsOf(w.history(wid, ""), wire.RunToolActivity)
	require.Len(t, attempts, 2, "the ask's RunTool, then the approved call's")
	require.Equal(t, int32(1), attempts[1], "the approved call ran on its first attempt, on the next worker")
	requireSettled(t, w, cli, wid, p, "allowed-once")
	cli.mustUpdate(wid, "Dispose", "", nil)
}
