package cli

// Subagents through the binaries (docs/API.md "Subagents"): a call of the
// subagent tool runs as a one-shot child session, a child workflow of the
// calling session's. These tests run the crash and cancellation cases a
// user meets: kill -9 of the worker while children run, the parent's
// workflow terminated, disposed or its turn cancelled while children run,
// and the parent's history with many children.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// subagentWorker writes the scripted model script (responses and
// branches, as the script file holds them) and starts a worker that
// offers it; a persistent dev server survives a kill of the worker's
// process group.
func subagentWorker(t *testing.T, e *env, script map[string]any, persistent bool) {
	t.Helper()
	b, err := json.Marshal(script)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	e.workerArgs = []string{"--provider-script", path}
	e.startWorker(!persistent)
}

// delegateTo is one subagent call of a model's response.
func delegateTo(id, label, prompt string) map[string]any {
	return map[string]any{"id": id, "name": "subagent", "arguments": map[string]any{"description": label, "prompt": prompt}}
}

// branch answers the conversations whose first user message contains when.
func branch(when string, responses ...any) map[string]any {
	return map[string]any{"when": when, "responses": responses}
}

// childrenOf returns the child session id of each subagent call stored in
// the parent's log, by call id.
func childrenOf(t *testing.T, parent string, evs []session.Event) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ev := range evs {
		if ev.Type != wire.TypeToolCall {
			continue
		}
		c, err := ev.ToolCall()
		require.NoError(t, err)
		out[c.CallID] = agent.ChildSessionID(parent, ev.Seq)
	}
	return out
}

// turnEnds returns how each turn of the log ended: the kind, and for an
// aborted turn its cause ("aborted/parent").
func turnEnds(t *testing.T, evs []session.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Type != wire.TypeTurnEnd {
			continue
		}
		end, err := ev.TurnEnd()
		require.NoError(t, err)
		s := end.Reason.Kind
		if len(end.Reason.Reason) > 0 {
			var cause struct {
				Kind string `json:"kind"`
			}
			require.NoError(t, json.Unmarshal(end.Reason.Reason, &cause))
			s += "/" + cause.Kind
		}
		out = append(out, s)
	}
	return out
}

