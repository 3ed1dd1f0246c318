package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"

	"github.com/sessionflow/sessionflow/internal/cluster"
	"github.com/sessionflow/sessionflow/internal/devserver"
)

// startDevServer starts the persistent dev server of a soak.
func (f *fleet) startDevServer(ctx context.Context) error {
	serverLog, err := os.Create(filepath.Join(f.dir, "temporal.log"))
	if err != nil {
		return fmt.Errorf("soak: server log: %w", err)
	}
	var dynamicConfig []string
	if f.cfg.ContinueAsNewEvents > 0 {
		dynamicConfig = append(dynamicConfig, fmt.Sprintf("limit.historyCount.suggestContinueAsNew=%d", f.cfg.ContinueAsNewEvents))
	}
	f.srv, err = devserver.Start(ctx, devserver.Options{
		DynamicConfig: dynamicConfig,
		StateDir:      filepath.Join(f.dir, "dev"),
		Locate:        devserver.LocateOptions{Progress: f.cfg.Progress, WorkDir: f.cfg.ModuleDir},
		Output:        serverLog,
	})
	if err != nil {
		serverLog.Close()
		return fmt.Errorf("soak: starting the dev server: %w", err)
	}
	f.serverLog = serverLog
	f.rep.progress("dev server %s, state %s", f.srv.Address(), f.srv.DBPath())
	return nil
}

// startCluster starts the local cluster of a cluster soak without workers
// (startClusterWorkers starts them): PostgreSQL, the Temporal server and
// the namespace, in <dir>/cluster.
func (f *fleet) startCluster(ctx context.Context) error {
	if f.cfg.ContinueAsNewEvents > 0 {
		return errors.New("soak: -continue-as-new-events needs the dev server: the cluster runs deploy's dynamic config")
	}
	var err error
	f.lc, err = cluster.Start(ctx, cluster.Options{
		Dir:          filepath.Join(f.dir, "cluster"),
		Workers:      -1,
		TaskQueue:    f.cfg.TaskQueue,
		Root:         f.root,
		Compression:  f.cfg.Compression,
		WorkerBinary: f.bin,
		Build:        cluster.BuildOptions{WorkDir: f.cfg.ModuleDir},
		Progress:     f.cfg.Progress,
	})
	if err != nil {
		return fmt.Errorf("soak: starting the cluster: %w", err)
	}
	return nil
}

// startClusterWorkers starts the cluster's workers, each waited for until it
// polls.
func (f *fleet) startClusterWorkers(ctx context.Context) error {
	for i := range f.cfg.Workers {
		if _, err := f.lc.StartWorker(ctx, i, cluster.WorkerOptions{Args: f.workerArgs()}); err != nil {
			return fmt.Errorf("soak: starting cluster worker %d: %w", i, err)
		}
	}
	f.rep.progress("%d workers polling %s", f.cfg.Workers, f.cfg.TaskQueue)
	return nil
}

// workerArgs are the flags of a cluster worker beyond the cluster's own.
func (f *fleet) workerArgs() []string {
	args := []string{"--sticky-timeout", f.cfg.StickyTimeout.String()}
	if f.script != "" {
		args = append(args, "--provider-script", f.script)
	}
	return args
}

// killAndRestart kills a worker with SIGKILL and starts one in its place,
// returning the killed process's id: the soak's only worker, or on the
// cluster a worker chosen with rng while the others keep running.
func (f *fleet) killAndRestart(ctx context.Context, rng *rand.Rand) (int, error) {
	if f.lc == nil {
		select {
		case <-f.worker.Exited():
			f.rep.fail("worker %s exited before it was killed (see %s)", f.worker.identity, filepath.Join(f.dir, "worker.log"))
		default:
		}
		pid := f.worker.Pid()
		f.killWorker()
		return pid, f.startWorker(ctx)
	}
	slot := rng.Intn(f.cfg.Workers)
	w := f.lc.Workers()[slot]
	select {
	case <-w.Exited():
		f.rep.fail("cluster worker %s exited before it was killed (see %s)", w.Identity, w.Log)
	default:
	}
	pid := w.Pid()
	f.lc.KillWorker(slot)
	_, err := f.lc.StartWorker(ctx, slot, cluster.WorkerOptions{Args: f.workerArgs()})
	return pid, err
}

// killedName names what a kill ends in the progress lines.
func (f *fleet) killedName() string {
	if f.lc == nil {
		return "worker"
	}
	return fmt.Sprintf("one of %d cluster workers,", f.cfg.Workers)
}
