package workflows_test

// Approvals: a call that must be approved waits in the workflow for a
// Decide; its timeout rejects it; a cancel settles it cancelled; the
// never policy rejects an escalation at once.

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// dataOf decodes e's data into a map.
func dataOf(t *testing.T, e session.Event) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Data, &m))
	return m
}

// resultText is the text of a tool/result.
func resultText(t *testing.T, e session.Event) (string, bool) {
	t.Helper()
	r, err := e.ToolResult()
	require.NoError(t, err)
	c := r.Message.Content[0]
	return c.Content[0].Text, c.IsError
}

// useCommandTools registers the agent activities over h's store with a
// scripted provider playing responses and the built-in tools, run_command
// included.
func useCommandTools(h *sessiontest.Harness, responses ...scripted.Response) {
	h.T.Helper()
	reg, err := tool.NewRegistry(tool.Builtins(tool.BuiltinOptions{RunCommand: true})...)
	require.NoError(h.T, err)
	h.Env.RegisterActivity(&agent.Activities{Runtime: h.Acts.Runtime, Providers: provider.Set{"scripted": sessiontest.ScriptedProvider(h.T, responses...)}, Tools: reg})
}

func askOptions(timeoutMs float64) *wire.AgentOptions {
	o := sessiontest.Route()
	o.ApprovalPolicy = wire.ApprovalAsk
	if timeoutMs > 0 {
		o.ApprovalTimeoutMs = &timeoutMs
	}
	return o
}

