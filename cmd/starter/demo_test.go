package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
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
// server, an in-process worker, the crash, the refused resume (dead owners kept), the
// resume that forfeits the dead owner's lease, and the dispose.
func TestDemoOnEmbeddedServer(t *testing.T) {
	root := t.TempDir()
	r := mustOK(t, runCLI(t, "", "demo", "--root", root, "--compression", "none"))
	for _, want := range []string{
		"phase live",
		"lifecycle [session/created agent/created agent/session-start{startup}]",
		"resume: session ",
		"is already owned by an active write handle",
		"is not running: forfeited the lease",
		"lifecycle [session/created agent/created agent/session-start{resume}]",
		"10 tool/result TOOL_OUTCOME_UNKNOWN",
		"11 tool/result TOOL_NOT_STARTED",
		"14 session/end-seed",
		"disposed; no lease held",
		"15 events, seqs 0..14 contiguous",
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
	require.Len(t, in.Events, 15)
	last := in.Events[len(in.Events)-1]
	require.Equal(t, session.TypeEndSeed, last.Type)
}
