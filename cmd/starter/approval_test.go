package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// approvalTemporal is a session whose LoopState the test scripts (state
// is asked with the number of polls so far and the decisions received),
// and which answers Decide (decide), SetPermissions (applying the request
// to perms), Followup (message m1) and WaitTurn (a failure: the watch
// then relies on its polls).
type approvalTemporal struct {
	temporalclient.Client
	mu      sync.Mutex
	polls   int
	state   func(polls int, decided []wire.DecideRequest) wire.LoopState
	decide  func(wire.DecideRequest) (wire.DecideResult, error)
	decided []wire.DecideRequest
	perms   wire.Permissions
	sets    []wire.SetPermissionsRequest
	setErr  error
}

func (f *approvalTemporal) Close() {}

func (f *approvalTemporal) QueryWorkflow(_ context.Context, wid, _, q string, _ ...any) (converter.EncodedValue, error) {
	if wid != "session/s1" || q != wire.QueryLoopState {
		return nil, errors.New("unexpected query " + q + " of " + wid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.state(f.polls, f.decided)
	f.polls++
	return jsonValue{st}, nil
}

func (f *approvalTemporal) DescribeWorkflow(context.Context, string, string) (*temporalclient.WorkflowExecutionDescription, error) {
	return &temporalclient.WorkflowExecutionDescription{RawResponse: &workflowservice.DescribeWorkflowExecutionResponse{}}, nil
}

// failedUpdate is an update handle whose outcome is err.
type failedUpdate struct {
	temporalclient.WorkflowUpdateHandle
	err error
}

func (u failedUpdate) Get(context.Context, any) error { return u.err }

func (f *approvalTemporal) UpdateWorkflow(_ context.Context, o temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
	if o.WorkflowID != "session/s1" {
		return nil, errors.New("unexpected workflow " + o.WorkflowID)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch o.UpdateName {
	case wire.UpdateDecide:
		req := o.Args[0].(wire.DecideRequest)
		f.decided = append(f.decided, req)
		res, err := f.decide(req)
		if err != nil {
			return failedUpdate{err: wireError(err)}, nil
		}
		return doneUpdate{v: res}, nil
	case wire.UpdateSetPermissions:
		req := o.Args[0].(wire.SetPermissionsRequest)
		f.sets = append(f.sets, req)
		if f.setErr != nil {
			return failedUpdate{err: wireError(f.setErr)}, nil
		}
		if req.ApprovalPolicy != "" {
			f.perms.ApprovalPolicy = req.ApprovalPolicy
		}
		if m, a, ok := wire.PresetBundle(req.Preset); ok {
			f.perms.SandboxMode, f.perms.ApprovalPolicy, f.perms.Preset = m, a, req.Preset
		}
		if req.NetworkAccess != nil {
			f.perms.NetworkAccess = *req.NetworkAccess
		}
		if req.Rules != nil {
			f.perms.Rules = *req.Rules
		}
		if req.ApprovalTimeoutMs != nil {
			f.perms.ApprovalTimeoutMs = *req.ApprovalTimeoutMs
		}
		return doneUpdate{v: f.perms}, nil
	case wire.UpdateFollowup:
		return doneUpdate{v: wire.InputResult{MessageID: "m1", Target: "next-turn", SplicedSeq: -1}}, nil
	case wire.UpdateWaitTurn:
		return nil, errors.New("no WaitTurn here")
	}
	return nil, errors.New("unexpected update " + o.UpdateName)
}

// wireError is err as a workflow's failure reaches the client.
func wireError(err error) error {
	fc := temporal.GetDefaultFailureConverter()
	return fc.FailureToError(fc.ErrorToFailure(err))
}

func (f *approvalTemporal) decisions() []wire.DecideRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.DecideRequest(nil), f.decided...)
}

var (
	goTest = wire.PendingApproval{ID: "ap-1", CallID: "c1", Tool: "run_command", Turn: 1, Step: 1,
		Reason: "run_command requires approval in this session", Arguments: `{"command":"go test ./..."}`, AskedAtMs: 1_000}
	writeNotes = wire.PendingApproval{ID: "ap-2", CallID: "c2", Tool: "write_file", Turn: 1, Step: 1,
		Reason: "write_file requires approval in this session", Arguments: `{"path":"docs/notes.md","content":"one\ntwo\n"}`, AskedAtMs: 2_000, DeadlineMs: 3_602_000}
)

// waiting is a LoopState whose turn 1 waits for the approvals.
func waiting(approvals ...wire.PendingApproval) wire.LoopState {
	st := wire.LoopState{State: "running", Turn: 1, Step: 1, Recent: []wire.TurnInfo{{Turn: 1, Claimed: []string{"m1"}, Steps: 1}},
		Approvals: approvals, Permissions: &wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "ask", Preset: "workspace-write"}}
	for _, a := range approvals {
		st.Calls = append(st.Calls, wire.CallState{ID: a.CallID, Name: a.Tool, State: wire.CallAwaitingApproval})
	}
	return st
}

