package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

func TestLogDemo(t *testing.T) {
	for _, comp := range []string{"none", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			r := mustOK(t, logCmd(t, root, comp, "", "demo"))
			for _, want := range []string{
				"already owned by an active write handle",
				"10 tool/result TOOL_OUTCOME_UNKNOWN",
				"11 tool/result TOOL_NOT_STARTED",
				"12 step/end",
				"13 turn/end",
				"14 session/end-seed",
				"15 events, seqs 0..14 contiguous",
			} {
				require.Contains(t, r.stdout, want)
			}
			id := regexp.MustCompile(`--id (demo-[0-9a-f]+)`).FindStringSubmatch(r.stdout)
			require.Len(t, id, 2, r.stdout)

			// The repaired log is what a fresh store reads: no torn tail, no lease,
			// the interrupted turn closed.
			st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.Compression(comp)})
			require.NoError(t, err)
			ctx := context.Background()
			in, err := st.Inspect(ctx, id[1])
			require.NoError(t, err)
			require.Zero(t, in.TornBytes)
			require.Nil(t, in.Lease)
			require.Len(t, in.Events, 15)
			_, open, err := session.ScanOpenTurn(in.Events)
			require.NoError(t, err)
			require.False(t, open)
			end, err := in.Events[13].TurnEnd()
			require.NoError(t, err)
			require.Equal(t, "interrupted", string(end.Reason.Kind))
		})
	}
}

// TestDemoOnEmbeddedServer runs `starter demo` end to end: the embedded dev
// server, worker processes built from ./worker, a turn whose model call is
// interrupted by a SIGKILL of its worker (re-run on the next worker) and
// whose run_command call is interrupted by a SIGKILL of the next one (not
// re-run: TOOL_OUTCOME_UNKNOWN), the dispose and the final log.
func TestDemoOnEmbeddedServer(t *testing.T) {
	root := t.TempDir()
	r := mustOK(t, runCLI(t, "", "demo", "--root", root, "--compression", "none"))
	for _, want := range []string{
		"phase live",
		"worker 1 (pid ",
		"!! SIGKILL worker 1 (pid ",
		"while the model streams its answer",
		"worker 2 (pid ",
		"→ run_command (call-1) running",
		"!! SIGKILL worker 2 (pid ",
		"worker 3 (pid ",
		"← run_command (call-1) finished TOOL_OUTCOME_UNKNOWN",
		"turn 1 completed",
		"model call of step 1: re-run on the next worker (idempotent); one assistant/message stored (seq 44)",
		"tool call call-1: not run again on the next worker (the tool is not idempotent); tool/result seq 46: TOOL_OUTCOME_UNKNOWN",
		"test-report.txt holds 1 line(s): the command ran 1 time(s)",
		"disposed; no lease held",
		"3 request/context\n4..43 assistant/chunk ×40\n44 assistant/message\n",
		"46 tool/result TOOL_OUTCOME_UNKNOWN\n",
		"48 step/start\n49..66 assistant/chunk ×18\n67 assistant/message\n",
		"69 turn/end\n",
		"70 events, seqs 0..69 contiguous",
	} {
		require.Contains(t, r.stdout, want)
	}
	id := regexp.MustCompile(`create session "(demo-[0-9a-f]+)"`).FindStringSubmatch(r.stdout)
	require.Len(t, id, 2, r.stdout)

	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	in, err := st.Inspect(context.Background(), id[1])
	require.NoError(t, err)
	require.Zero(t, in.TornBytes)
	require.Nil(t, in.Lease)
	evs := sessiontest.WithoutRecords(t, in.Events)
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{
		wire.TypeTurnStart, wire.TypeStepStart, wire.TypeUserMessage,
		wire.TypeAssistantMessage, wire.TypeToolCall, wire.TypeToolResult, wire.TypeStepEnd,
		wire.TypeStepStart, wire.TypeAssistantMessage, wire.TypeStepEnd, wire.TypeTurnEnd,
	}, types)
	res, err := evs[5].ToolResult()
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	require.Equal(t, "TOOL_OUTCOME_UNKNOWN", res.Error.Code)
	end, err := evs[10].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "completed", end.Reason.Kind)
}

// The demo's real-service route is checked before anything starts: a
// provider the worker does not offer, a missing key or model.
func TestDemoRealProviderRoute(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("OPENAI_API_KEY", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "openai", "--model", "gpt-4o-mini"}, "--provider openai needs OPENAI_API_KEY in the environment"},
		{[]string{"--provider", "mistral", "--model", "m"}, "--provider must be anthropic or openai, got \"mistral\""},
		{[]string{"--provider", "anthropic", "--model", "claude-sonnet-4-5"}, "--provider anthropic needs ANTHROPIC_API_KEY in the environment"},
		{[]string{"--model", "claude-sonnet-4-5"}, "--model needs ANTHROPIC_API_KEY or OPENAI_API_KEY in the environment"},
		{[]string{"--provider", "anthropic"}, "--provider anthropic needs --model"},
	} {
		r := runCLI(t, "", append([]string{"demo"}, c.args...)...)
		require.Equal(t, 1, r.code, c.args)
		require.Contains(t, r.stderr, c.want)
	}
}

// The demo's workers do not inherit Temporal or sessionflow settings, and
// do inherit the model services' variables.
func TestDemoWorkerEnv(t *testing.T) {
	require.Equal(t, []string{"PATH=/bin", "ANTHROPIC_API_KEY=k", "OPENAI_BASE_URL=http://x"}, demoWorkerEnv([]string{
		"PATH=/bin", "TEMPORAL_API_KEY=secret", "SESSIONFLOW_ANTHROPIC=true", "ANTHROPIC_API_KEY=k", "OPENAI_BASE_URL=http://x", "TEMPORAL_ADDRESS=far:7233",
	}))
}
