package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
)

// A person runs `worker --dev` and the sessions in one directory, as the
// README does: the store root (.sessionflow/store), the dev server's state
// (.sessionflow/dev) and the provider script lie inside every session's
// cwd. A model reading, listing or overwriting another session's log or
// lease, the server's state or the script gets PATH_DENIED; the other
// session stays readable and its next turn completes.
func TestToolsNeverReachTheWorkersFiles(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	e.workerDir = dir
	e.root = filepath.Join(dir, ".sessionflow", "store")
	e.devDir = filepath.Join(dir, ".sessionflow", "dev")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha\n"), 0o644))
	project, err := jsonl.ProjectKey(dir)
	require.NoError(t, err)
	victim := ".sessionflow/store/" + project + "/victim/"
	calls := []string{
		`{"id":"c1","name":"list_dir","arguments":{"path":".sessionflow/store"}}`,
		`{"id":"c2","name":"read_file","arguments":{"path":"` + victim + `session.v3.jsonl"}}`,
		`{"id":"c3","name":"write_file","arguments":{"path":"` + victim + `session.v3.jsonl","content":"pwned\n"}}`,
		`{"id":"c4","name":"write_file","arguments":{"path":"` + victim + `session.lock","content":"stolen\n"}}`,
		`{"id":"c5","name":"read_file","arguments":{"path":"` + filepath.Join(dir, ".sessionflow/dev/temporal.log") + `"}}`,
		`{"id":"c6","name":"read_file","arguments":{"path":"script.json"}}`,
		`{"id":"c7","name":"list_dir","arguments":{"path":".sessionflow"}}`,
		`{"id":"c8","name":"read_file","arguments":{"path":"a.txt"}}`,
	}
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[
		{"toolCalls":[`+strings.Join(calls, ",")+`]},
		{"text":"done"},
		{"text":"done again"}
	]}`), 0o644))
	e.workerArgs = []string{"--provider-script", "script.json"}
	e.startWorker(true)
	e.mustStarter("", "create", "--id", "victim", "--cwd", dir, "--provider", "scripted", "--model", "m1")
	e.mustStarter("", "create", "--id", "attacker", "--cwd", dir, "--provider", "scripted", "--model", "m1")
	// The victim's log is written by its first turn (whose own tool calls
	// are refused alike).
	out := e.mustStarter("", "turn", "--id", "victim", "--prompt", "hello", "--root", e.root, "--compression", "none")
	require.True(t, strings.HasSuffix(out, "done\nturn 1 completed\n"), "output:\n%s", out)
	logPath := filepath.Join(dir, filepath.FromSlash(victim), "session.v3.jsonl")
	lockPath := filepath.Join(dir, filepath.FromSlash(victim), "session.lock")
	before, err := os.ReadFile(logPath)
	require.NoError(t, err, "the victim's log is where the model aims; the store holds:\n%s", tree(e.root))
	lockBefore, err := os.ReadFile(lockPath)
	require.NoError(t, err, "the victim's live lease is where the model aims")

	out = e.mustStarter("", "turn", "--id", "attacker", "--prompt", "look around", "--root", e.root, "--compression", "none")
	for _, id := range []string{"c1", "c2", "c3", "c4", "c5", "c6"} {
		tool := map[string]string{"c1": "list_dir", "c2": "read_file", "c3": "write_file", "c4": "write_file", "c5": "read_file", "c6": "read_file"}[id]
		require.Contains(t, out, fmt.Sprintf("✗ %s (%s) PATH_DENIED\n", tool, id), "output:\n%s", out)
	}
	require.Contains(t, out, "✓ list_dir (c7)\n", "output:\n%s", out)
	require.Contains(t, out, "✓ read_file (c8)\n", "output:\n%s", out)
	require.True(t, strings.HasSuffix(out, "done\nturn 1 completed\n"), "output:\n%s", out)

	after, err := os.ReadFile(logPath)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "the victim's log changed")
	lockAfter, err := os.ReadFile(lockPath)
	require.NoError(t, err)
	require.Equal(t, string(lockBefore), string(lockAfter), "the victim's lease changed")

	// The attacker's stored results say what was denied, and show nothing
	// of the victim.
	evs := e.stored("attacker")
	var listing string
	for _, ev := range evs {
		if ev.Type != "tool/result" {
			continue
		}
		require.NotContains(t, string(ev.Data), `\"type\":\"session\"`, "a tool result shows the victim's log")
		r, err := ev.ToolResult()
		require.NoError(t, err)
		if r.Message.Source.CallID == "c7" {
			listing = r.Message.Content[0].Content[0].Text
		}
	}
	require.Equal(t, "dev/ (denied: reserved by the worker)\nstore/ (denied: reserved by the worker)", listing)

	// The victim is intact: readable, and its next turn completes.
	out = e.mustStarter("", "turn", "--id", "victim", "--prompt", "again", "--root", e.root, "--compression", "none")
	require.True(t, strings.HasSuffix(out, "done again\nturn 2 completed\n"), "output:\n%s", out)
	requireContiguous(t, e.stored("victim"))
	e.mustStarter("", "dispose", "--id", "victim")
	e.mustStarter("", "dispose", "--id", "attacker")
}

// tree lists the files under dir, one a line.
func tree(dir string) string {
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			b.WriteString(p + "\n")
		}
		return nil
	})
	return b.String()
}
