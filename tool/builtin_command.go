package tool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// commandWaitDelay bounds how long run_command waits for the output pipes
// after the shell exited or was killed (a detached grandchild may hold them).
const commandWaitDelay = 2 * time.Second

// maxCommandTimeout bounds timeoutMs.
const maxCommandTimeout = time.Hour

// Codes and names of run_command's failures.
const (
	// CodeCommandFailed: the command exited with a non-zero status.
	CodeCommandFailed = "COMMAND_FAILED"
	// CodeCommandTimeout: the command ran past its timeout and was killed.
	CodeCommandTimeout = "COMMAND_TIMEOUT"
	// NameCommandFailed and NameCommandTimeout are their ErrorInfo names.
	NameCommandFailed  = "CommandFailedError"
	NameCommandTimeout = "CommandTimeoutError"
)

var runCommandSchema = fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "Shell command, run with sh -c in the working directory."},
    "timeoutMs": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Timeout in milliseconds (default: the worker's command timeout)."}
  },
  "required": ["command"],
  "additionalProperties": false
}`, maxCommandTimeout.Milliseconds())

type runCommandArgs struct {
	Command   string `json:"command"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// runCommandMeta is run_command's result Meta.
type runCommandMeta struct {
	ExitCode    int   `json:"exitCode"`
	TimedOut    bool  `json:"timedOut,omitempty"`
	OutputBytes int64 `json:"outputBytes"`
	Truncated   bool  `json:"truncated,omitempty"`
}

func runCommandTool(opts BuiltinOptions) Tool {
	return Tool{
		Name: RunCommandName,
		Description: fmt.Sprintf("Run a shell command (sh -c) in the working directory and return its combined stdout and stderr "+
			"(capped at %d bytes) and exit code. Default timeout %s.", opts.MaxOutputBytes, opts.CommandTimeout),
		Schema:     []byte(runCommandSchema),
		Parallel:   false,
		Idempotent: false,
		Run: func(ctx context.Context, call Call) (Result, error) {
			var a runCommandArgs
			if err := decodeArgs(call, &a); err != nil {
				return Result{}, err
			}
			timeout := opts.CommandTimeout
			if a.TimeoutMs > 0 {
				timeout = min(time.Duration(a.TimeoutMs)*time.Millisecond, maxCommandTimeout)
			}
			return runCommand(ctx, call.Cwd, a.Command, timeout, opts.MaxOutputBytes)
		},
	}
}

// runCommand runs command with sh -c in cwd, in its own process group; on
// timeout or cancellation the whole group is killed. A cancelled ctx returns
// ctx's error; a timeout or a non-zero exit is an IsError result.
func runCommand(ctx context.Context, cwd, command string, timeout time.Duration, maxBytes int) (Result, error) {
	if cwd == "" {
		return Result{}, fmt.Errorf("%w: this session has no working directory to run commands in", ErrOutsideCwd)
	}
	if info, err := os.Stat(cwd); err != nil {
		return Result{}, fmt.Errorf("the working directory %q is unusable: %w", cwd, err)
	} else if !info.IsDir() {
		return Result{}, fmt.Errorf("the working directory %q is not a directory", cwd)
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "sh", "-c", command)
	cmd.Dir = cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The negative pid names the process group the shell leads.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = commandWaitDelay
	out := &cappedBuffer{max: maxBytes}
	cmd.Stdout, cmd.Stderr = out, out

	runErr := cmd.Run()
	if cmd.Process != nil {
		// Kill what the shell left behind in its group (background jobs);
		// ESRCH when the group is already gone.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Result{}, fmt.Errorf("command cancelled: %w", ctxErr)
	}
	timedOut := errors.Is(runCtx.Err(), context.DeadlineExceeded)
	exitCode := -1
	if cmd.ProcessState != nil {
		exitCode = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	if runErr != nil && !timedOut && !errors.As(runErr, &exitErr) && !errors.Is(runErr, exec.ErrWaitDelay) {
		return Result{}, fmt.Errorf("running the command: %w", runErr)
	}

	text, total, truncated := out.text()
	if text != "" && text[len(text)-1] != '\n' {
		text += "\n"
	}
	if truncated {
		text += fmt.Sprintf("[output truncated: %d bytes in all, the first %d shown]\n", total, maxBytes)
	}
	m := meta(runCommandMeta{ExitCode: exitCode, TimedOut: timedOut, OutputBytes: total, Truncated: truncated})
	switch {
	case timedOut:
		res := ErrorResult(NameCommandTimeout, CodeCommandTimeout,
			text+fmt.Sprintf("Error: the command timed out after %s and was killed", timeout))
		res.Meta = m
		return res, nil
	case exitCode != 0:
		res := ErrorResult(NameCommandFailed, CodeCommandFailed, text+fmt.Sprintf("[exit code: %d]", exitCode))
		res.Meta = m
		return res, nil
	}
	res := TextResult(text + "[exit code: 0]")
	res.Meta = m
	return res, nil
}

// cappedBuffer keeps the first max bytes written to it and counts the rest;
// the command's stdout and stderr share it.
type cappedBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// text returns the kept output as valid UTF-8, the total written, and
// whether some was dropped.
func (b *cappedBuffer) text() (string, int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.ToValidUTF8(string(b.buf), "\uFFFD"), b.total, b.total > int64(len(b.buf))
}
