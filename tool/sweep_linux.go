package tool

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// killMarked kills every process whose environment holds name=value: the
// processes a run_command call started that left its process group
// (setsid, a double fork). It scans /proc until a pass finds none, so a
// process forked by one being killed is found by the next pass; a zombie
// has no environment left and is not matched. A process that cleared or
// rewrote its environment, or runs as another user, is not found (D70).
func killMarked(name, value string) {
	needle := []byte(name + "=" + value + "\x00")
	wait := time.Millisecond
	for range 50 {
		pids := marked(needle)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// marked returns the processes whose environment holds needle.
func marked(needle []byte) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	self := os.Getpid()
	var pids []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + n + "/environ")
		if err != nil {
			continue
		}
		if bytes.HasPrefix(env, needle) || bytes.Contains(env, append([]byte{0}, needle...)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