func fixed(st wire.LoopState) func(int, []wire.DecideRequest) wire.LoopState {
	return func(int, []wire.DecideRequest) wire.LoopState { return st }
}

// echoDecide answers a Decide with the pending approval's ids.
func echoDecide(req wire.DecideRequest) (wire.DecideResult, error) {
	return wire.DecideResult{ID: req.ID, CallID: req.CallID, Outcome: req.Outcome}, nil
}

// approve and reject pick the only pending call, or the one --call names;
// --always sends the rule derived from it; several pending and no --call
// are listed and refused, none pending is refused, before any Decide.
func TestApproveAndRejectCommands(t *testing.T) {
	isolateEnv(t)
	f := &approvalTemporal{state: fixed(waiting(goTest)), decide: echoDecide}
	stubDial(t, f)

	r := mustOK(t, runCLI(t, "", "approve", "--id", "s1"))
	require.Equal(t, "allowed call c1 (run_command) once\n", r.stdout)
	r = mustOK(t, runCLI(t, "", "approve", "--id", "s1", "--always"))
	require.Equal(t, "allowed call c1 (run_command); from now on allowed without asking: run_command: commands starting \"go test\"\n", r.stdout)
	r = mustOK(t, runCLI(t, "", "reject", "--id", "s1", "--call", "c1", "--json"))
	require.JSONEq(t, `{"id":"ap-1","callId":"c1","outcome":"rejected"}`, r.stdout)
	require.Equal(t, []wire.DecideRequest{
		{ID: "ap-1", CallID: "c1", Outcome: "allowed-once"},
		{ID: "ap-1", CallID: "c1", Outcome: "allowed-once", Remember: &wire.ApprovalRule{Tool: "run_command", CommandPrefix: "go test"}},
		{ID: "ap-1", CallID: "c1", Outcome: "rejected"},
	}, f.decisions())

	// Two pending: --call picks one; without it they are listed.
	f = &approvalTemporal{state: fixed(waiting(goTest, writeNotes)), decide: echoDecide}
	stubDial(t, f)
	r = mustOK(t, runCLI(t, "", "approve", "--id", "s1", "--call", "c2", "--always"))
	require.Equal(t, "allowed call c2 (write_file); from now on allowed without asking: write_file: paths under docs\n", r.stdout)
	r = runCLI(t, "", "reject", "--id", "s1")
	require.Equal(t, 1, r.code)
	require.Equal(t, "2 tool calls of session \"s1\" wait for approval:\n"+
		"  --call c1  run_command {\"command\":\"go test ./...\"}\n"+
		"  --call c2  write_file {\"path\":\"docs/notes.md\",\"content\":\"one\\ntwo\\n\"}\n", r.stdout)
	require.Equal(t, "starter: 2 tool calls of session \"s1\" wait for approval: name one with --call\n", r.stderr)
	require.Len(t, f.decisions(), 1, "a refused command decided")

	// None pending.
	f = &approvalTemporal{state: fixed(wire.LoopState{State: "idle"}), decide: echoDecide}
	stubDial(t, f)
	mustFail(t, runCLI(t, "", "approve", "--id", "s1"), 1, `session "s1" has no tool call waiting for approval`)
	mustFail(t, runCLI(t, "", "approve", "--id", "s1", "--call", "c1", "--always"), 1,
		`call c1 of session "s1" waits for no approval: --always derives its rule from a pending call (starter approvals lists them)`)
	require.Empty(t, f.decisions())

	// A call no longer pending is sent by its id: the session says it is
	// settled, and which outcome stands.
	f.decide = func(req wire.DecideRequest) (wire.DecideResult, error) {
		return wire.DecideResult{}, temporal.NewNonRetryableApplicationError(`Decide: the approval of call "c1" is settled: allowed-once`, "ApprovalSettled", nil, "allowed-once")
	}
	mustFail(t, runCLI(t, "", "approve", "--id", "s1", "--call", "c1"), 1, `starter: Decide: the approval of call "c1" is settled: allowed-once`)
	require.Equal(t, []wire.DecideRequest{{CallID: "c1", Outcome: "allowed-once"}}, f.decisions())

	// A command no rule can be derived from: --always is refused, nothing
	// is decided.
	f = &approvalTemporal{state: fixed(waiting(wire.PendingApproval{ID: "ap-3", CallID: "c3", Tool: "run_command", Arguments: `{"command":"(cd x; make)"}`})), decide: echoDecide}
	stubDial(t, f)
	mustFail(t, runCLI(t, "", "approve", "--id", "s1", "--always"), 1,
		`--always: no allow rule can be derived from the call: the command "(cd x; make)" does not start with a plain word; approve without it, or add a rule with starter permissions`)
	require.Empty(t, f.decisions())
}

