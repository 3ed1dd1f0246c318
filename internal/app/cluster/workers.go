package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/readiness"
)

// buildWorker builds the sessionflow worker (./worker of the checkout in
// moduleDir) into out.
func buildWorker(ctx context.Context, moduleDir, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./worker")
	cmd.Dir = moduleDir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./worker: %w\n%s", err, stderr.String())
	}
	return nil
}

// Worker is one sessionflow worker process of the cluster.
type Worker struct {
	// Index is the worker's slot, 0-based.
	Index int
	// Identity is the worker's Temporal identity, new at each start.
	Identity string
	// TaskQueue is the task queue it polls.
	TaskQueue string
	// Root is its store root.
	Root string
	// Log is its log file.
	Log string

	proc *proc
}

// Pid is the worker's process id.
func (w *Worker) Pid() int { return w.proc.Pid() }

// Exited is closed once the worker process has exited.
func (w *Worker) Exited() <-chan struct{} { return w.proc.Exited() }

// WorkerOptions configure one worker start (Cluster.StartWorker).
type WorkerOptions struct {
	// TaskQueue is the task queue to poll; default the cluster's.
	TaskQueue string
	// Root is the store root; default the cluster's.
	Root string
	// Args are more worker flags, after the cluster's own (which set the
	// address, namespace, store root, compression, task queue, identity and
	// log level, and turn metrics off).
	Args []string
}

// startWorker starts worker slot i and waits until it polls its task queue.
func (c *Cluster) startWorker(ctx context.Context, i int, o WorkerOptions) (*Worker, error) {
	if o.TaskQueue == "" {
		o.TaskQueue = c.opts.TaskQueue
	}
	if o.Root == "" {
		o.Root = c.root
	}
	c.mu.Lock()
	c.gen++
	identity := fmt.Sprintf("cluster-worker-%d.%d", i, c.gen)
	c.mu.Unlock()
	w := &Worker{
		Index: i, Identity: identity, TaskQueue: o.TaskQueue, Root: o.Root,
		Log: filepath.Join(c.dir, fmt.Sprintf("worker-%d.log", i)),
	}
	args := []string{
		"--address", c.srv.address, "--namespace", Namespace,
		"--store-root", o.Root, "--compression", string(c.opts.Compression),
		"--task-queue", o.TaskQueue, "--metrics-address", "",
		"--identity", identity, "--log-level", c.opts.WorkerLogLevel,
	}
	args = append(args, c.opts.WorkerArgs...)
	args = append(args, o.Args...)
	p, err := startProc(identity, exec.Command(c.workerBin, args...), w.Log, nil)
	if err != nil {
		return nil, err
	}
	w.proc = p
	err = readiness.Wait(ctx, readiness.Options{
		What: "worker " + identity, Timeout: 3 * time.Minute,
		Exited: p.Exited(), ExitErr: p.Err, Log: p.log,
	}, readiness.TaskQueuePolled(c.client, o.TaskQueue, identity))
	if err != nil {
		p.kill()
		return nil, err
	}
	return w, nil
}

// stopWorker stops a worker gracefully (SIGTERM), killing it after grace.
func stopWorker(w *Worker, grace time.Duration) {
	if w != nil && w.proc != nil {
		_ = w.proc.stop(syscall.SIGTERM, grace)
	}
}
