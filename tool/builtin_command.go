package tool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sessionflow/sessionflow/tool/sandbox"
)

// commandWaitDelay bounds how long run_command waits for the output pipes
// after the shell exited or was killed (a detached grandchild may hold them).
const commandWaitDelay = 2 * time.Second

// maxCommandTimeout bounds timeoutMs. A call's timeout is also bounded by
// the time its tool activity has left (see commandTimeout).
const maxCommandTimeout = time.Hour

// commandReserve is the most of the tool activity's time left that
// run_command keeps for storing the result after a timeout; a shorter time
// left keeps a quarter of it (D70).
const commandReserve = 15 * time.Second

// callEnv names the environment variable that marks every process a
// run_command call starts, with a value of its own, so that the processes
// that left its process group (setsid, double fork) are found and killed
// when the call ends (D70).
const callEnv = "SESSIONFLOW_TOOL_CALL"

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
    "timeoutMs": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Timeout in milliseconds (default: the worker's command timeout); never longer than the tool call's own time limit allows."},
    %s
  },
  "required": ["command"],
  "additionalProperties": false
}`, maxCommandTimeout.Milliseconds(), escalationProperties)

type runCommandArgs struct {
	Command   string `json:"command"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// runCommandMeta is run_command's result Meta.
type runCommandMeta struct {
	ExitCode    int          `json:"exitCode"`
	TimeoutMs   int64        `json:"timeoutMs"`
	TimedOut    bool         `json:"timedOut,omitempty"`
	Aborted     bool         `json:"aborted,omitempty"`
	OutputBytes int64        `json:"outputBytes"`
	Truncated   bool         `json:"truncated,omitempty"`
	Sandbox     *sandboxMeta `json:"sandbox,omitempty"`
}

// sandboxMeta is the sandbox a command ran under.
type sandboxMeta struct {
	Mode string `json:"mode"`
	// Network: TCP was allowed (confined modes).
	Network bool `json:"network,omitempty"`
	// Denied: the command failed with a denial's text (a guess, as the
	// harness's; denialSignatures).
	Denied bool `json:"denied,omitempty"`
}

// denialSignatures are the texts a confined command's failure shows when
// the sandbox denied it: Landlock's EACCES (a file, a TCP socket), EXDEV
// (a link or rename out of the writable roots) and EPERM (a signal out of
// the sandbox), a read-only bind's EROFS.
var denialSignatures = []string{"permission denied", "invalid cross-device link", "operation not permitted", "read-only file system"}

// denialMarker is the line a denied command's result gets, the harness's.
func denialMarker(mode sandbox.Mode) string {
	return fmt.Sprintf("[sandbox: file access denied under %s mode]", mode)
}

// escalationHint is the line that follows the denial marker of a tool that
// offers escalation, the harness's escalationHintMarker: subject is the
// denied action's noun ("command" for run_command).
func escalationHint(subject string) string {
	return "[sandbox: escalation available — retry this exact " + subject +
		" once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
}

func runCommandTool(opts BuiltinOptions, deny denyList) Tool {
	return Tool{
		Name: RunCommandName,
		Description: fmt.Sprintf("Run a shell command (sh -c) in the working directory and return its combined stdout and stderr "+
			"(capped at %d bytes) and exit code. Default timeout %s. Every process it starts is killed when the call ends. "+
			"Commands run under the session's sandbox mode: in workspace-write they write only under the working directory and $TMPDIR, "+
			"in read-only nowhere, and without network unless the session allows it; a blocked operation is reported as "+
			"[sandbox: file access denied under <mode> mode], a policy denial, not a bug in the command.", opts.MaxOutputBytes, opts.CommandTimeout),
		Schema:     []byte(runCommandSchema),
		Parallel:   false,
		Idempotent: false,
		Approval:   true,
		Escalates:  true,
		Run: func(ctx context.Context, call Call) (Result, error) {
			var a runCommandArgs
			if err := decodeArgs(call, &a); err != nil {
				return Result{}, err
			}
			if call.Cwd != "" {
				if err := deny.check(call.Cwd, ".", call.Cwd); err != nil {
					return Result{}, err
				}
			}
			timeout := opts.CommandTimeout
			if a.TimeoutMs > 0 {
				timeout = min(time.Duration(a.TimeoutMs)*time.Millisecond, maxCommandTimeout)
			}
			timeout, limited := commandTimeout(ctx, timeout)
			mode, err := opts.sandboxMode(call)
			if err != nil {
				return Result{}, err
			}
			box := commandBox{sandbox: opts.Sandbox, policy: sandbox.Policy{Mode: mode, Network: call.NetworkAccess, Workspace: call.Cwd, Protect: deny.paths}}
			return runCommand(ctx, call.Cwd, a.Command, timeout, limited, opts.MaxOutputBytes, box)
		},
	}
}

// commandBox is the sandbox a command runs in.
type commandBox struct {
	sandbox sandbox.Sandbox
	policy  sandbox.Policy
}

// meta returns the sandbox's part of the result's Meta.
func (b commandBox) meta(denied bool) *sandboxMeta {
	m := &sandboxMeta{Mode: string(b.policy.Mode), Denied: denied}
	if b.policy.Mode.Confined() {
		m.Network = b.policy.Network
	}
	return m
}