// approvals lists the pending calls, or says none waits.
func TestApprovalsCommand(t *testing.T) {
	isolateEnv(t)
	f := &approvalTemporal{state: fixed(waiting(goTest, writeNotes))}
	stubDial(t, f)
	r := mustOK(t, runCLI(t, "", "approvals", "--id", "s1"))
	for _, want := range []string{
		"call c1 (run_command): run_command requires approval in this session\n  arguments: {\"command\":\"go test ./...\"}\n  asked ",
		"call c2 (write_file): write_file requires approval in this session\n  arguments: {\"path\":\"docs/notes.md\",\"content\":\"one\\ntwo\\n\"}\n  asked ",
		"decide with: starter approve --id s1 --call CALLID [--always], or starter reject --id s1 --call CALLID\n",
	} {
		require.Contains(t, r.stdout, want)
	}
	r = mustOK(t, runCLI(t, "", "approvals", "--id", "s1", "--json"))
	require.JSONEq(t, `[
		{"id":"ap-1","callId":"c1","tool":"run_command","turn":1,"step":1,"reason":"run_command requires approval in this session","arguments":"{\"command\":\"go test ./...\"}","askedAtMs":1000},
		{"id":"ap-2","callId":"c2","tool":"write_file","turn":1,"step":1,"reason":"write_file requires approval in this session","arguments":"{\"path\":\"docs/notes.md\",\"content\":\"one\\ntwo\\n\"}","askedAtMs":2000,"deadlineMs":3602000}
	]`, r.stdout)

	f = &approvalTemporal{state: fixed(wire.LoopState{State: "idle", Permissions: &wire.Permissions{ApprovalPolicy: "never"}})}
	stubDial(t, f)
	r = mustOK(t, runCLI(t, "", "approvals", "--id", "s1"))
	require.Equal(t, "no tool call of session \"s1\" waits for approval (its approval policy is never: no call waits)\n", r.stdout)
	r = mustOK(t, runCLI(t, "", "approvals", "--id", "s1", "--json"))
	require.Equal(t, "[]\n", r.stdout)
}

