//go:build windows

package devserver

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessAttributes puts the server in its own process group, so that a
// console control event can be sent to it alone.
func setProcessAttributes(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

var generateConsoleCtrlEvent = syscall.NewLazyDLL("kernel32.dll").NewProc("GenerateConsoleCtrlEvent")

// interrupt sends CTRL_BREAK to the server's process group, the Windows
// form of an interrupt.
func interrupt(p *os.Process) error {
	const ctrlBreakEvent = 1
	r, _, err := generateConsoleCtrlEvent.Call(ctrlBreakEvent, uintptr(p.Pid))
	if r == 0 {
		return err
	}
	return nil
}
