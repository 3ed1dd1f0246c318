package soak

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/procgroup"
	"github.com/sessionflow/sessionflow/internal/app/readiness"
	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
)

// buildWorker builds ./worker of the module unless a binary is given.
func (r *runner) buildWorker(ctx context.Context) (string, error) {
	if r.cfg.WorkerBinary != "" {
		return r.cfg.WorkerBinary, nil
	}
	mod := r.cfg.ModuleDir
	if mod == "" {
		out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			return "", fmt.Errorf("soak: locating the module (go list -m): %w", err)
		}
		mod = strings.TrimSpace(string(out))
	}
	bin := filepath.Join(r.dir, "worker")
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
func (r *runner) startWorker(ctx context.Context) error {
	r.gen++
	w, err := r.spawnWorker(ctx, fmt.Sprintf("soak-worker-%d", r.gen))
	if err != nil {
		return err
	}
	r.worker = w
	return nil
}

// spawnWorker starts a worker process of identity in its own process group
// and waits until it polls the task queue.
func (r *runner) spawnWorker(ctx context.Context, identity string) (*workerProc, error) {
	logf, err := os.OpenFile(filepath.Join(r.dir, "worker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("soak: worker log: %w", err)
	}
	fmt.Fprintf(logf, "=== %s\n", identity)
	cmd := exec.Command(r.bin,
		"--"+temporalconn.FlagAddress, r.srv.Address(), "--"+temporalconn.FlagNamespace, r.srv.Namespace(),
		"--store-root", r.root, "--compression", string(r.cfg.Compression),
		"--task-queue", r.cfg.TaskQueue, "--metrics-address", "",
		"--identity", identity, "--log-level", "warn",
		"--sticky-timeout", r.cfg.StickyTimeout.String())
	if r.script != "" {
		cmd.Args = append(cmd.Args, "--provider-script", r.script)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := procgroup.Start(cmd, func() { logf.Close() })
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("soak: starting the worker: %w", err)
	}
	w := &workerProc{Process: p, identity: identity}
	if err := r.awaitPolling(ctx, w); err != nil {
		w.Kill()
		return nil, err
	}
	return w, nil
}

// awaitPolling waits until the worker polls both the workflow and the
// activity task queue; it fails at once if the worker exits first.
func (r *runner) awaitPolling(ctx context.Context, w *workerProc) error {
	logPath := filepath.Join(r.dir, "worker.log")
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
	}, readiness.TaskQueuePolled(r.tc, r.cfg.TaskQueue, w.identity))
	if err != nil {
		return fmt.Errorf("soak: waiting for the worker to poll: %w", err)
	}
	return nil
}

// killWorker sends SIGKILL to the worker's process group and waits for it.
func (r *runner) killWorker() {
	w := r.worker
	if w == nil {
		return
	}
	r.killedMu.Lock()
	if r.killedAt == nil {
		r.killedAt = map[string]time.Time{}
	}
	r.killedAt[w.identity] = time.Now()
	r.killedMu.Unlock()
	w.Kill()
	r.worker = nil
}

// stopWorker stops the last worker: SIGTERM, then SIGKILL after 10s.
func (r *runner) stopWorker() {
	w := r.worker
	if w == nil {
		return
	}
	w.Stop(10 * time.Second)
	r.worker = nil
}