// The pending approvals as approvals prints them, at a given time; what a
// model wrote is escaped.
func TestRenderApprovals(t *testing.T) {
	var b bytes.Buffer
	esc := wire.PendingApproval{ID: "ap-3", CallID: "c3", Tool: "run_command", Reason: "escalate sandbox to danger-full-access: needs \x1b[31mroot",
		Arguments: `{"command":"sudo make instal`, Truncated: true, Escalation: "danger-full-access", AskedAtMs: 10_000}
	require.NoError(t, renderApprovals(&b, "s1", waiting(writeNotes, esc), time.UnixMilli(62_400)))
	require.Equal(t, `call c2 (write_file): write_file requires approval in this session
  arguments: {"path":"docs/notes.md","content":"one\ntwo\n"}
  asked 1m0s ago; rejected in 59m0s unless decided
call c3 (run_command): escalate sandbox to danger-full-access: needs \x1b[31mroot
  arguments: {"command":"sudo make instal (cut)
  escalation: to run under danger-full-access
  asked 52s ago
decide with: starter approve --id s1 --call CALLID [--always], or starter reject --id s1 --call CALLID
`, b.String())
}

// permissions prints the permissions in effect; with changes it sends
// them (the --allow-* rules added to those in effect) and prints what
// the session answers.
func TestPermissionsCommand(t *testing.T) {
	isolateEnv(t)
	current := wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "ask", Preset: "workspace-write",
		Rules: []wire.ApprovalRule{{Tool: "run_command", CommandPrefix: "npm run"}, {Tool: "run_command", CommandPrefix: "go test"}}}
	f := &approvalTemporal{state: fixed(wire.LoopState{State: "idle", Permissions: &current}), perms: current}
	stubDial(t, f)

	r := mustOK(t, runCLI(t, "", "permissions", "--id", "s1"))
	require.Equal(t, `sandbox mode      workspace-write
network           off
approval policy   ask
preset            workspace-write
approval timeout  none (an approval waits until decided)
allow rules       run_command: commands starting "npm run"
                  run_command: commands starting "go test"
`, r.stdout)
	require.Empty(t, f.sets, "showing changed something")

	r = mustOK(t, runCLI(t, "", "permissions", "--id", "s1", "--allow-command", "go test", "--allow-command", "make", "--allow-path", "src/",
		"--allow-tool", "deploy", "--network", "on", "--approval-timeout", "90m"))
	require.Equal(t, `sandbox mode      workspace-write
network           on
approval policy   ask
preset            workspace-write
approval timeout  1h30m0s
allow rules       run_command: commands starting "npm run"
                  run_command: commands starting "go test"
                  run_command: commands starting "make"
                  write_file: paths under src
                  deploy: every call
`, r.stdout)
	on, ms := true, int64(5_400_000)
	require.Equal(t, wire.SetPermissionsRequest{NetworkAccess: &on, ApprovalTimeoutMs: &ms, Rules: &[]wire.ApprovalRule{
		{Tool: "run_command", CommandPrefix: "npm run"}, {Tool: "run_command", CommandPrefix: "go test"}, {Tool: "run_command", CommandPrefix: "make"},
		{Tool: "write_file", PathPrefix: "src"}, {Tool: "deploy"}}}, f.sets[0])

	r = mustOK(t, runCLI(t, "", "permissions", "--id", "s1", "--clear-rules", "--approval-policy", "never", "--approval-timeout", "0", "--json"))
	require.JSONEq(t, `{"sandboxMode":"workspace-write","networkAccess":true,"approvalPolicy":"never","preset":"workspace-write"}`, r.stdout)
	zero := int64(0)
	require.Equal(t, wire.SetPermissionsRequest{ApprovalPolicy: "never", ApprovalTimeoutMs: &zero, Rules: &[]wire.ApprovalRule{}}, f.sets[1])

	mustOK(t, runCLI(t, "", "permissions", "--id", "s1", "--preset", "danger-full-access", "--sandbox-mode", "danger-full-access", "--network", "off"))
	off := false
	require.Equal(t, wire.SetPermissionsRequest{Preset: "danger-full-access", SandboxMode: "danger-full-access", NetworkAccess: &off}, f.sets[2])

	// The session's refusal while a turn runs.
	f.setErr = temporal.NewNonRetryableApplicationError(`agent "s1" is running turn 2; set permissions between turns`, "TurnRunning", nil)
	mustFail(t, runCLI(t, "", "permissions", "--id", "s1", "--approval-policy", "ask"), 1, `starter: agent "s1" is running turn 2; set permissions between turns`)

	// A worker that reports no permissions.
	f = &approvalTemporal{state: fixed(wire.LoopState{State: "idle"})}
	stubDial(t, f)
	mustFail(t, runCLI(t, "", "permissions", "--id", "s1"), 1, `session "s1" reports no permissions: its worker predates approvals`)
}

