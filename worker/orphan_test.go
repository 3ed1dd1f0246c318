//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// workerProcess is `worker` run as a real process.
type workerProcess struct {
	cmd     *exec.Cmd
	address chan string
	stderr  *syncBuffer
}

// startWorkerProcess runs the worker command as a child process and waits
// until it prints its dev server's address.
func startWorkerProcess(t *testing.T, args ...string) *workerProcess {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), runWorkerEnv+"=1")
	cmd.Env = append(cmd.Env, isolatedEnv(t)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	w := &workerProcess{cmd: cmd, address: make(chan string, 1), stderr: newSyncBuffer()}
	cmd.Stderr = w.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Temporal dev server: "); ok {
				w.address <- strings.Fields(rest)[0]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-w.address:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the worker printed no dev server address; stderr:\n%s", w.stderr.String())
	}
	return w
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after
		// its closing parenthesis.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether pid exists with a thread that has not exited (a
// zombie thread-group leader can outlive its other threads).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 17 && (fields[0] != "Z" || fields[17] != "1")
}

// A worker killed with SIGKILL takes its dev server with it: the server's
// process is gone, its port is free, and the next `worker --dev` on the same
// port starts.
func TestDevServerDiesWithAKilledWorker(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	dir := t.TempDir()
	args := []string{
		"--dev", "--dev-ephemeral", "--dev-dir", filepath.Join(dir, "dev"),
		"--dev-port", strconv.Itoa(port), "--dev-ui-port", "0",
		"--store-root", filepath.Join(dir, "store"), "--metrics-address", "",
	}

	first := startWorkerProcess(t, args...)
	servers := childrenOf(t, first.cmd.Process.Pid)
	require.Len(t, servers, 1, "the worker runs one dev server")
	server := servers[0]
	t.Cleanup(func() {
		// A planted regression must not leave the orphan behind.
		if alive(server) {
			_ = syscall.Kill(server, syscall.SIGKILL)
		}
	})

	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	_ = first.cmd.Wait()
	// (internal/app/devserver's TestServerDiesWithItsKilledParent pins the
	// parent-death signal itself, with a server that cannot die of a
	// broken output pipe.)
	deadline := time.Now().Add(time.Minute) // a server's exit on a loaded machine
	for alive(server) {
		require.True(t, time.Now().Before(deadline), "the dev server (pid %d) outlived its killed worker", server)
		time.Sleep(20 * time.Millisecond)
	}
	deadline = time.Now().Add(time.Minute)
	var free net.Listener
	for {
		free, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err, "the frontend port is still held")
	require.NoError(t, free.Close())

	second := startWorkerProcess(t, args...)
	second.stderr.waitFor(t, "worker started", nil)
	require.NoError(t, second.cmd.Process.Signal(os.Interrupt))
	require.NoError(t, second.cmd.Wait(), second.stderr.String())
}
