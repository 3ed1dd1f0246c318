// Package soak is the kill -9 soak of sessionflow: it runs an embedded dev
// server with persistent state and the worker as a separate process, drives
// sessions with concurrent appends through the client, kills the worker with
// SIGKILL at random moments and restarts it, and checks after every kill and
// at the end that no acknowledged event is lost, that every log holds
// contiguous seqs without duplicates, that every session opens and resumes,
// and that no lease outlives its closed workflow. Meanwhile, lifecycle loops
// create, append to, dispose, resume and dispose new sessions one after
// another, so that kills also land in the middle of creates, resumes and
// disposes.
//
// Run is used by TestSoak (a short variant under `go test ./...`) and by
// cmd/soak (the long one).
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; only cmd/soak, its command
// line, imports it.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"time"

	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
)

// EventType is the type of the events the soak appends. It is not in the
// built-in vocabulary, so the events carry the ignorable flag.
const EventType = "soak/tick"

// runner is one soak run. The state of the run is split by owner: the
// report (progress and failures), the fleet (the server and the worker
// processes), the append sessions (here), the lifecycle loops' sessions
// (cycler) and the turn sessions (turnDriver).
type runner struct {
	cfg   Config
	rep   *report
	fleet *fleet
	// namespace is the namespace of the dev server or the cluster.
	namespace string
	tc        temporalclient.Client
	cl        *client.Client
	reader    *jsonl.Store
	rng       *rand.Rand

	sessions []*tracked
	cycles   *cycler
	turns    *turnDriver
}

