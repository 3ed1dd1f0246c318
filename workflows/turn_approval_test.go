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
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
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

	// The model call recorded c1, the call started alone (not
	// parallel-safe); its first RunTool is told so, the run with its
	// decision is not, and the later calls store their own tool/call.
	recorded := map[string][]bool{}
	for i := range h.Count(wire.RunToolActivity) {
		var in agent.ToolInput
		h.StartedArg(wire.RunToolActivity, i, &in)
		recorded[in.CallID] = append(recorded[in.CallID], in.Recorded)
	}
	require.Equal(t, map[string][]bool{"c1": {true, false}, "c2": {false, false}, "c3": {false}}, recorded)
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

// An "always" answer adds an allow rule, stored in the log: a later call
// it matches runs without asking, one it does not match asks; a resume
// without options keeps the policy and the rules the log holds, and
// SetPermissions changes them between turns.
func TestApprovalRulesSurviveResume(t *testing.T) {
	cwd := t.TempDir()
	st := sessiontest.NewStore(t, jsonl.CompressionNone)
	h := sessiontest.NewHarnessOn(t, st).WithID("ar")
	useCommandTools(h,
		scripted.Response{ToolCalls: []scripted.Call{{ID: "c1", Name: "write_file", Arguments: `{"path":"src/a.txt","content":"a"}`}}},
		scripted.Response{ToolCalls: []scripted.Call{{ID: "c2", Name: "write_file", Arguments: `{"path":"src/deep/b.txt","content":"b"}`}}},
		scripted.Text("done"),
	)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("work"))
	always := h.UpdateAt(10*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c1", Outcome: wire.OutcomeAllowedOnce, Remember: &wire.ApprovalRule{Tool: "write_file", PathPrefix: "src"}})
	h.WaitFor(11*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(20*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ar", AgentOptions: askOptions(0), Meta: &wire.SessionMeta{Cwd: cwd}})
	require.NoError(t, h.Env.GetWorkflowError())
	for _, r := range []*sessiontest.Result{ready, fu, always, disp} {
		r.OK(t)
	}
	evs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, h.Store, "ar"))
	var rules []session.Event
	asked := 0
	for _, e := range evs {
		switch e.Type {
		case wire.TypeApprovalRules:
			rules = append(rules, e)
		case wire.TypeApprovalAsked:
			asked++
		}
	}
	require.Equal(t, 1, asked, "c2 matched the rule c1's answer added")
	require.Len(t, rules, 1)
	require.True(t, rules[0].Ignorable)
	require.JSONEq(t, `{"rules":[{"tool":"write_file","pathPrefix":"src"}]}`, string(rules[0].Data))
	for _, f := range []string{"src/a.txt", "src/deep/b.txt"} {
		_, err := os.Stat(filepath.Join(cwd, f))
		require.NoError(t, err)
	}

	// Resumed without options: the log's policy and rules stand.
	h2 := sessiontest.NewHarnessOn(t, st).WithID("ar")
	// The script answers by the conversation's assistant messages: the
	// first three are turn 1's.
	useCommandTools(h2, scripted.Text("-"), scripted.Text("-"), scripted.Text("-"),
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "d1", Name: "write_file", Arguments: `{"path":"src/c.txt","content":"c"}`},
			{ID: "d2", Name: "write_file", Arguments: `{"path":"top.txt","content":"t"}`},
		}},
		scripted.Text("done"),
	)
	ready2 := h2.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var resumed wire.LoopState
	h2.At(2*time.Second, func() { resumed = h2.LoopState() })
	fu2 := h2.UpdateAt(3*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("more"))
	var waiting wire.LoopState
	h2.At(10*time.Second, func() { waiting = h2.LoopState() })
	no := h2.UpdateAt(11*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "d2", Outcome: wire.OutcomeRejected})
	h2.WaitFor(12*time.Second, "turn 2 ended", h2.TurnsEnded(1))
	running := h2.UpdateAt(12*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{Preset: wire.PresetDangerFullAccess})
	empty := []wire.ApprovalRule{}
	set := h2.UpdateAt(13*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{Preset: wire.PresetDangerFullAccess, Rules: &empty})
	bad := h2.UpdateAt(14*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{ApprovalPolicy: "sometimes"})
	disp2 := h2.UpdateAt(20*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "ar"})
	require.NoError(t, h2.Env.GetWorkflowError())
	require.Equal(t, wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "ask", Preset: "workspace-write", Rules: []wire.ApprovalRule{{Tool: "write_file", PathPrefix: "src"}}}, *resumed.Permissions)
	require.Len(t, waiting.Approvals, 1)
	require.Equal(t, "d2", waiting.Approvals[0].CallID)
	var p wire.Permissions
	set.Decode(t, &p)
	require.Equal(t, wire.Permissions{SandboxMode: "danger-full-access", ApprovalPolicy: "never", Preset: "danger-full-access"}, p)
	require.Equal(t, "InvalidArgument", sessiontest.AppErr(t, bad.Rejection(t)).Type())
	for _, r := range []*sessiontest.Result{ready2, fu2, no, running, disp2} {
		r.OK(t)
	}

	evs = sessiontest.WithoutRecords(t, sessiontest.Stored(t, st, "ar"))
	tail := evs[len(evs)-5:]
	require.Equal(t, []string{"permission/preset", "sandbox/mode", "approval/policy", "agent/inbox/spliced", "approval/rules"}, sessiontest.Types(tail),
		"the policy's change is noticed before the rules")
	f := session.FoldPermissions(evs)
	require.Equal(t, "danger-full-access", f.SandboxMode)
	require.Equal(t, "never", f.ApprovalPolicy)
	require.Empty(t, f.Rules)
}

