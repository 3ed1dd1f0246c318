package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A person runs `worker --dev --enable-run-command` in a project, as the
// README does, so the store root and the dev server's state lie inside
// every session's cwd. The model's commands, run by the worker binary
// under the session's sandbox mode, try to write outside the cwd, into the
// store root and into the provider script, and to reach the dev server
// over TCP: each is denied by the kernel, the stored result saying so; a
// write in the cwd goes through in workspace-write (the default) and not
// in read-only, where write_file is refused too; --network lets TCP
// through. An unknown mode is refused at create.
func TestSandboxThroughTheWorker(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	outside := filepath.Join(dir, "outside")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.MkdirAll(project, 0o755))
	e.workerDir = project
	e.root = filepath.Join(project, ".sessionflow", "store")
	e.devDir = filepath.Join(project, ".sessionflow", "dev")
	type call struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	command := func(id, c string) call {
		b, err := json.Marshal(map[string]string{"command": c})
		require.NoError(t, err)
		return call{ID: id, Name: "run_command", Arguments: b}
	}
	calls := []call{
		command("c1", "echo pwned > "+filepath.Join(outside, "escape.txt")),
		command("c2", "touch .sessionflow/store/planted"),
		command("c3", "echo pwned >> script.json"),
		command("c4", fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo connected'", e.port)),
		command("c5", "echo mine > inside.txt"),
		{ID: "c6", Name: "write_file", Arguments: json.RawMessage(`{"path":"written.txt","content":"written\n"}`)},
	}
	script, err := json.Marshal(map[string]any{"responses": []any{map[string]any{"toolCalls": calls}, map[string]any{"text": "done"}}})
	require.NoError(t, err)
	scriptPath := filepath.Join(project, "script.json")
	require.NoError(t, os.WriteFile(scriptPath, script, 0o644))
	e.workerArgs = []string{"--provider-script", "script.json", "--enable-run-command"}
	e.startWorker(true)

	out, err := e.starter("", "create", "--id", "bogus", "--cwd", project, "--provider", "scripted", "--model", "m1", "--sandbox-mode", "full")
	require.Error(t, err, "output:\n%s", out)
	require.Contains(t, err.Error(), `agent sandboxMode must be "read-only", "workspace-write" or "danger-full-access"`)

	results := func(id string) map[string]string {
		got := map[string]string{}
		for _, ev := range e.stored(id) {
			if ev.Type != "tool/result" {
				continue
			}
			r, err := ev.ToolResult()
			require.NoError(t, err)
			code := "ok"
			if r.Error != nil {
				code = r.Error.Code
			}
			got[r.Message.Source.CallID] = code + " " + r.Message.Content[0].Content[0].Text
		}
		return got
	}
	turn := func(id string, flags ...string) map[string]string {
		args := append([]string{"create", "--id", id, "--cwd", project, "--provider", "scripted", "--model", "m1"}, flags...)
		e.mustStarter("", args...)
		out := e.mustStarter("", "turn", "--id", id, "--prompt", "try", "--root", e.root, "--compression", "none")
		require.True(t, strings.HasSuffix(out, "done\nturn 1 completed\n"), "output:\n%s", out)
		return results(id)
	}
	const ww, ro = "workspace-write", "read-only"
	denied := func(mode string) string {
		return "[sandbox: file access denied under " + mode + " mode]\n" +
			"[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]\n" +
			"[exit code: "
	}

	got := turn("ww")
	require.Contains(t, got["c1"], "COMMAND_FAILED sh: 1: cannot create "+filepath.Join(outside, "escape.txt")+": Permission denied\n"+denied(ww))
	require.Contains(t, got["c2"], "COMMAND_FAILED touch: cannot touch '.sessionflow/store/planted': Read-only file system\n"+denied(ww))
	require.Contains(t, got["c3"], "COMMAND_FAILED sh: 1: cannot create script.json: Read-only file system\n"+denied(ww))
	require.Contains(t, got["c4"], "COMMAND_FAILED bash: connect: Permission denied\n")
	require.Contains(t, got["c4"], denied(ww))
	require.Equal(t, "ok [exit code: 0]", got["c5"])
	require.Equal(t, "ok Created written.txt (8 bytes)", got["c6"])

	got = turn("ro", "--sandbox-mode", "read-only")
	require.Contains(t, got["c1"], denied(ro))
	require.Contains(t, got["c2"], denied(ro))
	require.Contains(t, got["c3"], denied(ro))
	require.Contains(t, got["c4"], denied(ro))
	require.Equal(t, "COMMAND_FAILED sh: 1: cannot create inside.txt: Permission denied\n"+denied(ro)+"2]", got["c5"])
	require.Equal(t, `FS_SANDBOX_DENIED Error: cannot write "written.txt": file access denied under read-only mode`, got["c6"])

	got = turn("net", "--network")
	require.Equal(t, "ok connected\n[exit code: 0]", got["c4"])
	require.Contains(t, got["c1"], denied(ww))

	_, err = os.Stat(filepath.Join(outside, "escape.txt"))
	require.True(t, os.IsNotExist(err), "a command wrote outside its cwd")
	_, err = os.Stat(filepath.Join(e.root, "planted"))
	require.True(t, os.IsNotExist(err), "a command wrote into the store root")
	b, err := os.ReadFile(scriptPath)
	require.NoError(t, err)
	require.Equal(t, string(script), string(b), "a command wrote into the provider script")
	for _, id := range []string{"ww", "ro", "net"} {
		requireContiguous(t, e.stored(id))
		e.mustStarter("", "dispose", "--id", id)
	}
}