// Run runs the soak. The error reports a harness failure (a build, the
// server or the worker not starting, ctx ended); the invariants the soak
// checks are reported in the Summary (see Summary.OK).
func Run(ctx context.Context, cfg Config) (sum Summary, err error) {
	start := time.Now()
	cfg.defaults()
	r := &runner{cfg: cfg, rep: &report{out: cfg.Progress}, rng: rand.New(rand.NewSource(cfg.Seed))}
	r.cycles = &cycler{r: r}
	r.turns = &turnDriver{r: r}
	f := &fleet{cfg: &r.cfg, rep: r.rep}
	r.fleet = f
	defer func() { sum.Elapsed = time.Since(start) }()

	f.dir = cfg.Dir
	if f.dir == "" {
		if f.dir, err = os.MkdirTemp("", "sessionflow-soak-"); err != nil {
			return sum, fmt.Errorf("soak: temporary directory: %w", err)
		}
		if !cfg.Keep {
			defer os.RemoveAll(f.dir)
		}
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return sum, fmt.Errorf("soak: working directory: %w", err)
	}
	f.root = filepath.Join(f.dir, "store")
	if f.bin, err = f.buildWorker(ctx); err != nil {
		return sum, err
	}
	r.rep.progress("dir %s, worker %s", f.dir, f.bin)

	var address, namespace string
	if cfg.Cluster {
		if err := f.startCluster(ctx); err != nil {
			return sum, err
		}
		defer func() {
			if serr := f.lc.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("soak: stopping the cluster: %w", serr))
			}
		}()
		address, namespace = f.lc.Address(), f.lc.Namespace()
	} else {
		if err := f.startDevServer(ctx); err != nil {
			return sum, err
		}
		defer func() {
			if serr := f.srv.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("soak: stopping the dev server: %w", serr))
			}
			f.serverLog.Close()
		}()
		address, namespace = f.srv.Address(), f.srv.Namespace()
	}

	r.namespace = namespace
	r.tc, err = temporalclient.DialContext(ctx, temporalclient.Options{
		HostPort:  address,
		Namespace: namespace,
		Identity:  "sessionflow-soak",
		Logger:    log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		return sum, fmt.Errorf("soak: connecting to the Temporal server: %w", err)
	}
	defer r.tc.Close()
	f.tc = r.tc
	r.cl = client.New(r.tc, client.Options{TaskQueue: cfg.TaskQueue, Namespace: namespace, WorkflowTaskTimeout: cfg.WorkflowTaskTimeout})
	if r.reader, err = jsonl.NewStore(jsonl.Options{Root: f.root, Compression: cfg.Compression}); err != nil {
		return sum, fmt.Errorf("soak: opening the store for read: %w", err)
	}

	if cfg.Turns > 0 {
		if f.script, err = f.writeTurnScript(); err != nil {
			return sum, err
		}
	}
	if cfg.Cluster {
		if err := f.startClusterWorkers(ctx); err != nil {
			return sum, err
		}
		if cfg.Measure {
			figures, err := r.measure(ctx)
			if err != nil {
				return sum, err
			}
			sum.Cluster = &figures
		}
	} else {
		if err := f.startWorker(ctx); err != nil {
			return sum, err
		}
		defer f.stopWorker()
	}
	if cfg.Standby {
		standby, err := f.spawnWorker(ctx, "soak-standby")
		if err != nil {
			return sum, err
		}
		defer standby.Stop(10 * time.Second)
	}

	if err := r.createSessions(ctx); err != nil {
		return sum, err
	}
	if err := r.turns.create(ctx); err != nil {
		return sum, err
	}

	// The appenders run until the kills are done; a batch in flight then is
	// still retried until acknowledged.
	stop := make(chan struct{})
	appendCtx, cancelAppends := context.WithCancel(ctx)
	defer cancelAppends()
	var wg sync.WaitGroup
	for i, t := range r.sessions {
		wg.Add(1)
		go func(t *tracked, seed int64) {
			defer wg.Done()
			r.appendLoop(appendCtx, t, rand.New(rand.NewSource(seed)), stop)
		}(t, cfg.Seed+int64(i)+1)
	}
	for i := 0; i < cfg.Lifecycles; i++ {
		wg.Add(1)
		go func(loop int, seed int64) {
			defer wg.Done()
			r.cycles.loop(appendCtx, loop, rand.New(rand.NewSource(seed)), stop)
		}(i, cfg.Seed-int64(i)-1)
	}
	for _, t := range r.turns.sessions {
		wg.Add(1)
		go func(t *turnSession) {
			defer wg.Done()
			r.turns.loop(appendCtx, t, stop)
		}(t)
	}

	var loopErr error
	killsStarted := time.Now()
	for k := 1; k <= cfg.Kills; k++ {
		if cfg.KillBudget > 0 && time.Since(killsStarted) > cfg.KillBudget {
			r.rep.progress("kill budget of %v spent after %d kills", cfg.KillBudget, sum.Kills)
			break
		}
		interval := cfg.MinInterval
		if d := cfg.MaxInterval - cfg.MinInterval; d > 0 {
			interval += time.Duration(r.rng.Int63n(int64(d)))
		}
		select {
		case <-ctx.Done():
			loopErr = ctx.Err()
		case <-time.After(interval):
		}
		if loopErr != nil {
			break
		}
		before := make([]int, len(r.sessions))
		for i, t := range r.sessions {
			before[i] = t.count()
		}
		killed := time.Now()
		var pid int
		if pid, loopErr = f.killAndRestart(ctx, r.rng); loopErr != nil {
			break
		}
		sum.Kills++
		polling := time.Since(killed)
		acked := r.check(ctx, false)
		r.turns.check(ctx, false)
		recovery := ""
		if !cfg.Eager {
			took, ok := r.awaitProgress(ctx, before, killed)
			if ok {
				sum.Failover.Recoveries = append(sum.Failover.Recoveries, took)
				recovery = fmt.Sprintf(", all sessions appending again after %v", took.Round(time.Millisecond))
			} else {
				sum.Failover.Unrecovered++
				recovery = fmt.Sprintf(", sessions without progress %v after the kill", took.Round(time.Millisecond))
			}
		}
		turns := ""
		if len(r.turns.sessions) > 0 {
			turns = fmt.Sprintf(", turns ended=%d", r.turns.ended())
		}
		r.rep.progress("kill %d/%d: %s %d killed after %v, polling again after %v%s; acked=%d, lifecycles done=%d%s, check ok=%v",
			k, cfg.Kills, f.killedName(), pid, interval.Round(time.Millisecond), polling.Round(time.Millisecond), recovery, acked,
			len(r.cycles.sessions(false)), turns, len(r.rep.snapshot()) == 0)
	}
	sum.KillPhase = time.Since(killsStarted)
	close(stop)
	if loopErr != nil {
		// Without a worker, a batch in flight cannot be acknowledged.
		cancelAppends()
	}
	wg.Wait()
	if loopErr != nil {
		return r.finish(sum), fmt.Errorf("soak: %w", loopErr)
	}

	r.check(ctx, true)
	r.turns.check(ctx, true)
	if len(r.turns.sessions) > 0 {
		if sum.AgentRetries, err = r.turns.agentRetries(ctx); err != nil {
			r.rep.fail("counting the retried agent activities: %v", err)
		}
		r.rep.progress("agent activities retried after a kill: %d model calls, %d tool calls", sum.AgentRetries.Model, sum.AgentRetries.Tool)
	}
	r.checkTaskTimeouts(ctx)
	if err := r.taskTimeouts(ctx, &sum.Failover); err != nil {
		r.rep.fail("counting the workflow task timeouts: %v", err)
	}
	r.rep.progress("%s", sum.Failover)
	for _, o := range sum.Failover.OtherTimeouts {
		r.rep.progress("workflow task timeout not caused by a kill: %s", o)
	}
	sum.Unresumable = r.disposeAndResume(ctx)
	sum.Unresumable += r.cycles.resume(ctx)
	sum.Unresumable += r.turns.resume(ctx)
	r.checkLeases(ctx)
	r.check(ctx, true)
	sum.Turns = r.turns.check(ctx, true)
	return r.finish(sum), nil
}

// awaitProgress waits until every session has had a batch acknowledged
// since before was taken, or RecoveryTimeout; it returns the time since the
// kill and whether every session did.
func (r *runner) awaitProgress(ctx context.Context, before []int, killed time.Time) (time.Duration, bool) {
	deadline := time.Now().Add(r.cfg.RecoveryTimeout)
	for {
		waiting := 0
		for i, t := range r.sessions {
			if t.count() <= before[i] {
				waiting++
			}
		}
		if waiting == 0 {
			return time.Since(killed), true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(killed), false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finish fills the counts of the summary.
func (r *runner) finish(sum Summary) Summary {
	sum.Lifecycles = len(r.cycles.sessions(false))
	sum.Sessions = len(r.sessions) + sum.Lifecycles + len(r.turns.sessions)
	for _, t := range append(r.sessions[:len(r.sessions):len(r.sessions)], r.cycles.sessions(true)...) {
		t.mu.Lock()
		sum.Acked += int64(len(t.acked))
		sum.Batches += int64(t.batches)
		sum.Lost += len(t.lost)
		sum.Duplicates += len(t.dups)
		t.mu.Unlock()
	}
	sum.Failures = r.rep.snapshot()
	return sum
}