// An escalation approved runs the call in the mode it asked for: a
// command writing outside the cwd, denied in workspace-write, succeeds
// once allowed; the question carries the harness's reason.
func TestApprovalEscalationAllowed(t *testing.T) {
	cwd, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "escalated.txt")
	h := sessiontest.NewHarness(t).WithID("ae")
	useCommandTools(h,
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "c1", Name: "run_command", Arguments: `{"command":"printf no > ` + target + `"}`},
		}},
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "c2", Name: "run_command", Arguments: `{"command":"printf yes > ` + target + `","sandbox_permissions":"danger-full-access","justification":"the user asked for it"}`},
		}},
		scripted.Text("done"),
	)
	opts := sessiontest.Route()
	opts.ApprovalPolicy = wire.ApprovalNever
	opts.SandboxMode = wire.SandboxWorkspaceWrite
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	set := h.UpdateAt(2*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{ApprovalPolicy: wire.ApprovalAsk})
	fu := h.UpdateAt(3*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("work"))
	first := h.UpdateAt(10*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c1", Outcome: wire.OutcomeAllowedOnce})
	var waiting wire.LoopState
	h.At(11*time.Second, func() { waiting = h.LoopState() })
	yes := h.UpdateAt(11*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c2", Outcome: wire.OutcomeAllowedOnce})
	h.WaitFor(12*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(20*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ae", AgentOptions: opts, Meta: &wire.SessionMeta{Cwd: cwd}})
	require.NoError(t, h.Env.GetWorkflowError())
	for _, r := range []*sessiontest.Result{ready, set, fu, first, yes, disp} {
		r.OK(t)
	}
	require.Len(t, waiting.Approvals, 1)
	require.Equal(t, "escalate sandbox to danger-full-access: the user asked for it", waiting.Approvals[0].Reason)
	require.Equal(t, "danger-full-access", waiting.Approvals[0].Escalation)
	evs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, h.Store, "ae"))
	var results []string
	for _, e := range evs {
		if e.Type == wire.TypeToolResult {
			text, _ := resultText(t, e)
			results = append(results, text)
		}
	}
	require.Len(t, results, 2)
	require.Contains(t, results[0], "[sandbox: file access denied under workspace-write mode]", "c1 ran confined")
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "yes", string(b))
}

// A turn whose calls wait for approvals parks when its run is due to
// continue as new: the next run has the same approvals pending (same ids,
// same times), answers each once, runs the allowed call once and ends the
// turn once.
func TestApprovalsWaitAcrossContinueAsNew(t *testing.T) {
	cwd := t.TempDir()
	h := sessiontest.NewHarness(t).WithID("aw")
	calls := scripted.Response{ToolCalls: []scripted.Call{
		{ID: "c1", Name: "run_command", Arguments: `{"command":"echo run >> runs.txt"}`},
		{ID: "c2", Name: "write_file", Arguments: `{"path":"b.txt","content":"b"}`},
	}}
	useCommandTools(h, calls, scripted.Text("done"))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("work"))
	var before wire.LoopState
	h.At(10*time.Second, func() { before = h.LoopState() })
	h.At(11*time.Second, func() { h.Env.SetContinueAsNewSuggested(true) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "aw", AgentOptions: askOptions(float64(24 * time.Hour.Milliseconds())), Meta: &wire.SessionMeta{Cwd: cwd}})
	err := h.Env.GetWorkflowError()
	ready.OK(t)
	fu.OK(t)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	require.NotNil(t, state.Parked)
	require.Len(t, before.Approvals, 1)
	require.Equal(t, before.Approvals, state.Parked.Waiting)
	require.Equal(t, int64(1), state.Parked.Summary.Turn)

	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("aw")
	useCommandTools(h2, calls, scripted.Text("done"))
	var after wire.LoopState
	h2.WaitFor(time.Second, "the approval asked again", func() bool {
		after = h2.LoopState()
		return len(after.Approvals) > 0
	})
	yes := h2.UpdateAt(2*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c1", Outcome: wire.OutcomeAllowedOnce})
	no := h2.UpdateAt(3*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c2", Outcome: wire.OutcomeRejected})
	h2.WaitFor(3*time.Second, "turn 1 ended", h2.TurnsEnded(1))
	again := h2.UpdateAt(4*time.Second, "", wire.UpdateDecide, wire.DecideRequest{CallID: "c1", Outcome: wire.OutcomeAllowedOnce})
	disp := h2.UpdateAt(5*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.LiveSession, state)
	require.NoError(t, h2.Env.GetWorkflowError())
	yes.OK(t)
	no.OK(t)
	disp.OK(t)
	require.Equal(t, "ApprovalSettled", sessiontest.AppErr(t, again.Rejection(t)).Type())
	require.Equal(t, before.Approvals, after.Approvals, "the same approval waits, with its times")
	require.Equal(t, "running", after.State)
	require.Equal(t, int64(1), after.Turn)

	b, err := os.ReadFile(filepath.Join(cwd, "runs.txt"))
	require.NoError(t, err)
	require.Equal(t, "run\n", string(b), "the approved command ran once")
	evs := sessiontest.Stored(t, h.Store, "aw")
	sessiontest.RequireBalanced(t, evs)
	evs = sessiontest.WithoutRecords(t, evs)
	require.Equal(t, 1, countOf(evs, wire.TypeTurnStart))
	require.Equal(t, 2, countOf(evs, wire.TypeApprovalAsked))
	require.Equal(t, 2, countOf(evs, wire.TypeApprovalDecided))
	require.Equal(t, 2, countOf(evs, wire.TypeToolCall))
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}

func countOf(evs []session.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}
