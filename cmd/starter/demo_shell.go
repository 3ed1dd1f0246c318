package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/procgroup"
)

// The demo kills a worker while its run_command call runs. Which moment
// that is is a condition, not a time: the command's shell (run_command runs
// `sh -c <command>`, tool/builtin_command.go) is among the worker's child
// processes. The demo watches for it in /proc and kills the worker as soon
// as it is there, so the kill lands while the command runs however late the
// turn's watch sees the call on a loaded machine; after the turn it waits
// for that shell to exit before it reads what the command wrote. Where
// there is no /proc the demo falls back to fixed pauses.

// shellWatch kills a worker once the shell of a run_command call runs
// under it, and starts the next worker.
type shellWatch struct {
	cancel context.CancelFunc
	// done is closed when the watch ended; then shell is the pid of the
	// shell that was running when the worker was killed (0: the watch
	// ended without seeing one), next the worker started after it and err
	// why none was.
	done  chan struct{}
	shell int
	next  *procgroup.Process
	err   error
}

// procSupported reports whether this system has the /proc the shell watch
// reads.
func procSupported() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// watchShell starts watching worker's children: when a `sh -c` child
// appears it kills worker and starts the next one with launch. It ends
// early when worker exits or ctx ends.
func watchShell(ctx context.Context, worker *procgroup.Process, launch func() (*procgroup.Process, error)) *shellWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &shellWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			if pid := shellChild(worker.Pid()); pid != 0 {
				worker.Kill()
				w.shell = pid
				w.next, w.err = launch()
				return
			}
			select {
			case <-ctx.Done():
				w.err = ctx.Err()
				return
			case <-worker.Exited():
				w.err = fmt.Errorf("demo: worker (pid %d) exited before a run_command shell was seen under it", worker.Pid())
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

// result waits for the watch and returns the worker it started.
func (w *shellWatch) result(ctx context.Context) (*procgroup.Process, error) {
	select {
	case <-w.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	next := w.next
	w.next = nil // now the caller's
	return next, w.err
}

// stop ends the watch and stops a worker it started that the caller did
// not take.
func (w *shellWatch) stop() {
	w.cancel()
	<-w.done
	if w.next != nil {
		w.next.Stop(15 * time.Second)
	}
}

// shellChild returns the pid of a child of parent running `sh -c ...`, or 0.
func shellChild(parent int) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, _, ok := procStat(pid)
		if !ok || ppid != parent {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.HasPrefix(cmdline, []byte("sh\x00-c\x00")) {
			return pid
		}
	}
	return 0
}

// procStat reads the parent pid and the state of pid from /proc/<pid>/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+4 > len(b) {
		return 0, 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, 0, false
	}
	return ppid, fields[0][0], true
}

// awaitExit waits until pid has exited (no such process, or a zombie: an
// orphan's new parent may not reap it), up to limit; false when it still
// runs then.
func awaitExit(ctx context.Context, pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		_, state, ok := procStat(pid)
		if !ok {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			if errors.Is(err, fs.ErrNotExist) {
				return true
			}
		} else if state == 'Z' || state == 'X' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