// assistantTexts returns the text of each stored assistant/message.
func assistantTexts(t *testing.T, evs []session.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Type != wire.TypeAssistantMessage {
			continue
		}
		var d struct {
			Message struct {
				Content []wire.ContentBlock `json:"content"`
			} `json:"message"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		var text string
		for _, b := range d.Message.Content {
			if b.Type == "text" {
				text += b.Text
			}
		}
		out = append(out, text)
	}
	return out
}

// runsOf returns the status of every run of the workflow id, newest first
// (visibility is eventually consistent: the caller waits for what it
// expects).
func runsOf(ctx context.Context, tc temporalclient.Client, workflowID string) ([]enumspb.WorkflowExecutionStatus, error) {
	res, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", workflowID),
	})
	if err != nil {
		return nil, err
	}
	var out []enumspb.WorkflowExecutionStatus
	for _, ex := range res.GetExecutions() {
		out = append(out, ex.GetStatus())
	}
	return out, nil
}

// requireClosedOnce waits until the workflow of session id has exactly one
// run and that run is closed with a status in want (describe and the
// visibility list agree).
func requireClosedOnce(t *testing.T, ctx context.Context, tc temporalclient.Client, id string, want ...enumspb.WorkflowExecutionStatus) {
	t.Helper()
	wid := wire.WorkflowID(id)
	var (
		status enumspb.WorkflowExecutionStatus
		runs   []enumspb.WorkflowExecutionStatus
		err    error
	)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var d *temporalclient.WorkflowExecutionDescription
		d, err = tc.DescribeWorkflow(ctx, wid, "")
		if err == nil {
			status = d.RawResponse.GetWorkflowExecutionInfo().GetStatus()
			runs, err = runsOf(ctx, tc, wid)
		}
		if err == nil && slices.Contains(want, status) && len(runs) == 1 && runs[0] == status {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("workflow %s: status %v, runs listed %v (err %v); want one run, closed as %v", wid, status, runs, err, want)
}

// waitChildrenRunning waits until the parent's log holds the calls' tool/call
// events and each child's agent is running its turn (its LoopState), and
// returns the children by call id.
func waitChildrenRunning(t *testing.T, ctx context.Context, e *env, c *client.Client, parent string, calls ...string) map[string]string {
	t.Helper()
	var children map[string]string
	require.Eventually(t, func() bool {
		children = childrenOf(t, parent, e.stored(parent))
		if len(children) < len(calls) {
			return false
		}
		for _, call := range calls {
			st, err := c.LoopState(ctx, children[call])
			if err != nil || st.State != "running" {
				return false
			}
		}
		return true
	}, 90*time.Second, 100*time.Millisecond, "the children of %s never ran; %s", parent, e.logs())
	return children
}

// kill -9 of the worker (and its persistent dev server) while three
// children stream slow answers: after the restart each child runs to its
// end once (one workflow run, one turn, one answer), the parent's log
// holds each child's answer once as its call's result, the parent's turn
// completes, and no child workflow is left running.
func TestSubagentChildrenSurviveAWorkerKill(t *testing.T) {
	e := newEnv(t)
	slow := func(text string) map[string]any {
		return map[string]any{"text": text, "chunkSize": 1, "delayMs": 400}
	}
	subagentWorker(t, e, map[string]any{
		"responses": []any{
			map[string]any{"toolCalls": []any{
				delegateTo("k1", "First task", "KILL-ONE: answer slowly"),
				delegateTo("k2", "Second task", "KILL-TWO: answer slowly"),
				delegateTo("k3", "Third task", "KILL-THREE: answer slowly"),
			}},
			answer("All three answered."),
		},
		"branches": []any{
			branch("KILL-ONE", slow("one-answer-9f2c")),
			branch("KILL-TWO", slow("two-answer-41ad")),
			branch("KILL-THREE", slow("three-answer-77e0")),
		},
	}, true)
	ctx := e.ctx
	e.mustStarter("", "create", "--id", "kp", "--cwd", t.TempDir(), "--provider", "scripted", "--model", "m1")
	c := e.dialClient(ctx)
	_, err := c.Followup(ctx, "kp", wire.InputRequest{Content: json.RawMessage(`"delegate three tasks"`), MessageID: "kill-msg"})
	require.NoError(t, err)
	children := waitChildrenRunning(t, ctx, e, c, "kp", "k1", "k2", "k3")
	// Each child's model call is streaming (a few of its 15 chunks are out).
	time.Sleep(time.Second)
	for _, id := range children {
		require.Empty(t, assistantTexts(t, e.stored(id)), "child %s answered before the kill", id)
	}

	e.kill()
	e.startWorker(false)

	c = e.dialClient(ctx)
	// A parent stuck after the restart (a replay that diverges, say) fails
	// here, by name, long before the test's deadline.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	info, err := c.WaitTurn(wctx, "kp", wire.WaitTurnRequest{MessageID: "kill-msg"})
	require.NoError(t, err, "%s", e.logs())
	require.Equal(t, "completed", info.Reason.Kind)

	parent := e.stored("kp")
	requireContiguous(t, parent)
	require.Equal(t, map[string]string{
		"k1": "ok one-answer-9f2c",
		"k2": "ok two-answer-41ad",
		"k3": "ok three-answer-77e0",
	}, toolResults(t, parent))
	require.Equal(t, 3, countType(parent, wire.TypeToolResult), "each child's answer is stored once")
	require.Equal(t, []string{"completed"}, turnEnds(t, parent))
	require.Equal(t, "All three answered.", assistantTexts(t, parent)[len(assistantTexts(t, parent))-1])

	tc := c.Temporal()
	for call, want := range map[string]string{"k1": "one-answer-9f2c", "k2": "two-answer-41ad", "k3": "three-answer-77e0"} {
		id := children[call]
		evs := e.stored(id)
		requireContiguous(t, evs)
		require.Equal(t, 1, countType(evs, wire.TypeTurnStart), "child %s (%s)", call, id)
		require.Equal(t, []string{"completed"}, turnEnds(t, evs), "child %s", call)
		require.Equal(t, []string{want}, assistantTexts(t, evs), "child %s", call)
		require.Equal(t, 1, countType(evs, "subagent/descriptor"), "child %s", call)
		requireClosedOnce(t, ctx, tc, id, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)
		require.Greater(t, modelAttempts(t, ctx, tc, id), int32(1), "child %s: the kill interrupted its model call, which ran again", call)
	}
	require.Contains(t, e.mustStarter("", "describe", "--id", "kp", "--json"), `"phase": "live"`)
	e.mustStarter("", "dispose", "--id", "kp")
	requireClosedOnce(t, ctx, tc, "kp", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)
}

// The parent-close policy and the cancellation of a parent, with children
// whose model calls stall until they are cancelled: the parent's workflow
// terminated (the temporal CLI), the parent disposed (starter dispose),
// and the parent's turn cancelled (the client's Cancel): each time every
// child's turn ends aborted with cause "parent" and its workflow closes.
func TestSubagentChildrenEndWithTheirParent(t *testing.T) {
	e := newEnv(t)
	stall := map[string]any{"text": "Working on it, slowly", "chunkSize": 3, "stall": map[string]any{"afterChunks": 2}}
	subagentWorker(t, e, map[string]any{
		"responses": []any{
			map[string]any{"toolCalls": []any{
				delegateTo("s1", "Stalled one", "STALL-ONE: take your time"),
				delegateTo("s2", "Stalled two", "STALL-TWO: take your time"),
			}},
			answer("Never reached."),
		},
		"branches": []any{
			branch("STALL-ONE", stall),
			branch("STALL-TWO", stall),
		},
	}, false)
	ctx := e.ctx
	c := e.dialClient(ctx)
	tc := c.Temporal()
	cli, err := devserver.Locate(context.Background(), devserver.LocateOptions{})
	require.NoError(t, err)
	start := func(t *testing.T, id string) map[string]string {
		e.mustStarter("", "create", "--id", id, "--cwd", t.TempDir(), "--provider", "scripted", "--model", "m1")
		_, err := c.Followup(ctx, id, wire.InputRequest{Content: json.RawMessage(`"delegate two tasks"`), MessageID: id + "-msg"})
		require.NoError(t, err)
		return waitChildrenRunning(t, ctx, e, c, id, "s1", "s2")
	}
	// requireChildrenEnded: each child's one turn ended aborted with cause
	// parent, and its workflow closed.
	requireChildrenEnded := func(t *testing.T, children map[string]string) {
		t.Helper()
		for call, id := range children {
			requireClosedOnce(t, ctx, tc, id, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED)
			evs := e.stored(id)
			requireContiguous(t, evs)
			require.Equal(t, []string{"aborted/parent"}, turnEnds(t, evs), "child %s (%s)", call, id)
		}
	}

	// requireCancelledResults: each call's result says its child was
	// cancelled, with what the child streamed before it stopped (its two
	// chunks before the stall, or fewer if the cancel came first).
	requireCancelledResults := func(t *testing.T, parent []session.Event) {
		t.Helper()
		results := toolResults(t, parent)
		require.Len(t, results, 2, "%v", results)
		require.Equal(t, 2, countType(parent, wire.TypeToolResult))
		for _, call := range []string{"s1", "s2"} {
			rest, ok := strings.CutPrefix(results[call], "SUBAGENT_CANCELLED Error: subagent run was cancelled")
			require.True(t, ok, "call %s: %q", call, results[call])
			if rest != "" {
				soFar, ok := strings.CutPrefix(rest, "\nPartial output before the run ended:\n")
				require.True(t, ok && soFar != "" && strings.HasPrefix("Workin", soFar), "call %s: %q", call, results[call])
			}
		}
	}

	t.Run("terminate", func(t *testing.T) {
		children := start(t, "tp")
		out, err := runTemporal(cli, e, "workflow", "terminate", "--workflow-id", wire.WorkflowID("tp"), "--reason", "operator stop")
		require.NoError(t, err, "%s", out)
		requireChildrenEnded(t, children)
		requireClosedOnce(t, ctx, tc, "tp", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED)
	})

	t.Run("dispose", func(t *testing.T) {
		children := start(t, "dp")
		e.mustStarter("", "dispose", "--id", "dp")
		requireChildrenEnded(t, children)
		requireClosedOnce(t, ctx, tc, "dp", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)
		parent := e.stored("dp")
		require.Equal(t, []string{"aborted/disposed"}, turnEnds(t, parent))
		requireCancelledResults(t, parent)
	})

	t.Run("cancel", func(t *testing.T) {
		children := start(t, "cp")
		res, err := c.CancelTurn(ctx, "cp", wire.CauseUser, false)
		require.NoError(t, err)
		require.True(t, res.Cancelled)
		requireChildrenEnded(t, children)
		parent := e.stored("cp")
		require.Equal(t, []string{"aborted/user"}, turnEnds(t, parent))
		// The parent stays live, and its calls are closed.
		require.Contains(t, e.mustStarter("", "describe", "--id", "cp", "--json"), `"phase": "live"`)
		// Each call's result is what its child said before it stopped.
		requireCancelledResults(t, parent)
		e.mustStarter("", "dispose", "--id", "cp")
	})
}

// runTemporal runs the temporal CLI against e's server.
func runTemporal(cli string, e *env, args ...string) (string, error) {
	cmd := exec.CommandContext(e.ctx, cli, append(args, "--address", fmt.Sprintf("127.0.0.1:%d", e.port), "--namespace", e.namespace)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A parent delegating twenty tasks in one step: its Temporal history holds
// twenty child workflow starts and twenty completions, each child's prompt
// only in its start, and none of the children's conversations: neither
// their answers nor their reasoning are in any of its payloads.
func TestSubagentParentHistoryStaysFlat(t *testing.T) {
	const n = 20
	e := newEnv(t)
	var calls, branches []any
	var prompts, secrets []string
	for k := 1; k <= n; k++ {
		prompt := fmt.Sprintf("FLAT-%02d: report your number", k)
		calls = append(calls, delegateTo(fmt.Sprintf("f%02d", k), fmt.Sprintf("Task %d", k), prompt))
		answerText := fmt.Sprintf("child-answer-%02d-c0ffee", k)
		thought := fmt.Sprintf("child-reasoning-%02d-decade", k)
		branches = append(branches, branch(fmt.Sprintf("FLAT-%02d:", k), map[string]any{"reasoning": thought, "text": answerText, "chunkSize": 8}))
		prompts = append(prompts, prompt)
		secrets = append(secrets, answerText, thought)
	}
	subagentWorker(t, e, map[string]any{
		"responses": []any{map[string]any{"toolCalls": calls}, answer("Twenty answers in.")},
		"branches":  branches,
	}, false)
	ctx := e.ctx
	e.mustStarter("", "create", "--id", "fp", "--cwd", t.TempDir(), "--provider", "scripted", "--model", "m1")
	c := e.dialClient(ctx)
	res, err := c.RunTurn(ctx, "fp", wire.InputRequest{Content: json.RawMessage(`"delegate twenty tasks"`)})
	require.NoError(t, err, "%s", e.logs())
	require.Equal(t, "completed", res.Ended.Reason.Kind)
	parent := e.stored("fp")
	require.Equal(t, n, countType(parent, wire.TypeToolResult))
	results := toolResults(t, parent)
	for k := 1; k <= n; k++ {
		require.Equal(t, fmt.Sprintf("ok child-answer-%02d-c0ffee", k), results[fmt.Sprintf("f%02d", k)])
	}

	var events []*historypb.HistoryEvent
	it := c.Temporal().GetWorkflowHistory(ctx, wire.WorkflowID("fp"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		events = append(events, ev)
	}
	types := map[enumspb.EventType]int{}
	promptIn := map[string]enumspb.EventType{}
	for _, ev := range events {
		types[ev.GetEventType()]++
		raw, err := proto.Marshal(ev)
		require.NoError(t, err)
		for _, s := range secrets {
			require.NotContains(t, string(raw), s, "the parent's history event %d (%v) holds a child's conversation", ev.GetEventId(), ev.GetEventType())
		}
		for _, p := range prompts {
			if strings.Contains(string(raw), p) && ev.GetEventType() == enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED {
				promptIn[p] = ev.GetEventType()
			}
		}
	}
	require.Equal(t, n, types[enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED], "child starts")
	require.Equal(t, n, types[enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED], "children started")
	require.Equal(t, n, types[enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED], "children completed")
	// The search sees the payloads: each prompt is found in its child's start.
	require.Len(t, promptIn, n, "the children's prompts in their starts")
	require.Less(t, len(events), 100+20*n, "the parent's history grows by a few events per child")
	t.Logf("the parent's history: %d events for %d children", len(events), n)
	e.mustStarter("", "dispose", "--id", "fp")
}

// modelAttempts returns the attempt of the session's last completed model
// activity, read from its workflow's history.
func modelAttempts(t *testing.T, ctx context.Context, tc temporalclient.Client, id string) int32 {
	t.Helper()
	scheduled := map[int64]string{}
	var attempt int32
	it := tc.GetWorkflowHistory(ctx, wire.WorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == wire.CallModelActivity {
			attempt = a.GetAttempt()
		}
	}
	require.NotZero(t, attempt, "session %s ran no model activity", id)
	return attempt
}