// The approval flags are checked before anything reaches Temporal.
func TestApprovalInputErrorsWithoutServer(t *testing.T) {
	isolateEnv(t)
	dialed := stubDial(t, nil)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"approve"}, "--id is required"},
		{[]string{"reject", "--call", "c1"}, "--id is required"},
		{[]string{"approvals"}, "--id is required"},
		{[]string{"permissions"}, "--id is required"},
		{[]string{"approve", "--id", "s1", "extra"}, `unexpected argument "extra"`},
		{[]string{"permissions", "--id", "s1", "--approval-policy", "sometimes"}, `--approval-policy must be "ask" or "never", got "sometimes"`},
		{[]string{"permissions", "--id", "s1", "--network", "yes"}, `--network must be "on" or "off", got "yes"`},
		{[]string{"permissions", "--id", "s1", "--preset", "custom"}, `--preset must be "read-only", "workspace-write" or "danger-full-access", got "custom"`},
		{[]string{"permissions", "--id", "s1", "--sandbox-mode", "full"}, `--sandbox-mode must be "read-only", "workspace-write" or "danger-full-access", got "full"`},
		{[]string{"permissions", "--id", "s1", "--allow-command", "make && rm"}, `--allow-command "make && rm": a command prefix is one or more plain words`},
		{[]string{"permissions", "--id", "s1", "--allow-path", "/etc"}, `--allow-path "/etc": a path prefix is a path relative to the working directory, inside it`},
		{[]string{"permissions", "--id", "s1", "--allow-tool", " "}, "--allow-tool needs a tool name"},
		{[]string{"permissions", "--id", "s1", "--approval-timeout", "-1m"}, "--approval-timeout must not be negative, got -1m0s"},
		{[]string{"create", "--id", "s1", "--approval-policy", "always"}, `--approval-policy must be "ask" or "never", got "always"`},
		{[]string{"create", "--id", "s1", "--approval-timeout", "-5s"}, "--approval-timeout must not be negative, got -5s"},
		{[]string{"resume", "--id", "s1", "--approval-policy", "maybe"}, `--approval-policy must be "ask" or "never", got "maybe"`},
		{[]string{"chat", "--id", "s1", "--approval-policy", "on"}, `--approval-policy must be "ask" or "never", got "on"`},
		{[]string{"create", "--id", "s1", "--preset", "custom"}, `--preset must be "read-only", "workspace-write" or "danger-full-access", got "custom"`},
		{[]string{"resume", "--id", "s1", "--preset", "read-only", "--approval-policy", "never"}, `--preset read-only is --sandbox-mode read-only --approval-policy ask; the flags set disagree`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := runCLI(t, "", c.args...)
			mustFail(t, r, 1, c.want)
			require.Empty(t, r.stdout)
		})
	}
	require.Empty(t, *dialed, "an input error reached Temporal")
}

