//go:build !linux

package sandbox

import "os/exec"

// supported reports that this OS has no Landlock.
const supported = false

// kernelABI is 0: there is no Landlock here.
func kernelABI() int { return 0 }

// Run is a confined command Start started.
type Run struct{}

// Close does nothing here.
func (r *Run) Close() error { return nil }

// Start refuses every confined mode here: only Linux has Landlock.
func (s Sandbox) Start(cmd *exec.Cmd, p Policy) (*Run, error) {
	return nil, &UnavailableError{Mode: p.Mode, Detail: "Landlock is a Linux facility and this is not Linux"}
}
