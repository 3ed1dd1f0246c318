//go:build !windows && !linux

package devserver

import "os/exec"

// setProcessAttributes prepares the server's command before it starts;
// only Linux has a parent-death signal.
func setProcessAttributes(*exec.Cmd) {}