// start starts cmd: in a confined mode through the sandbox (an
// *UnavailableError when it cannot be enforced), otherwise in a process
// group of its own. The *Run it returns (nil outside the sandbox) is
// closed when the command's processes are gone.
func (b commandBox) start(cmd *exec.Cmd) (*sandbox.Run, error) {
	if b.policy.Mode.Confined() {
		return b.sandbox.Start(cmd, b.policy)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return nil, cmd.Start()
}

// commandTimeout bounds the timeout asked for by the time ctx has left,
// less a reserve for storing the result, so that a command's own timeout
// fires before its tool activity's (D70). limited reports that it did.
func commandTimeout(ctx context.Context, asked time.Duration) (timeout time.Duration, limited bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return asked, false
	}
	left := time.Until(deadline)
	allowed := left - min(commandReserve, left/4)
	if allowed >= asked {
		return asked, false
	}
	return max(allowed, 0), true
}

// runCommand runs command with sh -c in cwd, in its own process group and
// marked by callEnv; when it ends, times out or is cancelled, the group
// and every process carrying its mark are killed. A timeout, a
// cancellation (ABORTED, with the output so far) or a non-zero exit is an
// IsError result; a done ctx whose deadline passed returns ctx's error.
func runCommand(ctx context.Context, cwd, command string, timeout time.Duration, limited bool, maxBytes int, box commandBox) (Result, error) {
	if cwd == "" {
		return Result{}, fmt.Errorf("%w: this session has no working directory to run commands in", ErrOutsideCwd)
	}
	if info, err := os.Stat(cwd); err != nil {
		return Result{}, fmt.Errorf("the working directory %q is unusable: %w", cwd, err)
	} else if !info.IsDir() {
		return Result{}, fmt.Errorf("the working directory %q is not a directory", cwd)
	}
	mark, err := callMark()
	if err != nil {
		return Result{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "sh", "-c", command)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), callEnv+"="+mark)
	cmd.Cancel = func() error {
		// The negative pid names the process group the shell leads; the
		// processes that left it carry the mark.
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		killMarked(callEnv, mark)
		return err
	}
	cmd.WaitDelay = commandWaitDelay
	out := &cappedBuffer{max: maxBytes}
	cmd.Stdout, cmd.Stderr = out, out

	run, runErr := box.start(cmd)
	if errors.Is(runErr, sandbox.ErrUnavailable) {
		res := errorResultf(NameSandboxUnavailable, CodeSandboxUnavailable, "%v", runErr)
		res.Meta = meta(runCommandMeta{ExitCode: -1, TimeoutMs: timeout.Milliseconds(), Sandbox: box.meta(false)})
		return res, nil
	}
	if runErr == nil {
		runErr = cmd.Wait()
	}
	if cmd.Process != nil {
		// Kill what the shell left behind in its group (background jobs)
		// or outside it; ESRCH when the group is already gone.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	killMarked(callEnv, mark)
	if err := run.Close(); err != nil {
		slog.WarnContext(ctx, "removing a command's temporary directory", "error", err)
	}
	aborted := false
	if ctxErr := ctx.Err(); ctxErr != nil && runErr != nil {
		// The call was cancelled while the command ran: it was killed.
		if !errors.Is(ctxErr, context.Canceled) {
			return Result{}, fmt.Errorf("command cancelled: %w", ctxErr)
		}
		aborted = true
	}
	timedOut := !aborted && errors.Is(runCtx.Err(), context.DeadlineExceeded)
	exitCode := -1
	if cmd.ProcessState != nil {
		exitCode = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	if runErr != nil && !timedOut && !aborted && !errors.As(runErr, &exitErr) && !errors.Is(runErr, exec.ErrWaitDelay) {
		return Result{}, fmt.Errorf("running the command: %w", runErr)
	}

	text, total, truncated := out.text()
	if text != "" && text[len(text)-1] != '\n' {
		text += "\n"
	}
	if truncated {
		text += fmt.Sprintf("[output truncated: %d bytes in all, the first %d shown]\n", total, maxBytes)
	}
	denied := box.policy.Mode.Confined() && exitCode != 0 && !timedOut && !aborted && deniedText(text)
	m := meta(runCommandMeta{ExitCode: exitCode, TimeoutMs: timeout.Milliseconds(), TimedOut: timedOut, Aborted: aborted,
		OutputBytes: total, Truncated: truncated, Sandbox: box.meta(denied)})
	if denied {
		// run_command always offers escalation (its schema's
		// sandbox_permissions), so the hint rides every denial, before
		// the exit marker, as the harness's bash tool renders it.
		text += denialMarker(box.policy.Mode) + "\n" + escalationHint("command") + "\n"
	}
	switch {
	case aborted:
		res := ErrorResult(NameAborted, CodeAborted, text+"Error: the tool call was cancelled and the command was killed")
		res.Meta = m
		return res, nil
	case timedOut:
		limit := ""
		if limited {
			limit = " (the most the tool call's time limit allows)"
		}
		res := ErrorResult(NameCommandTimeout, CodeCommandTimeout,
			text+fmt.Sprintf("Error: the command timed out after %s%s and was killed", timeout, limit))
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

// deniedText reports whether a failed command's output shows a denial.
func deniedText(text string) bool {
	lower := strings.ToLower(text)
	for _, sig := range denialSignatures {
		if strings.Contains(lower, sig) {
			return true
		}
	}
	return false
}

// callMark returns a value of callEnv no other call shares.
func callMark() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("marking the command's processes: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
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
