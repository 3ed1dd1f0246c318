package soak

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/internal/cluster"
	"github.com/sessionflow/sessionflow/internal/devserver"
	"github.com/sessionflow/sessionflow/internal/procgroup"
	"github.com/sessionflow/sessionflow/internal/readiness"
	"github.com/sessionflow/sessionflow/internal/temporalconn"
)

// fleet owns the soak's Temporal server (the dev server or the local
// cluster) and its worker processes: it starts them, kills and restarts
// the workers, and remembers when each was killed.
type fleet struct {
	cfg *Config
	rep *report
	// dir is the run's working directory, root the store's root in it.
	dir, root string
	// bin is the worker binary.
	bin string
	// srv and serverLog are the dev server and its output; lc is the local
	// cluster of a cluster soak (Config.Cluster), nil otherwise.
	srv       *devserver.Server
	serverLog *os.File
	lc        *cluster.Cluster
	// tc is the client the readiness checks poll with, set once connected.
	tc temporalclient.Client
	// script is the workers' provider script (turn sessions only).
	script string

	worker *workerProc
	gen    int

	// killedAt is when each killed worker identity was killed.
	killedMu sync.Mutex
	killedAt map[string]time.Time
}

// buildWorker builds ./worker of the module unless a binary is given.
func (f *fleet) buildWorker(ctx context.Context) (string, error) {
	if f.cfg.WorkerBinary != "" {
		return f.cfg.WorkerBinary, nil
	}
	mod := f.cfg.ModuleDir
	if mod == "" {
		out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			return "", fmt.Errorf("soak: locating the module (go list -m): %w", err)
		}
		mod = strings.TrimSpace(string(out))
	}
	bin := filepath.Join(f.dir, "worker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./worker")
	cmd.Dir = mod
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("soak: go build ./worker: %w: %s", err, stderr.String())
	}
	return bin, nil
}

// workerProc is a running worker process.
type workerProc struct {
	*procgroup.Process
	identity string
}

// startWorker starts the next worker process (the one the soak kills) and
// waits until it polls the task queue.
func (f *fleet) startWorker(ctx context.Context) error {
	f.gen++
	w, err := f.spawnWorker(ctx, fmt.Sprintf("soak-worker-%d", f.gen))
	if err != nil {
		return err
	}
	f.worker = w
	return nil
}

// spawnWorker starts a worker process of identity in its own process group
// and waits until it polls the task queue.
func (f *fleet) spawnWorker(ctx context.Context, identity string) (*workerProc, error) {
	logf, err := os.OpenFile(filepath.Join(f.dir, "worker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("soak: worker log: %w", err)
	}
	fmt.Fprintf(logf, "=== %s\n", identity)
	cmd := exec.Command(f.bin,
		"--"+temporalconn.FlagAddress, f.srv.Address(), "--"+temporalconn.FlagNamespace, f.srv.Namespace(),
		"--store-root", f.root, "--compression", string(f.cfg.Compression),
		"--task-queue", f.cfg.TaskQueue, "--metrics-address", "",
		"--identity", identity, "--log-level", "warn",
		"--sticky-timeout", f.cfg.StickyTimeout.String())
	if f.script != "" {
		cmd.Args = append(cmd.Args, "--provider-script", f.script)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := procgroup.Start(cmd, func() { logf.Close() })
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("soak: starting the worker: %w", err)
	}
	w := &workerProc{Process: p, identity: identity}
	if err := f.awaitPolling(ctx, w); err != nil {
		w.Kill()
		return nil, err
	}
	return w, nil
}

// awaitPolling waits until the worker polls both the workflow and the
// activity task queue; it fails at once if the worker exits first.
func (f *fleet) awaitPolling(ctx context.Context, w *workerProc) error {
	logPath := filepath.Join(f.dir, "worker.log")
	err := readiness.Wait(ctx, readiness.Options{
		What:   "soak worker " + w.identity,
		Exited: w.Exited(),
		Log: func() string {
			b, err := os.ReadFile(logPath)
			if err != nil {
				return fmt.Sprintf("(reading %s: %v)", logPath, err)
			}
			return string(b)
		},
	}, readiness.TaskQueuePolled(f.tc, f.cfg.TaskQueue, w.identity))
	if err != nil {
		return fmt.Errorf("soak: waiting for the worker to poll: %w", err)
	}
	return nil
}

// killWorker sends SIGKILL to the worker's process group and waits for it.
func (f *fleet) killWorker() {
	w := f.worker
	if w == nil {
		return
	}
	f.killedMu.Lock()
	if f.killedAt == nil {
		f.killedAt = map[string]time.Time{}
	}
	f.killedAt[w.identity] = time.Now()
	f.killedMu.Unlock()
	w.Kill()
	f.worker = nil
}

// stopWorker stops the last worker: SIGTERM, then SIGKILL after 10s.
func (f *fleet) stopWorker() {
	w := f.worker
	if w == nil {
		return
	}
	w.Stop(10 * time.Second)
	f.worker = nil
}

// killedBefore reports whether the worker of identity was killed at or
// before t.
func (f *fleet) killedBefore(identity string, t time.Time) bool {
	f.killedMu.Lock()
	defer f.killedMu.Unlock()
	k, ok := f.killedAt[identity]
	return ok && !t.Before(k)
}
