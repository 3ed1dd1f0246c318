package devserver

import (
	"os/exec"
	"syscall"
)

// setProcessAttributes makes the server die with the thread that started
// it (see startProcess).
func setProcessAttributes(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
