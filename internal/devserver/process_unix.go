//go:build !windows

package devserver

import (
	"os"
	"os/exec"
)

// setProcessAttributes prepares the server's command before it starts.
func setProcessAttributes(*exec.Cmd) {}

// interrupt asks the server to shut down cleanly.
func interrupt(p *os.Process) error { return p.Signal(os.Interrupt) }
