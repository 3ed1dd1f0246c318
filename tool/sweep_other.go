//go:build !linux

package tool

// killMarked is Linux-only: elsewhere a process that left the command's
// process group is not tracked (D70).
func killMarked(name, value string) {}