// create, resume and chat pass the approval flags as agentOptions.
func TestCreateRequestApprovalOptions(t *testing.T) {
	cmd := newCreateCmd(&app{})
	require.NoError(t, cmd.Flags().Parse([]string{"--provider", "scripted", "--model", "m1", "--approval-policy", "ask", "--approval-timeout", "90s"}))
	var in createInput
	in.id = "s1"
	in.route.provider, _ = cmd.Flags().GetString("provider")
	in.route.model, _ = cmd.Flags().GetString("model")
	in.route.approvalPolicy, _ = cmd.Flags().GetString("approval-policy")
	in.route.approvalTimeout, _ = cmd.Flags().GetDuration("approval-timeout")
	require.NoError(t, in.validate(cmd.Flags()))
	req, err := in.request()
	require.NoError(t, err)
	ms := 90000.0
	require.Equal(t, &wire.AgentOptions{Provider: "scripted", Model: "m1", ApprovalPolicy: "ask", ApprovalTimeoutMs: &ms}, req.AgentOptions)

	require.Equal(t, &wire.AgentOptions{ApprovalPolicy: "never"}, routeFlags{approvalPolicy: "never"}.options())
	require.Equal(t, &wire.AgentOptions{Preset: "read-only"}, routeFlags{preset: "read-only"}.options())
	require.Nil(t, routeFlags{}.options())
	for _, c := range []func() *cobra.Command{func() *cobra.Command { return newResumeCmd(&app{}) }, func() *cobra.Command { return newChatCmd(&app{}) }} {
		fs := c().Flags()
		require.NotNil(t, fs.Lookup("approval-policy"))
		require.NotNil(t, fs.Lookup("approval-timeout"))
		require.NotNil(t, fs.Lookup("preset"))
	}
}

// The permissions as permissions and /permissions print them.
func TestRenderPermissions(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, renderPermissions(&b, wire.Permissions{SandboxMode: "read-only", ApprovalPolicy: "never", ApprovalTimeoutMs: 1500}))
	require.Equal(t, `sandbox mode      read-only
network           off
approval policy   never
preset            -
approval timeout  1.5s
allow rules       none
`, b.String())
}

// starter turn shows a call waiting for approval and how to decide.
func TestTurnCommandShowsApprovals(t *testing.T) {
	isolateEnv(t)
	f := &approvalTemporal{state: func(polls int, decided []wire.DecideRequest) wire.LoopState {
		switch {
		case polls == 0:
			return waiting(goTest)
		case polls == 1:
			return waiting(goTest)
		}
		return wire.LoopState{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, EndSeq: 9, Steps: 2, Claimed: []string{"m1"},
			Reason: &wire.TurnEndReason{Kind: "completed"}}}}
	}}
	stubDial(t, f)
	r := mustOK(t, runCLI(t, "", "turn", "--id", "s1", "--prompt", "test it"))
	require.Equal(t, `⏸ run_command (c1) waits for approval: run_command requires approval in this session
  {"command":"go test ./..."}
  starter approve --id s1 --call c1 [--always], or starter reject --id s1 --call c1
turn 1 completed
`, r.stdout)
	require.Equal(t, "⏸ \"x\\x1b\" (\"c\\u202e\") waits for approval\n  {\"p\":\"\\a\"}\n  starter approve --id \"s\\n\" --call \"c\\u202e\" [--always], or starter reject --id \"s\\n\" --call \"c\\u202e\"\n",
		approvalNotice("s\n", wire.PendingApproval{Tool: "x\x1b", CallID: "c\u202e", Arguments: "{\"p\":\"\a\"}"}))
}

// A call's arguments with its question: each field on its line, a
// string's lines under it, cut to a few lines.
func TestApprovalArgLines(t *testing.T) {
	lines := func(args string, truncated bool) []string {
		return approvalArgLines(wire.PendingApproval{Arguments: args, Truncated: truncated})
	}
	require.Equal(t, []string{"command: go test ./...", "timeout_ms: 5000"}, lines(`{"command":"go test ./...","timeout_ms":5000}`, false))
	require.Equal(t, []string{"path: a.txt", "content: one", "  two", "  three", "  four", "… (2 more lines)"},
		lines(`{"path":"a.txt","content":"one\ntwo\nthree\nfour\nfive\nsix\n"}`, false))
	require.Equal(t, []string{`{"command":"go te (cut)`}, lines(`{"command":"go te`, true))
	require.Equal(t, []string{"not json"}, lines("not\njson", false))
	require.Equal(t, []string{`a: \x1b]0;owned\a`, `b: {"x":[1,2]}`}, lines(`{"a":"\u001b]0;owned\u0007","b":{"x": [1, 2]}}`, false))
	long := lines(`{"content":"`+strings.Repeat("x", 500)+`"}`, false)
	require.Len(t, long, 1)
	require.Equal(t, 160, len([]rune(long[0])))
}
