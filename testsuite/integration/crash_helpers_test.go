package integration

// Worker processes for the crash tests: the worker command and the crash
// worker (the worker plus a slow idempotent tool) run as real processes
// against the package's server, each in its own process group, so a test
// can SIGKILL one mid-stream or mid-tool as a machine crash would.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/internal/app/readiness"
	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
	"github.com/sessionflow/sessionflow/wire"
)

// binaries are the worker binaries built once for the package's crash
// tests, in binDir (removed after the tests).
var binaries struct {
	once                sync.Once
	dir                 string
	worker, crashworker string
	err                 error
}

// workerBinaries builds ./worker and testsuite/internal/crashworker once.
func workerBinaries(t *testing.T) (worker, crashworker string) {
	t.Helper()
	binaries.once.Do(func() {
		dir, err := os.MkdirTemp("", "sessionflow-crash-")
		if err != nil {
			binaries.err = err
			return
		}
		binaries.dir = dir
		binaries.worker, binaries.crashworker = filepath.Join(dir, "worker"), filepath.Join(dir, "crashworker")
		for out, pkg := range map[string]string{binaries.worker: "../../worker", binaries.crashworker: "../internal/crashworker"} {
			var stderr bytes.Buffer
			cmd := exec.Command("go", "build", "-o", out, pkg)
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				binaries.err = fmt.Errorf("go build %s: %w: %s", pkg, err, stderr.String())
				return
			}
		}
	})
	require.NoError(t, binaries.err)
	return binaries.worker, binaries.crashworker
}

// removeBinaries removes the built binaries.
func removeBinaries() {
	if binaries.dir != "" {
		_ = os.RemoveAll(binaries.dir)
	}
}

// lockedBuffer collects a process's output for the test to read.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// workerProc is a worker process of a world.
type workerProc struct {
	cmd      *exec.Cmd
	identity string
	exited   chan struct{}
	out      *lockedBuffer
}

var procCount atomic.Int64

// startProc runs bin as the world's worker (its task queue, store root and
// compression, against the package's server) with the given extra flags,
// and waits until it polls the task queue. A short sticky timeout lets
// another worker take the workflow's tasks soon after a kill. The process
// is killed when the test ends.
func (w *world) startProc(bin string, extra ...string) *workerProc {
	w.t.Helper()
	p := &workerProc{identity: fmt.Sprintf("crash-worker-%d", procCount.Add(1)), exited: make(chan struct{}), out: &lockedBuffer{}}
	args := append([]string{
		"--" + temporalconn.FlagAddress, shared.address, "--" + temporalconn.FlagNamespace, shared.namespace,
		"--store-root", w.root, "--compression", string(w.comp), "--task-queue", w.taskQueue,
		"--metrics-address", "", "--identity", p.identity, "--sticky-timeout", "1s", "--stop-timeout", "1s",
	}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(w.t, p.cmd.Start())
	var exitErr error
	go func() {
		exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	w.t.Cleanup(p.kill)
	err := readiness.Wait(w.ctx(), readiness.Options{
		What:    "worker process " + p.identity,
		Exited:  p.exited,
		ExitErr: func() error { return exitErr },
		Log:     p.out.String,
	}, readiness.TaskQueuePolled(w.c, w.taskQueue, p.identity))
	require.NoError(w.t, err)
	return p
}

// kill sends SIGKILL to the process group and waits for the worker to exit.
func (p *workerProc) kill() {
	if p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
	}
}

// writeScript writes a provider script into a fresh directory and returns
// its path.
func writeScript(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(path, []byte(script), 0o644))
	return path
}

// attemptsOf returns, for each activity of type name scheduled in hist, in
// schedule order, the attempt that completed it (0 while none did).
func attemptsOf(hist *historypb.History, name string) []int32 {
	index := map[int64]int{}
	var out []int32
	for _, e := range hist.Events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			index[e.GetEventId()] = len(out)
			out = append(out, 0)
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			if i, ok := index[a.GetScheduledEventId()]; ok {
				out[i] = a.GetAttempt()
			}
		}
	}
	return out
}

// startTurn creates the session of req, waits until it is live and sends
// a Followup of text (message id "m1").
func (w *world) startTurn(req wire.CreateSessionRequest, text string) (client.WorkflowRun, wire.InputResult) {
	w.t.Helper()
	run := w.create(req)
	w.awaitLive(req.SessionID)
	b, err := json.Marshal(text)
	require.NoError(w.t, err)
	in, err := w.client().Followup(w.ctx(), req.SessionID, wire.InputRequest{MessageID: "m1", Content: b})
	require.NoError(w.t, err)
	return run, in
}

// awaitCtx polls cond every 50 ms until it holds or ctx ends.
func awaitCtx(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}
