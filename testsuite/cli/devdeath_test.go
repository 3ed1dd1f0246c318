//go:build linux

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// devServerOf is the pid of the `temporal server start-dev` child of the
// process pid, read from /proc.
func devServerOf(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "start-dev") {
			return child
		}
	}
	t.Fatalf("process %d has no `temporal server start-dev` child", pid)
	return 0
}

// A `worker --dev` whose embedded server is killed with SIGKILL exits
// non-zero and says why, instead of polling a server that is gone.
func TestDevWorkerExitsWhenItsServerDies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newEnv(t)
	e.startWorker(true)
	worker := e.worker
	server := devServerOf(t, worker.Process.Pid)
	require.NoError(t, syscall.Kill(server, syscall.SIGKILL))

	select {
	case <-e.exited:
	case <-ctx.Done():
		t.Fatalf("the worker still runs after its dev server (pid %d) was killed; its output:\n%s", server, e.workerLog)
	}
	// The wait of startWorker set the status before it closed exited.
	require.NotZero(t, worker.ProcessState.ExitCode(), "the worker exited 0; its output:\n%s", e.workerLog)
	require.Contains(t, e.workerLog.String(),
		fmt.Sprintf("worker: the embedded Temporal dev server exited unexpectedly (pid %d, signal: killed); the worker stops", server))
}
