package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/toolbuild"
)

// proc is a child process of the launcher: in a process group of its own,
// its output appended to a log file, and killed by the kernel when the
// launcher dies (a parent-death signal), so a launcher killed with SIGKILL
// leaves no database, server or worker behind.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error
}

// startProc starts cmd, appending its output to logPath. The kernel sends
// the parent-death signal when the thread that forked the child exits, not
// the process, so the child is started from a goroutine locked to its OS
// thread that stays there, waiting for the child, until the child exits.
func startProc(name string, cmd *exec.Cmd, logPath string, cred *syscall.Credential) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	fmt.Fprintf(logf, "=== %s %s: %v\n", time.Now().UTC().Format(time.RFC3339), name, cmd.Args)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	p := &proc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		runtime.UnlockOSThread()
		logf.Close()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return p, nil
}

// Pid is the process id, also its process group's.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *proc) Exited() <-chan struct{} { return p.exited }

// Err is the exit status; read it once Exited is closed.
func (p *proc) Err() error { return p.err }

// running reports whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// log returns the process's log file.
func (p *proc) log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.logPath, err)
	}
	return string(toolbuild.Tail(b, 16<<10))
}

// kill sends SIGKILL to the process group and waits for the process.
func (p *proc) kill() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.exited
}

// stop sends sig to the process and waits for it; after grace it kills the
// group. It returns the exit status unless the process was killed or had
// already exited.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) error {
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.kill()
		return nil
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(grace):
		p.kill()
		return fmt.Errorf("%s did not stop within %v of %v and was killed", p.name, grace, sig)
	}
}
