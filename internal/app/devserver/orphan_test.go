//go:build linux

package devserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/stretchr/testify/require"
)

// holdServerEnv makes the test binary start a server on the port it names,
// print the server's pid and block (holdServer).
const holdServerEnv = "SESSIONFLOW_TEST_HOLD_DEVSERVER"

func init() {
	if os.Getenv(holdServerEnv) != "" {
		// The test binary re-executed to hold a server.
		holdServer()
	}
}

// holdServer starts a dev server through startProcess with its output on
// /dev/null (no pipe, so no broken pipe can end it either), waits until it
// answers, prints "pid <n>" and blocks until killed.
func holdServer() {
	port := os.Getenv(holdServerEnv)
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err == nil {
		var p *process
		p, err = startProcess(os.Getenv("TEMPORAL_CLI"), []string{"server", "start-dev", "--ip", "127.0.0.1", "--port", port, "--headless", "--log-level", "never"}, devNull)
		if err == nil {
			var c client.Client
			c, err = awaitReady(context.Background(), p, client.Options{HostPort: net.JoinHostPort("127.0.0.1", port), Namespace: "default"},
				5*time.Minute, func() string { return "" })
			if err == nil {
				c.Close()
				fmt.Printf("pid %d\n", p.cmd.Process.Pid)
				select {}
			}
		}
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// alive reports whether pid exists with a thread that has not exited: a
// zombie thread-group leader can outlive its other threads, which still hold
// the process's files.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ppid ...: comm may hold spaces; the thread count is
	// the 20th field, the 18th after the state.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 17 && (fields[0] != "Z" || fields[17] != "1")
}

// A process killed with SIGKILL takes its dev server with it: the server's
// process is gone, the port is free again and a new server starts on it.
func TestServerDiesWithItsKilledParent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), holdServerEnv+"="+strconv.Itoa(port), "TEMPORAL_CLI="+cliPath)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	server, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	require.NoError(t, err, "line %q", line)
	t.Cleanup(func() {
		if alive(server) {
			_ = syscall.Kill(server, syscall.SIGKILL)
		}
	})
	require.True(t, alive(server))

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	deadline := time.Now().Add(time.Minute) // a server's exit on a loaded machine
	for alive(server) {
		require.True(t, time.Now().Before(deadline), "the dev server (pid %d) outlived its killed parent", server)
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, checkPortFree("127.0.0.1", port, "frontend"))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{CLIPath: cliPath, Ephemeral: true, Port: port})
	require.NoError(t, err, "a new server on the freed port")
	require.NoError(t, s.Stop())
}
