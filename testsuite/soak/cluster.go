package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sessionflow/sessionflow/internal/app/cluster"
	"github.com/sessionflow/sessionflow/internal/app/devserver"
)

// startDevServer starts the persistent dev server of a soak.
func (r *runner) startDevServer(ctx context.Context) error {
	serverLog, err := os.Create(filepath.Join(r.dir, "temporal.log"))
	if err != nil {
		return fmt.Errorf("soak: server log: %w", err)
	}
	var dynamicConfig []string
	if r.cfg.ContinueAsNewEvents > 0 {
		dynamicConfig = append(dynamicConfig, fmt.Sprintf("limit.historyCount.suggestContinueAsNew=%d", r.cfg.ContinueAsNewEvents))
	}
	r.srv, err = devserver.Start(ctx, devserver.Options{
		DynamicConfig: dynamicConfig,
		StateDir:      filepath.Join(r.dir, "dev"),
		Locate:        devserver.LocateOptions{Progress: r.cfg.Progress, WorkDir: r.cfg.ModuleDir},
		Output:        serverLog,
	})
	if err != nil {
		serverLog.Close()
		return fmt.Errorf("soak: starting the dev server: %w", err)
	}
	r.serverLog = serverLog
	r.progress("dev server %s, state %s", r.srv.Address(), r.srv.DBPath())
	return nil
}

// startCluster starts the local cluster of a cluster soak without workers
// (startClusterWorkers starts them): PostgreSQL, the Temporal server and
// the namespace, in <dir>/cluster.
func (r *runner) startCluster(ctx context.Context) error {
	if r.cfg.ContinueAsNewEvents > 0 {
		return errors.New("soak: -continue-as-new-events needs the dev server: the cluster runs deploy's dynamic config")
	}
	var err error
	r.lc, err = cluster.Start(ctx, cluster.Options{
		Dir:          filepath.Join(r.dir, "cluster"),
		Workers:      -1,
		TaskQueue:    r.cfg.TaskQueue,
		Root:         r.root,
		Compression:  r.cfg.Compression,
		WorkerBinary: r.bin,
		Build:        cluster.BuildOptions{WorkDir: r.cfg.ModuleDir},
		Progress:     r.cfg.Progress,
	})
	if err != nil {
		return fmt.Errorf("soak: starting the cluster: %w", err)
	}
	return nil
}

// startClusterWorkers starts the cluster's workers, each waited for until it
// polls.
func (r *runner) startClusterWorkers(ctx context.Context) error {
	for i := range r.cfg.Workers {
		if _, err := r.lc.StartWorker(ctx, i, cluster.WorkerOptions{Args: r.workerArgs()}); err != nil {
			return fmt.Errorf("soak: starting cluster worker %d: %w", i, err)
		}
	}
	r.progress("%d workers polling %s", r.cfg.Workers, r.cfg.TaskQueue)
	return nil
}

// workerArgs are the flags of a cluster worker beyond the cluster's own.
func (r *runner) workerArgs() []string {
	args := []string{"--sticky-timeout", r.cfg.StickyTimeout.String()}
	if r.script != "" {
		args = append(args, "--provider-script", r.script)
	}
	return args
}

// killAndRestart kills a worker with SIGKILL and starts one in its place,
// returning the killed process's id: the soak's only worker, or on the
// cluster a worker chosen at random while the others keep running.
func (r *runner) killAndRestart(ctx context.Context) (int, error) {
	if r.lc == nil {
		select {
		case <-r.worker.Exited():
			r.fail("worker %s exited before it was killed (see %s)", r.worker.identity, filepath.Join(r.dir, "worker.log"))
		default:
		}
		pid := r.worker.Pid()
		r.killWorker()
		return pid, r.startWorker(ctx)
	}
	slot := r.rng.Intn(r.cfg.Workers)
	w := r.lc.Workers()[slot]
	select {
	case <-w.Exited():
		r.fail("cluster worker %s exited before it was killed (see %s)", w.Identity, w.Log)
	default:
	}
	pid := w.Pid()
	r.lc.KillWorker(slot)
	_, err := r.lc.StartWorker(ctx, slot, cluster.WorkerOptions{Args: r.workerArgs()})
	return pid, err
}

// killedName names what a kill ends in the progress lines.
func (r *runner) killedName() string {
	if r.lc == nil {
		return "worker"
	}
	return fmt.Sprintf("one of %d cluster workers,", r.cfg.Workers)
}
