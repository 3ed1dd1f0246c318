package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// The starter reads a raw root (the worker runs with --compression none,
// which the root's marker records) without being told its encoding: turn
// reads the turn's events, chat's /history and the log group read the
// session, and a chat started before the root was marked reads it too. A compression given by flag or environment that the marker
// contradicts is refused before the prompt is sent.
func TestStarterReadsTheRootsEncodingFromItsMarker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := newEnv(t)
	script := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[{"text":"Read from the raw root."}],"loop":true}`), 0o644))
	e.workerArgs = []string{"--provider-script", script}
	e.startWorker(true)
	_, err := os.Stat(filepath.Join(e.root, ".sessionflow-root"))
	require.ErrorIs(t, err, os.ErrNotExist, "the root is marked before its first session")

	// A chat that starts before the root is marked (its session is the
	// root's first) reads it in the encoding the worker then records.
	out := e.mustStarterCtx(ctx, "hi\n/history\n/quit\n", "chat", "--id", "r0", "--cwd", t.TempDir(),
		"--provider", "scripted", "--model", "m1", "--root", e.root)
	require.Contains(t, out, "you: hi\nassistant: Read from the raw root.\n")

	e.mustStarterCtx(ctx, "", "create", "--id", "r1", "--cwd", t.TempDir(), "--provider", "scripted", "--model", "m1")

	// --json with --root ends with the turn's events, read from the raw
	// root.
	out = e.mustStarterCtx(ctx, "", "turn", "--id", "r1", "--prompt", "hi", "--json", "--root", e.root)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last struct {
		Kind   string            `json:"kind"`
		Events []json.RawMessage `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, "ended", last.Kind)
	require.NotEmpty(t, last.Events, "the turn's events were not read:\n%s", out)
	require.Contains(t, string(last.Events[len(last.Events)-1]), `"type":"turn/end"`)

	out = e.mustStarterCtx(ctx, "/history\n/detach\n", "chat", "--id", "r1", "--root", e.root)
	require.Contains(t, out, "you: hi\nassistant: Read from the raw root.\n")

	out, stderr, err := logCLI(t, e.root, "list")
	require.NoError(t, err, stderr)
	require.Contains(t, out, "r1")
	out, stderr, err = logCLI(t, e.root, "cat", "--id", "r1")
	require.NoError(t, err, stderr)
	require.Contains(t, out, "Read from the raw root.")

	// A contradicting compression is an error, and the prompt is not sent.
	_, err = e.starterCtx(ctx, "", "turn", "--id", "r1", "--prompt", "not sent", "--root", e.root, "--compression", "zstd")
	require.ErrorContains(t, err, `--compression is "zstd", but store root "`+e.root+`" is marked for compression "none"`)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	t.Setenv("SESSIONFLOW_COMPRESSION", "zstd")
	_, err = e.starterCtx(ctx, "", "turn", "--id", "r1", "--prompt", "not sent", "--root", e.root)
	require.ErrorContains(t, err, `SESSIONFLOW_COMPRESSION is "zstd", but store root "`+e.root+`" is marked for compression "none"`)
	t.Setenv("SESSIONFLOW_COMPRESSION", "")

	e.mustStarterCtx(ctx, "", "dispose", "--id", "r1")
	for _, ev := range e.stored("r1") {
		if ev.Type == wire.TypeUserMessage {
			require.NotContains(t, string(ev.Data), "not sent", "a refused command sent its prompt")
		}
	}
}
