package tool_test

import (
	"context"
	"fmt"
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
	start := time.Now()
	res := s.runCtx(t, ctx, "run_command", map[string]any{"command": "echo started; " + spawnChild})
	text := wantError(t, res, "AbortError", "ABORTED")
	if text != "started\nError: the tool call was cancelled and the command was killed" {
		t.Errorf("text %q", text)
	}
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Errorf("the cancelled command ran %v (its child sleeps 60s)", elapsed)
	}
	if m := metaOf(t, res); m["aborted"] != true {
		t.Errorf("meta %v", m)
	}
	waitDead(t, <-pidc)
}

// A child that leaves the command's process group (setsid) is tracked and
// killed when the call ends, however it ends.
// The child writes its pid once it has left the group, and the command
// waits for it.
const spawnDetached = "setsid sh -c 'echo $$ > child.pid; exec sleep 60' >/dev/null 2>&1 < /dev/null & until [ -s child.pid ]; do sleep 0.01; done"

func TestRunCommandKillsDetachedChildren(t *testing.T) {
	t.Run("exit", func(t *testing.T) {
		s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
		wantOK(t, s.run(t, "run_command", map[string]any{"command": spawnDetached}))
		waitDead(t, childPid(t, filepath.Join(s.cwd, "child.pid")))
	})
	t.Run("exit holding the output", func(t *testing.T) {
		s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
		wantOK(t, s.run(t, "run_command", map[string]any{"command": "setsid sh -c 'echo $$ > child.pid; exec sleep 60' & until [ -s child.pid ]; do sleep 0.01; done"}))
		waitDead(t, childPid(t, filepath.Join(s.cwd, "child.pid")))
	})
	t.Run("timeout", func(t *testing.T) {
		s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
		wantError(t, s.run(t, "run_command", map[string]any{"command": spawnDetached + "; sleep 60", "timeoutMs": 500}), "CommandTimeoutError", "COMMAND_TIMEOUT")
		waitDead(t, childPid(t, filepath.Join(s.cwd, "child.pid")))
	})
	t.Run("cancel", func(t *testing.T) {
		s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pidc := make(chan int, 1)
		go func() { pidc <- childPid(t, filepath.Join(s.cwd, "child.pid")); cancel() }()
		wantError(t, s.runCtx(t, ctx, "run_command", map[string]any{"command": spawnDetached + "; sleep 60"}), "AbortError", "ABORTED")
		waitDead(t, <-pidc)
	})
	t.Run("grandchild of a detached child", func(t *testing.T) {
		s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
		wantOK(t, s.run(t, "run_command", map[string]any{"command": "setsid sh -c 'sleep 60 & echo $! > child.pid; wait' >/dev/null 2>&1 & until [ -s child.pid ]; do sleep 0.01; done"}))
		waitDead(t, childPid(t, filepath.Join(s.cwd, "child.pid")))
	})
}

// A command's own timeout fires before the time its call has left runs
// out, keeping a reserve to store the result: timeoutMs is bounded by it.
func TestRunCommandTimeoutWithinTheCallsDeadline(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	res := s.runCtx(t, ctx, "run_command", map[string]any{"command": "echo started; sleep 3600", "timeoutMs": 3600000})
	text := wantError(t, res, "CommandTimeoutError", "COMMAND_TIMEOUT")
	if !strings.HasPrefix(text, "started\nError: the command timed out after ") ||
		!strings.HasSuffix(text, " (the most the tool call's time limit allows) and was killed") {
		t.Errorf("text %q", text)
	}
	if ctx.Err() != nil {
		t.Errorf("the call's deadline passed before the command timed out")
	}
	m := metaOf(t, res)
	if ms, _ := m["timeoutMs"].(float64); m["timedOut"] != true || ms <= 0 || ms > 6000 {
		t.Errorf("meta %v: want a timeout of at most 6000ms (8s less a quarter)", m)
	}
	// Without a deadline, or with time enough, the timeout asked for holds.
	res = s.run(t, "run_command", map[string]any{"command": "sleep 30", "timeoutMs": 200})
	if text := wantError(t, res, "CommandTimeoutError", "COMMAND_TIMEOUT"); text != "Error: the command timed out after 200ms and was killed" {
		t.Errorf("text %q", text)
	}
	if m := metaOf(t, res); m["timeoutMs"] != 200.0 {
		t.Errorf("meta %v", m)
	}
}

// The cap is exact: an output of cap bytes is whole, one more is truncated.
func TestRunCommandOutputCapBoundary(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true, MaxOutputBytes: 100})
	for _, n := range []int{99, 100, 101} {
		res := s.run(t, "run_command", map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", n)})
		text := wantOK(t, res)
		m := metaOf(t, res)
		want := strings.Repeat("x", min(n, 100)) + "\n[exit code: 0]"
		if n > 100 {
			want = strings.Repeat("x", 100) + "\n[output truncated: 101 bytes in all, the first 100 shown]\n[exit code: 0]"
			if m["truncated"] != true {
				t.Errorf("%d bytes: meta %v, want truncated", n, m)
			}
		} else if _, ok := m["truncated"]; ok {
			t.Errorf("%d bytes: meta %v, want not truncated", n, m)
		}
		if text != want {
			t.Errorf("%d bytes: text %q", n, text)
		}
		if m["outputBytes"] != float64(n) {
			t.Errorf("%d bytes: meta %v", n, m)
		}
	}
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
