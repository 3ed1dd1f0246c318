// Package procgroup runs a child process in a process group of its own, so
// that a signal reaches the processes it starts as well.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring (internal/app). It may import any package below the
// client's row, the client and the other program-wiring packages; only
// programs and tests import it.
package procgroup

import (
	"os/exec"
	"syscall"
	"time"
)

// Process is a started process leading its own process group.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start starts cmd in a new process group and waits for it in the
// background; onExit, when not nil, runs once it has exited, before Exited
// is closed.
func Start(cmd *exec.Cmd, onExit func()) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if onExit != nil {
			onExit()
		}
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's id, which is also its group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is how the process exited (exec.Cmd.Wait's error); read it only once
// Exited is closed.
func (p *Process) Err() error { return p.err }

// Kill sends SIGKILL to the process group and waits for the process.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.exited
}

// Stop sends SIGTERM to the process group and waits for the process; after
// grace it kills the group.
func (p *Process) Stop(grace time.Duration) {
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.Kill()
	}
}
