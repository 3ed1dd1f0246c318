package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A person runs a turn: the worker offers the scripted provider, `starter
// create --provider --model` sets the route, `starter turn` prints the tool
// calls and the answer, `--json` the progress and the turn's events.
func TestStarterTurn(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	cwd := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("alpha\n"), 0o644))
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[
		{"toolCalls":[{"id":"c1","name":"read_file","arguments":{"path":"a.txt"}},{"id":"c2","name":"read_file","arguments":{"path":"../x"}}]},
		{"text":"The file says alpha.","chunkSize":5},
		{"text":"Second answer."}
	]}`), 0o644))
	e.workerArgs = []string{"--provider-script", script}
	e.startWorker(true)
	e.mustStarter("", "create", "--id", "t1", "--cwd", cwd, "--provider", "scripted", "--model", "m1")

	out := e.mustStarter("", "turn", "--id", "t1", "--prompt", "what is in a.txt?", "--root", e.root, "--compression", "none")
	require.Contains(t, out, "→ read_file (c1)\n")
	require.Contains(t, out, "✓ read_file (c1)\n")
	require.Contains(t, out, "✗ read_file (c2) OUTSIDE_CWD\n")
	require.True(t, strings.HasSuffix(out, "The file says alpha.\nturn 1 completed\n"), "output:\n%s", out)

	out = e.mustStarter("", "turn", "--id", "t1", "--prompt", "again", "--json", "--root", e.root, "--compression", "none")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last struct {
		Kind string `json:"kind"`
		Info struct {
			Turn int64 `json:"turn"`
		} `json:"info"`
		Events []json.RawMessage `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, "ended", last.Kind)
	require.Equal(t, int64(2), last.Info.Turn)
	var types []string
	for _, e := range last.Events {
		var ev struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal(e, &ev))
		types = append(types, ev.Type)
	}
	require.Equal(t, []string{"turn/start", "step/start", "user/message",
		"assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/chunk", "assistant/message",
		"step/end", "turn/end"}, types, "the turn's stored events: the answer's 4 chunks beside it, no new route")

	e.mustStarter("", "dispose", "--id", "t1")
	evs := e.stored("t1")
	requireContiguous(t, evs)
	require.Equal(t, "turn/end", evs[len(evs)-1].Type)
}
