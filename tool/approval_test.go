package tool_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

func TestGate(t *testing.T) {
	reg, err := tool.NewRegistry(tool.Builtins(tool.BuiltinOptions{RunCommand: true})...)
	require.NoError(t, err)
	goTest := []wire.ApprovalRule{{Tool: "run_command", CommandPrefix: "go test"}, {Tool: "write_file", PathPrefix: "src"}}
	for _, tc := range []struct {
		name, tool, args, mode, policy string
		rules                          []wire.ApprovalRule
		ask                            bool
		reason, escalation, refusal    string
	}{
		{name: "never runs a command", tool: "run_command", args: `{"command":"ls"}`, policy: "never"},
		{name: "ask asks a command", tool: "run_command", args: `{"command":"ls"}`, policy: "ask", ask: true, reason: "run_command requires approval in this session"},
		{name: "reads never ask", tool: "read_file", args: `{"path":"a"}`, policy: "ask"},
		{name: "a prefix rule", tool: "run_command", args: `{"command":"go test ./..."}`, policy: "ask", rules: goTest},
		{name: "not the prefix", tool: "run_command", args: `{"command":"go testx"}`, policy: "ask", rules: goTest, ask: true, reason: "run_command requires approval in this session"},
		{name: "a compound command", tool: "run_command", args: `{"command":"go test ./...; rm -rf ."}`, policy: "ask", rules: goTest, ask: true, reason: "run_command requires approval in this session"},
		{name: "a substitution", tool: "run_command", args: `{"command":"go test $(rm -rf .)"}`, policy: "ask", rules: goTest, ask: true, reason: "run_command requires approval in this session"},
		{name: "a path rule", tool: "write_file", args: `{"path":"src/x/y.go","content":""}`, policy: "ask", rules: goTest},
		{name: "a sibling path", tool: "write_file", args: `{"path":"srcx/y.go","content":""}`, policy: "ask", rules: goTest, ask: true, reason: "write_file requires approval in this session"},
		{name: "a path leaving", tool: "write_file", args: `{"path":"src/../../y.go","content":""}`, policy: "ask", rules: goTest, ask: true, reason: "write_file requires approval in this session"},
		{name: "an escalation asks under never too", tool: "run_command", args: `{"command":"ls","sandbox_permissions":"danger-full-access","justification":"why"}`, policy: "never", rules: goTest, ask: true, reason: "escalate sandbox to danger-full-access: why", escalation: "danger-full-access"},
		{name: "an escalation no rule matches", tool: "run_command", args: `{"command":"go test","sandbox_permissions":"danger-full-access","justification":"why"}`, policy: "ask", rules: goTest, ask: true, reason: "escalate sandbox to danger-full-access: why", escalation: "danger-full-access"},
		{name: "read-only to workspace-write", tool: "write_file", args: `{"path":"a","content":"","sandbox_permissions":"workspace-write","justification":"j"}`, mode: "read-only", policy: "ask", ask: true, reason: "escalate sandbox to workspace-write: j", escalation: "workspace-write"},
		{name: "not wider", tool: "run_command", args: `{"command":"ls","sandbox_permissions":"workspace-write","justification":"j"}`, policy: "ask", refusal: `Error: sandbox escalation to "workspace-write" is not strictly wider than this call's current "workspace-write" mode`},
		{name: "no justification", tool: "run_command", args: `{"command":"ls","sandbox_permissions":"danger-full-access"}`, policy: "ask", refusal: "Error: invalid escalation: sandbox_permissions requires a justification"},
		{name: "a lone justification", tool: "run_command", args: `{"command":"ls","justification":"j"}`, policy: "ask", refusal: "Error: invalid escalation: justification is only valid together with sandbox_permissions"},
		{name: "a blank justification", tool: "run_command", args: `{"command":"ls","sandbox_permissions":"danger-full-access","justification":"  "}`, policy: "ask", refusal: "Error: invalid justification: expected a non-empty sentence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := reg.Gate(tc.tool, json.RawMessage(tc.args), tool.GatePolicy{Mode: tc.mode, Policy: tc.policy, Rules: tc.rules, Cwd: "/w"})
			require.Equal(t, tc.ask, g.Ask)
			require.Equal(t, tc.reason, g.Reason)
			require.Equal(t, tc.escalation, g.Escalation)
			if tc.refusal == "" {
				require.Nil(t, g.Refusal)
				return
			}
			require.NotNil(t, g.Refusal)
			require.Equal(t, tc.refusal, g.Refusal.Content[0].Text)
		})
	}
}

func TestRuleValidate(t *testing.T) {
	for _, bad := range []wire.ApprovalRule{{}, {Tool: "t", CommandPrefix: "a", PathPrefix: "b"}, {Tool: "t", CommandPrefix: "a;b"}, {Tool: "t", PathPrefix: "/abs"}, {Tool: "t", PathPrefix: "../up"}} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
	for _, good := range []wire.ApprovalRule{{Tool: "t"}, {Tool: "t", CommandPrefix: "go test"}, {Tool: "t", PathPrefix: "src/a"}, {Tool: "t", PathPrefix: "."}} {
		require.NoError(t, good.Validate(), "%+v", good)
	}
}
