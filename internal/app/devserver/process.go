package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/internal/app/readiness"
)

// process is a running `temporal server start-dev`.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	// waitErr is the exit status; it is set before exited is closed.
	waitErr error
}

// serverArgs are the arguments of `temporal server start-dev` for a server
// on host:port serving ns.
func serverArgs(host, port, ns, logLevel, dbFile string, ui bool, uiPort string, extra []string) []string {
	args := []string{
		"server", "start-dev",
		"--ip", host, "--port", port,
		"--namespace", ns,
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
		"--log-level", logLevel,
	}
	if !ui {
		args = append(args, "--headless")
	}
	if dbFile != "" {
		args = append(args, "--db-filename", dbFile)
	}
	if uiPort != "" {
		args = append(args, "--ui-port", uiPort)
	}
	return append(args, extra...)
}

// startProcess runs the CLI at path with args, its stdout and stderr going
// to out. The process is waited for in the background; exited is closed
// when it ends.
//
// On Linux the server gets a parent-death signal (setProcessAttributes), so
// a process killed with SIGKILL takes its dev server with it instead of
// leaving it behind, re-parented to init and holding the port. The kernel
// sends that signal when the thread that forked the child exits, not the
// process, so the child is started from a goroutine locked to its OS thread
// that stays there, waiting for the child, until the child has exited: no
// other goroutine can end that thread early.
func startProcess(path string, args []string, out io.Writer) (*process, error) {
	p := &process{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(path, args...)
		cmd.Stdout, cmd.Stderr = out, out
		setProcessAttributes(cmd)
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		p.cmd = cmd
		started <- nil
		p.waitErr = cmd.Wait()
		// The child is gone: its parent-death signal no longer matters.
		runtime.UnlockOSThread()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// exitErr returns the exit status; call it only after exited is closed.
func (p *process) exitErr() error { return p.waitErr }

// stop interrupts the server and waits for it to exit. A server that had
// already exited (it shares the terminal's process group, so Ctrl-C reaches
// it directly) has nothing left to stop, and its status is not an error.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := interrupt(p.cmd.Process); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = p.cmd.Process.Kill()
	}
	<-p.exited
	return p.waitErr
}

// kill ends the server at once and waits for it; for a start that failed.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// readyProbeTimeout bounds one readiness probe, so that a probe stuck on a
// half-started server is retried rather than waited on.
const readyProbeTimeout = 10 * time.Second

// awaitReady waits until the server at opts.HostPort answers the health
// check and serves its namespace, and returns a client connected to it. It
// fails at once when the process exits and otherwise after timeout; the
// error carries the server's output from log.
func awaitReady(ctx context.Context, p *process, opts client.Options, timeout time.Duration, log func() string) (client.Client, error) {
	var c client.Client
	err := readiness.Wait(ctx, readiness.Options{
		What:    "the Temporal dev server",
		Timeout: timeout,
		Exited:  p.exited,
		ExitErr: p.exitErr,
		Log:     log,
	}, func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
		defer cancel()
		// DialContext runs the gRPC health check.
		dialed, err := client.DialContext(pctx, opts)
		if err != nil {
			return err
		}
		if _, err := dialed.WorkflowService().DescribeNamespace(pctx, &workflowservice.DescribeNamespaceRequest{Namespace: opts.Namespace}); err != nil {
			dialed.Close()
			return fmt.Errorf("describing namespace %s: %w", opts.Namespace, err)
		}
		c = dialed
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}
