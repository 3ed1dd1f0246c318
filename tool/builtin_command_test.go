package tool_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/tool"
)

func TestRunCommandDisabledByDefault(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{})
	text := wantError(t, s.run(t, "run_command", map[string]any{"command": "true"}), "ToolNotFoundError", "TOOL_NOT_FOUND")
	if text != `Error: tool "run_command" not found; available tools: list_dir, read_file, write_file` {
		t.Errorf("text %q", text)
	}
}

func TestRunCommand(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	res := s.run(t, "run_command", map[string]any{"command": "pwd; echo out; echo err >&2"})
	want := s.cwd + "\nout\nerr\n[exit code: 0]"
	if got := wantOK(t, res); got != want {
		t.Errorf("text %q\nwant %q", got, want)
	}
	if m := metaOf(t, res); m["exitCode"] != 0.0 || m["outputBytes"] != float64(len(s.cwd)+9) {
		t.Errorf("meta %v", m)
	}
	res = s.run(t, "run_command", map[string]any{"command": "echo failing; exit 3"})
	if text := wantError(t, res, "CommandFailedError", "COMMAND_FAILED"); text != "failing\n[exit code: 3]" {
		t.Errorf("exit 3: %q", text)
	}
	if m := metaOf(t, res); m["exitCode"] != 3.0 {
		t.Errorf("meta %v", m)
	}
	text := wantError(t, s.run(t, "run_command", map[string]any{"command": ""}), "InvalidArgumentsError", "INVALID_ARGUMENTS")
	if !strings.HasSuffix(text, "property \"command\": minLength: got 0, want 1") {
		t.Errorf("empty command: %q", text)
	}
}

func TestRunCommandCapsOutput(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true, MaxOutputBytes: 100})
	res := s.run(t, "run_command", map[string]any{"command": "head -c 5000 /dev/zero | tr '\\0' x"})
	want := strings.Repeat("x", 100) + "\n[output truncated: 5000 bytes in all, the first 100 shown]\n[exit code: 0]"
	if got := wantOK(t, res); got != want {
		t.Errorf("text %q", got)
	}
	if m := metaOf(t, res); m["outputBytes"] != 5000.0 || m["truncated"] != true {
		t.Errorf("meta %v", m)
	}
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// childPid waits for the command to write its background child's pid.
func childPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a fork on a loaded machine
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the command never wrote its child's pid")
	return 0
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The command starts a child that would outlive the shell; a timeout kills
// the whole process group.
const spawnChild = "sleep 60 & echo $! > child.pid; wait"

func TestRunCommandTimeoutKillsTheProcessGroup(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	start := time.Now()
	res := s.run(t, "run_command", map[string]any{"command": "echo started; " + spawnChild, "timeoutMs": 300})
	text := wantError(t, res, "CommandTimeoutError", "COMMAND_TIMEOUT")
	if text != "started\nError: the command timed out after 300ms and was killed" {
		t.Errorf("text %q", text)
	}
	if elapsed := time.Since(start); elapsed > 20*time.Second {
		t.Errorf("took %v", elapsed)
	}
	if m := metaOf(t, res); m["timedOut"] != true {
		t.Errorf("meta %v", m)
	}
	waitDead(t, childPid(t, filepath.Join(s.cwd, "child.pid")))
}

func TestRunCommandDefaultTimeout(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true, CommandTimeout: 200 * time.Millisecond})
	res := s.run(t, "run_command", map[string]any{"command": "sleep 30"})
	if text := wantError(t, res, "CommandTimeoutError", "COMMAND_TIMEOUT"); text != "Error: the command timed out after 200ms and was killed" {
		t.Errorf("text %q", text)
	}
}

func TestRunCommandCancelKillsTheProcessGroup(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pidc := make(chan int, 1)
	go func() { pidc <- childPid(t, filepath.Join(s.cwd, "child.pid")); cancel() }()
	res := s.runCtx(t, ctx, "run_command", map[string]any{"command": spawnChild})
	text := wantError(t, res, "AbortError", "ABORTED")
	if text != `Error: tool call "run_command" aborted: context canceled` {
		t.Errorf("text %q", text)
	}
	waitDead(t, <-pidc)
}

func TestRunCommandBadCwd(t *testing.T) {
	reg, err := tool.NewRegistry(tool.Builtins(tool.BuiltinOptions{RunCommand: true})...)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	res := reg.Execute(context.Background(), "run_command", tool.Call{Cwd: missing, Arguments: []byte(`{"command":"true"}`)})
	text := wantError(t, res, "ToolFailedError", "TOOL_FAILED")
	if !strings.HasPrefix(text, `Error: tool "run_command" failed: the working directory "`+missing+`" is unusable: `) {
		t.Errorf("text %q", text)
	}
}
