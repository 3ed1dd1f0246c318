package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// --always derives the rule from the call: run_command its command's
// first word and the second unless it is a flag; write_file its path's
// directory; another tool every call of it. What has no such rule is
// refused, never widened to the whole tool.
func TestDeriveRule(t *testing.T) {
	for _, tc := range []struct {
		tool, args string
		want       wire.ApprovalRule
	}{
		{"run_command", `{"command":"go test ./..."}`, wire.ApprovalRule{Tool: "run_command", CommandPrefix: "go test"}},
		{"run_command", `{"command":"  go   vet"}`, wire.ApprovalRule{Tool: "run_command", CommandPrefix: "go vet"}},
		{"run_command", `{"command":"ls -la /tmp"}`, wire.ApprovalRule{Tool: "run_command", CommandPrefix: "ls"}},
		{"run_command", `{"command":"make"}`, wire.ApprovalRule{Tool: "run_command", CommandPrefix: "make"}},
		{"run_command", `{"command":"echo hi > out.txt"}`, wire.ApprovalRule{Tool: "run_command", CommandPrefix: "echo hi"}},
		{"run_command", `{"command":"cat $HOME/x"}`, wire.ApprovalRule{Tool: "run_command", CommandPrefix: "cat"}},
		{"run_command", `{"command":"npm run build","timeout_ms":1000}`, wire.ApprovalRule{Tool: "run_command", CommandPrefix: "npm run"}},
		{"write_file", `{"path":"src/a/b.go","content":"x"}`, wire.ApprovalRule{Tool: "write_file", PathPrefix: "src/a"}},
		{"write_file", `{"path":"notes.txt","content":"x"}`, wire.ApprovalRule{Tool: "write_file", PathPrefix: "."}},
		{"write_file", `{"path":"./src/../lib/x.go"}`, wire.ApprovalRule{Tool: "write_file", PathPrefix: "lib"}},
		{"deploy", `{"target":"prod"}`, wire.ApprovalRule{Tool: "deploy"}},
		{"deploy", `not json`, wire.ApprovalRule{Tool: "deploy"}},
	} {
		got, err := deriveRule(wire.PendingApproval{Tool: tc.tool, Arguments: tc.args})
		require.NoError(t, err, "%s %s", tc.tool, tc.args)
		require.Equal(t, tc.want, got, "%s %s", tc.tool, tc.args)
	}
	for _, tc := range []struct {
		tool, args string
		truncated  bool
		want       string
	}{
		{"run_command", `{"command":"(cd x && make)"}`, false, `no allow rule can be derived from the call: the command "(cd x && make)" does not start with a plain word`},
		{"run_command", `{"command":""}`, false, `the command "" does not start with a plain word`},
		{"run_command", `{"cmd":"ls"}`, false, "its arguments hold no command"},
		{"run_command", `{"command":"go te`, true, "its arguments hold no command (they were cut)"},
		{"write_file", `{"path":"/etc/passwd"}`, false, `the path "/etc/passwd" is absolute`},
		{"write_file", `{"path":"../up/x"}`, false, `the path "../up/x" leaves the working directory`},
		{"write_file", `{"path":""}`, false, "its arguments hold no path"},
		{"", `{}`, false, "it names no tool"},
		{strings.Repeat("t", 1100), `{}`, false, "an allow rule is longer than 1024 bytes"},
	} {
		_, err := deriveRule(wire.PendingApproval{Tool: tc.tool, Arguments: tc.args, Truncated: tc.truncated})
		require.ErrorContains(t, err, tc.want)
		require.True(t, errors.Is(err, errNoRule))
	}
}

func TestRuleTextAndFlagRules(t *testing.T) {
	require.Equal(t, `run_command: commands starting "go test"`, ruleText(wire.ApprovalRule{Tool: "run_command", CommandPrefix: "go test"}))
	require.Equal(t, "write_file: paths under src", ruleText(wire.ApprovalRule{Tool: "write_file", PathPrefix: "src"}))
	require.Equal(t, "deploy: every call", ruleText(wire.ApprovalRule{Tool: "deploy"}))
	require.Equal(t, `run_command: commands starting "x\x1b[2J"`, ruleText(wire.ApprovalRule{Tool: "run_command", CommandPrefix: "x\x1b[2J"}))

	r, err := commandRule("  go   test ")
	require.NoError(t, err)
	require.Equal(t, wire.ApprovalRule{Tool: "run_command", CommandPrefix: "go test"}, r)
	_, err = commandRule("rm -rf / ;")
	require.EqualError(t, err, `--allow-command "rm -rf / ;": a command prefix is one or more plain words (no shell syntax)`)
	_, err = commandRule(" ")
	require.Error(t, err)
	r, err = pathRule("src/")
	require.NoError(t, err)
	require.Equal(t, wire.ApprovalRule{Tool: "write_file", PathPrefix: "src"}, r)
	for _, bad := range []string{"/abs", "../x", ""} {
		_, err = pathRule(bad)
		require.ErrorContains(t, err, "a path prefix is a path relative to the working directory, inside it")
	}

	require.NoError(t, checkApprovalPolicy(""))
	require.NoError(t, checkApprovalPolicy("ask"))
	require.EqualError(t, checkApprovalPolicy("always"), `--approval-policy must be "ask" or "never", got "always"`)
	require.NoError(t, checkApprovalTimeout(0, true))
	require.EqualError(t, checkApprovalTimeout(0, false), "--approval-timeout must be positive")
	require.EqualError(t, checkApprovalTimeout(-time.Second, true), "--approval-timeout must not be negative, got -1s")
	require.EqualError(t, checkApprovalTimeout(time.Microsecond, true), "--approval-timeout must be at least 1ms, got 1µs")
}