// Under the ask policy run_command and write_file wait for a Decide: the
// allowed call runs, the rejected one gets the harness's refusal, a
// second Decide of a settled approval is refused typed, and LoopState
// lists what waits.
func TestApprovalAllowAndReject(t *testing.T) {
	cwd := t.TempDir()
	h := sessiontest.NewHarness(t).WithID("ap")
	useCommandTools(h,
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "c1", Name: "run_command", Arguments: `{"command":"printf hi > a.txt"}`},
			{ID: "c2", Name: "write_file", Arguments: `{"path":"b.txt","content":"beta"}`},
			{ID: "c3", Name: "read_file", Arguments: `{"path":"a.txt"}`},
		}},
		scripted.Text("done"),
	)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("work"))
	var first, second wire.LoopState
	h.At(10*time.Second, func() { first = h.LoopState() })
	allow := h.UpdateAt(11*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c1", Outcome: wire.OutcomeAllowedOnce})
	h.At(20*time.Second, func() { second = h.LoopState() })
	again := h.UpdateAt(21*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c1", Outcome: wire.OutcomeRejected})
	unknown := h.UpdateAt(21*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "nope", Outcome: wire.OutcomeRejected})
	var reject *sessiontest.Result
	h.At(22*time.Second, func() {})
	reject = h.UpdateAt(22*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c2", Outcome: wire.OutcomeRejected})
	h.WaitFor(23*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(30*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ap", AgentOptions: askOptions(0), Meta: &wire.SessionMeta{Cwd: cwd}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)

	require.Len(t, first.Approvals, 1)
	p := first.Approvals[0]
	require.Equal(t, "c1", p.CallID)
	require.Equal(t, "run_command", p.Tool)
	require.Equal(t, "run_command requires approval in this session", p.Reason)
	require.JSONEq(t, `{"command":"printf hi > a.txt"}`, p.Arguments)
	require.Equal(t, "awaiting-approval", first.Calls[0].State)
	require.Equal(t, "pending", first.Calls[1].State)
	require.Equal(t, "ask", first.Permissions.ApprovalPolicy)
	require.Equal(t, "workspace-write", first.Permissions.Preset)

	var dr wire.DecideResult
	allow.Decode(t, &dr)
	require.Equal(t, wire.DecideResult{ID: p.ID, CallID: "c1", Outcome: "allowed-once"}, dr)
	require.Len(t, second.Approvals, 1)
	require.Equal(t, "c2", second.Approvals[0].CallID)
	require.Equal(t, "done", second.Calls[0].State)

	var settled *temporal.ApplicationError
	require.True(t, errors.As(again.Rejection(t), &settled))
	require.Equal(t, "ApprovalSettled", settled.Type())
	var none *temporal.ApplicationError
	require.True(t, errors.As(unknown.Rejection(t), &none))
	require.Equal(t, "NoSuchApproval", none.Type())
	reject.OK(t)

	b, err := os.ReadFile(filepath.Join(cwd, "a.txt"))
	require.NoError(t, err, "the allowed command ran")
	require.Equal(t, "hi", string(b))
	_, err = os.Stat(filepath.Join(cwd, "b.txt"))
	require.True(t, os.IsNotExist(err), "the rejected write did not run")

	evs := sessiontest.Stored(t, h.Store, "ap")
	sessiontest.RequireBalanced(t, evs)
	evs = sessiontest.WithoutRecords(t, evs)
	require.Equal(t, []string{
		"permission/preset", "sandbox/mode", "approval/policy",
		"turn/start", "step/start", "user/message", "assistant/message",
		"tool/call", "approval/asked", "approval/decided", "tool/result",
		"tool/call", "approval/asked", "approval/decided", "tool/result",
		"tool/call", "tool/result",
		"step/end", "step/start", "assistant/message", "step/end", "turn/end",
	}, sessiontest.Types(evs))
	require.Equal(t, map[string]any{"preset": "workspace-write"}, dataOf(t, evs[0]))
	require.Equal(t, map[string]any{"mode": "workspace-write"}, dataOf(t, evs[1]))
	require.Equal(t, map[string]any{"policy": "ask"}, dataOf(t, evs[2]))
	require.Equal(t, map[string]any{"id": p.ID, "toolName": "run_command", "callId": "c1", "reason": "run_command requires approval in this session"}, dataOf(t, evs[8]))
	require.Equal(t, map[string]any{"id": p.ID, "outcome": "allowed-once"}, dataOf(t, evs[9]))
	require.Equal(t, "rejected", dataOf(t, evs[13])["outcome"])
	text, isErr := resultText(t, evs[14])
	require.True(t, isErr)
	require.Equal(t, `Error: the user rejected tool "write_file"`, text)
	text, isErr = resultText(t, evs[16])
	require.False(t, isErr, "read_file does not ask")
	require.Contains(t, text, "hi")
}

// An approval nobody decides is rejected when the session's timeout runs
// out, and the turn goes on.
func TestApprovalTimeoutRejects(t *testing.T) {
	cwd := t.TempDir()
	h := sessiontest.NewHarness(t).WithID("at")
	useCommandTools(h,
		scripted.Response{ToolCalls: []scripted.Call{{ID: "c1", Name: "write_file", Arguments: `{"path":"b.txt","content":"beta"}`}}},
		scripted.Text("done"),
	)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("work"))
	var waiting wire.LoopState
	h.At(30*time.Minute, func() { waiting = h.LoopState() })
	h.WaitFor(30*time.Minute, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(2*time.Hour, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "at", AgentOptions: askOptions(float64(time.Hour.Milliseconds())), Meta: &wire.SessionMeta{Cwd: cwd}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	evs := sessiontest.Stored(t, h.Store, "at")
	require.Len(t, waiting.Approvals, 1, "still waiting after half an hour")
	require.Equal(t, waiting.Approvals[0].AskedAtMs+time.Hour.Milliseconds(), waiting.Approvals[0].DeadlineMs)
	evs = sessiontest.WithoutRecords(t, evs)
	var decided, result session.Event
	for _, e := range evs {
		switch e.Type {
		case wire.TypeApprovalDecided:
			decided = e
		case wire.TypeToolResult:
			result = e
		}
	}
	require.Equal(t, "rejected", dataOf(t, decided)["outcome"])
	text, _ := resultText(t, result)
	require.Equal(t, `Error: no decision on the approval for tool "write_file" within 1h0m0s: rejected`, text)
	_, err := os.Stat(filepath.Join(cwd, "b.txt"))
	require.True(t, os.IsNotExist(err))
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}

// A turn cancelled while a call waits settles the approval cancelled,
// with the harness's words, and a late Decide is refused as settled.
func TestApprovalCancelledWithItsTurn(t *testing.T) {
	cwd := t.TempDir()
	h := sessiontest.NewHarness(t).WithID("ac")
	useCommandTools(h,
		scripted.Response{ToolCalls: []scripted.Call{{ID: "c1", Name: "run_command", Arguments: `{"command":"touch x"}`}}},
	)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("work"))
	cancel := h.UpdateAt(time.Hour, "", wire.UpdateCancel, wire.CancelRequest{Cause: wire.CauseUser})
	late := h.UpdateAt(time.Hour+time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c1", Outcome: wire.OutcomeAllowedOnce})
	disp := h.UpdateAt(time.Hour+2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ac", AgentOptions: askOptions(0), Meta: &wire.SessionMeta{Cwd: cwd}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	cancel.OK(t)
	disp.OK(t)
	var settled *temporal.ApplicationError
	require.True(t, errors.As(late.Rejection(t), &settled))
	require.Equal(t, "ApprovalSettled", settled.Type())
	_, err := os.Stat(filepath.Join(cwd, "x"))
	require.True(t, os.IsNotExist(err))
	evs := sessiontest.Stored(t, h.Store, "ac")
	sessiontest.RequireBalanced(t, evs)
	evs = sessiontest.WithoutRecords(t, evs)
	types := sessiontest.Types(evs)
	i := slices.Index(types, "tool/call")
	require.Equal(t, []string{"tool/call", "approval/asked", "approval/decided", "tool/result"}, types[i:i+4])
	require.Equal(t, "cancelled", dataOf(t, evs[i+2])["outcome"])
	text, _ := resultText(t, evs[i+3])
	require.Equal(t, `Error: approval for tool "run_command" was cancelled`, text)
	require.Equal(t, []string{"aborted"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}

// Under the never policy nothing waits: run_command runs confined, and an
// escalation is asked and rejected at once, in the harness's words.
func TestApprovalNeverRejectsEscalation(t *testing.T) {
	cwd := t.TempDir()
	h := sessiontest.NewHarness(t).WithID("an")
	useCommandTools(h,
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "c1", Name: "run_command", Arguments: `{"command":"printf ok > a.txt"}`},
			{ID: "c2", Name: "run_command", Arguments: `{"command":"printf x > /tmp/x","sandbox_permissions":"danger-full-access","justification":"the user asked"}`},
			{ID: "c3", Name: "run_command", Arguments: `{"command":"true","sandbox_permissions":"read-only","justification":"narrower"}`},
		}},
		scripted.Text("done"),
	)
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "an", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: cwd}}, sessiontest.Prompt("work"))
	evs = sessiontest.WithoutRecords(t, evs)
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message",
		"tool/call", "tool/result",
		"tool/call", "approval/asked", "approval/decided", "tool/result",
		"tool/call", "tool/result",
		"step/end", "step/start", "assistant/message", "step/end", "turn/end",
	}, sessiontest.Types(evs), "no permission facts pinned for a session that sets none")
	require.Equal(t, "escalate sandbox to danger-full-access: the user asked", dataOf(t, evs[7])["reason"])
	require.Equal(t, "rejected", dataOf(t, evs[8])["outcome"])
	text, _ := resultText(t, evs[9])
	require.Equal(t, `Error: the user rejected escalating this command to "danger-full-access"`, text)
	text, _ = resultText(t, evs[11])
	require.Equal(t, `Error: sandbox escalation to "read-only" is not strictly wider than this call's current "workspace-write" mode`, text)
	b, err := os.ReadFile(filepath.Join(cwd, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "ok", string(b))
}
