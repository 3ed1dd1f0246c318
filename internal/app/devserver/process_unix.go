//go:build !windows

package devserver

import "os"

// interrupt asks the server to shut down cleanly.
func interrupt(p *os.Process) error { return p.Signal(os.Interrupt) }
