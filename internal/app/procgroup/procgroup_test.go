package procgroup

import (
	"errors"
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

// startWithChild starts script under sh, which writes the pid of a background
// child to a file, and returns the process and that child's pid.
func startWithChild(t *testing.T, script string) (*Process, int) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "child")
	p, err := Start(exec.Command("sh", "-c", script, "sh", pidFile), nil)
	require.NoError(t, err)
	var child int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	return p, child
}

// gone reports whether pid no longer runs (reaped or a zombie whose parent
// is gone).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestKillEndsTheWholeGroup(t *testing.T) {
	p, child := startWithChild(t, `sleep 60 & echo $! > "$1"; wait`)
	p.Kill()
	select {
	case <-p.Exited():
	default:
		t.Fatal("Kill returned before the process exited")
	}
	var ee *exec.ExitError
	require.ErrorAs(t, p.Err(), &ee)
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
	require.Eventually(t, func() bool { return gone(child) }, 10*time.Second, 10*time.Millisecond,
		"the child of the killed process still runs")
}

func TestStopKillsAfterTheGraceWhenSIGTERMIsIgnored(t *testing.T) {
	p, _ := startWithChild(t, `trap '' TERM; echo $$ > "$1"; while :; do sleep 0.05; done`)
	t0 := time.Now()
	p.Stop(300 * time.Millisecond)
	require.GreaterOrEqual(t, time.Since(t0), 300*time.Millisecond)
	var ee *exec.ExitError
	require.ErrorAs(t, p.Err(), &ee)
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
}

func TestStopEndsAProcessThatHonoursSIGTERM(t *testing.T) {
	p, _ := startWithChild(t, `echo $$ > "$1"; exec sleep 60`)
	p.Stop(time.Minute)
	var ee *exec.ExitError
	require.ErrorAs(t, p.Err(), &ee)
	require.Equal(t, syscall.SIGTERM, ee.Sys().(syscall.WaitStatus).Signal())
}

func TestOnExitRunsBeforeExitedCloses(t *testing.T) {
	ran := false
	p, err := Start(exec.Command("sh", "-c", "exit 3"), func() { ran = true })
	require.NoError(t, err)
	<-p.Exited()
	require.True(t, ran)
	var ee *exec.ExitError
	require.ErrorAs(t, p.Err(), &ee)
	require.Equal(t, 3, ee.ExitCode())
}

func TestStartFailsForAMissingBinary(t *testing.T) {
	_, err := Start(exec.Command(filepath.Join(t.TempDir(), "missing")), nil)
	require.ErrorIs(t, err, os.ErrNotExist)
}
