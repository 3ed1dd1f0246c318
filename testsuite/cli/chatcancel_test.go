package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// Ctrl-C in `starter chat` while run_command runs `sleep 45` kills the
// command at once: the turn ends aborted before the command would have,
// its shell is gone and the call is stored ABORTED with its output.
func TestChatCtrlCKillsARunningCommand(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	cwd := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[
		{"toolCalls":[{"id":"c1","name":"run_command","arguments":{"command":"echo started; echo $$ > shell.pid; sleep 45"}}]},
		{"text":"done"}
	]}`), 0o644))
	e.workerArgs = []string{"--provider-script", script, "--enable-run-command"}
	e.startWorker(true)

	term := e.chat("--id", "k1", "--cwd", cwd, "--provider", "scripted", "--model", "m1", "--root", e.root, "--compression", "none")
	term.expect("> ")
	term.typeKeys("run it\r")
	var shell int
	deadline := time.Now().Add(90 * time.Second)
	for shell == 0 {
		b, err := os.ReadFile(filepath.Join(cwd, "shell.pid"))
		if err == nil && strings.HasSuffix(string(b), "\n") {
			shell, err = strconv.Atoi(strings.TrimSpace(string(b)))
			require.NoError(t, err)
			break
		}
		require.True(t, time.Now().Before(deadline), "the command never started; the terminal shows:\n%s", term.out.String())
		time.Sleep(20 * time.Millisecond)
	}
	started := time.Now()
	term.typeKeys("\x03")
	term.expect("[turn 1 aborted by user]")
	require.Less(t, time.Since(started), 45*time.Second, "Ctrl-C waited for the command to finish")
	for syscall.Kill(shell, 0) == nil {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(shell) + "/stat")
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			break
		}
		require.True(t, time.Now().Before(started.Add(60*time.Second)), "the command's shell %d still runs after the turn ended", shell)
		time.Sleep(20 * time.Millisecond)
	}
	term.expect("> ")
	term.typeKeys("\x03")
	term.expect(`session "k1" disposed`)
	require.NoError(t, term.wait(), term.out.String())

	evs := e.stored("k1")
	requireContiguous(t, evs)
	var codes []string
	for _, ev := range evs {
		if ev.Type == wire.TypeToolResult {
			r, err := ev.ToolResult()
			require.NoError(t, err)
			require.NotNil(t, r.Error, "the command's result: %s", ev.Data)
			codes = append(codes, r.Error.Code)
			require.Equal(t, "started\nError: the tool call was cancelled and the command was killed", r.Message.Content[0].Content[0].Text)
		}
	}
	require.Equal(t, []string{"ABORTED"}, codes)
}
