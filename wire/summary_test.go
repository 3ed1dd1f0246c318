package wire_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// A caller's text in a summary can neither break its line nor reorder it:
// a control or bidirectional-formatting character, a backquote or invalid
// UTF-8 makes the name Go-quoted; a long name is cut on a character
// boundary.
func TestSummaryNameIsOneSafeLine(t *testing.T) {
	require.Equal(t, "cli-x", wire.SummaryName("cli-x"))
	require.Equal(t, "日本 é", wire.SummaryName("日本 é"))
	require.Equal(t, `"a\nb"`, wire.SummaryName("a\nb"))
	require.Equal(t, `"a\u202eb"`, wire.SummaryName("a\u202eb"))
	require.Equal(t, "\"a`b\"", wire.SummaryName("a`b"))
	require.Equal(t, `"\xff"`, wire.SummaryName("\xff"))
	long := strings.Repeat("é", 100) // 200 bytes
	got := wire.SummaryName(long)
	require.Equal(t, strings.Repeat("é", 60)+"…", got)
}

// The static summary and details of a create, a resume and a loop.
func TestStartSummaries(t *testing.T) {
	s, d := wire.CreateSummary(wire.CreateSessionRequest{
		SessionID:    "s1",
		Meta:         &wire.SessionMeta{Cwd: "/w"},
		Fork:         &wire.ForkSeed{ParentSessionID: "p", Count: 7},
		AgentOptions: &wire.AgentOptions{Provider: "anthropic", Model: "claude", Preset: "workspace-write", ApprovalPolicy: "on-request"},
	})
	require.Equal(t, "session s1 · create · anthropic/claude", s)
	require.Equal(t, "**session** s1\n**workflow** CreateSession: a new session\n**cwd** /w\n**model** anthropic/claude\n"+
		"**permissions** preset workspace-write · approvals on-request\n**fork of** p (first 7 events)", d)

	s, d = wire.CreateSummary(wire.CreateSessionRequest{SessionID: "s2", Seed: []wire.Event{}})
	require.Equal(t, "session s2 · create", s)
	require.Equal(t, "**session** s2\n**workflow** CreateSession: a new session\n**seed** 0 events", d)

	s, d = wire.ResumeSummary(wire.ResumeSessionRequest{ResumeSessionID: "s\x1b3"})
	require.Equal(t, `session "s\x1b3" · resume`, s)
	require.Equal(t, "**session** \"s\\x1b3\"\n**workflow** ResumeSession: a stored session, crash-repaired, live again\n**model** the route the log records", d)

	s, d = wire.LoopSummary("l1", wire.SessionLoopInput{SessionTaskQueue: "q"})
	require.Equal(t, "session loop l1", s)
	require.Equal(t, "**loop** l1\n**sessions start on** task queue q", d)
	_, d = wire.LoopSummary("l1", wire.SessionLoopInput{})
	require.Equal(t, "**loop** l1\n**sessions start on** the loop's own task queue", d)
}
