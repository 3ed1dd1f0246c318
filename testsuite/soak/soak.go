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
package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/devserver"
	"github.com/sessionflow/sessionflow/internal/readiness"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

// EventType is the type of the events the soak appends. It is not in the
// built-in vocabulary, so the events carry the ignorable flag.
const EventType = "soak/tick"

// Defaults of Config.
const (
	DefaultKills            = 200
	DefaultSessions         = 8
	DefaultMinInterval      = 300 * time.Millisecond
	DefaultMaxInterval      = 1500 * time.Millisecond
	DefaultBatch            = 8
	DefaultAppendTimeout    = 20 * time.Second
	DefaultBatchDeadline    = 3 * time.Minute
	DefaultHeartbeatTimeout = 2 * time.Second
	DefaultTaskQueue        = "soak"
	DefaultRecoveryTimeout  = time.Minute
	DefaultLifecycles       = 1
)

// Config configures Run. Zero values take the defaults.
type Config struct {
	// Kills is the number of SIGKILLs of the worker; default DefaultKills.
	Kills int
	// Sessions is the number of sessions appended to concurrently; default
	// DefaultSessions.
	Sessions int
	// Lifecycles is the number of concurrent lifecycle loops, each taking
	// new sessions through create, appends, dispose, resume, an append and
	// dispose while the worker is killed; default DefaultLifecycles,
	// negative for none.
	Lifecycles int
	// Seed seeds the random kill intervals and batch sizes.
	Seed int64
	// MinInterval and MaxInterval bound the random time a worker runs,
	// once it polls, before it is killed.
	MinInterval, MaxInterval time.Duration
	// Batch is the largest number of events of one append; every batch has
	// a random size in 1..Batch. Default DefaultBatch.
	Batch int
	// AppendTimeout bounds one Append attempt; a timed-out attempt is
	// retried with the same batch. Default DefaultAppendTimeout.
	AppendTimeout time.Duration
	// BatchDeadline bounds the retries of one batch; a batch still not
	// acknowledged then is an invariant failure. Default DefaultBatchDeadline.
	BatchDeadline time.Duration
	// HeartbeatTimeout is the heartbeat timeout of the sessions' store
	// activities (workflows.Options.HeartbeatTimeoutMs): how long an
	// activity attempt lost with a killed worker takes to be retried.
	// Default DefaultHeartbeatTimeout; negative leaves the workflows'
	// default.
	HeartbeatTimeout time.Duration
	// Compression is the store encoding of the worker; default
	// jsonl.CompressionNone.
	Compression jsonl.Compression
	// TaskQueue is the task queue of the worker; default DefaultTaskQueue.
	TaskQueue string
	// Dir holds the server state, the store root, the worker binary and
	// the logs; empty means a new temporary directory, removed at the end
	// unless Keep is set.
	Dir string
	// Keep keeps a temporary Dir after the run.
	Keep bool
	// WorkerBinary is a built worker; empty means `go build ./worker` in
	// ModuleDir.
	WorkerBinary string
	// ModuleDir is the sessionflow module root; empty means the module of
	// the working directory (`go list -m`).
	ModuleDir string
	// Eager starts the random interval before the next kill as soon as the
	// restarted worker polls. By default it starts once every session has
	// had a batch acknowledged since the kill (or after RecoveryTimeout),
	// so that every kill hits a worker that is busy appending rather than
	// one still waiting for the workflows to come back from the dead
	// worker's sticky queue.
	Eager bool
	// RecoveryTimeout bounds the wait for progress after a restart; default
	// DefaultRecoveryTimeout.
	RecoveryTimeout time.Duration
	// WorkflowTaskTimeout is the client's client.Options.WorkflowTaskTimeout
	// for the sessions it starts: how long a workflow task the killed worker
	// had started is waited for. 0 keeps the server's default (10 s).
	WorkflowTaskTimeout time.Duration
	// StickyTimeout is the worker's --sticky-timeout: how long the next
	// workflow task of a session waits on the killed worker's sticky queue.
	// 0 keeps the SDK's default (5 s).
	StickyTimeout time.Duration
	// ContinueAsNewEvents, when positive, is the history length at which
	// the server suggests continue-as-new (limit.historyCount.
	// suggestContinueAsNew), so that kills also land around the sessions'
	// continues-as-new; 0 keeps the server's default (4096).
	ContinueAsNewEvents int
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
}

func (c *Config) defaults() {
	if c.Kills <= 0 {
		c.Kills = DefaultKills
	}
	if c.Sessions <= 0 {
		c.Sessions = DefaultSessions
	}
	if c.Lifecycles == 0 {
		c.Lifecycles = DefaultLifecycles
	}
	if c.MinInterval <= 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.MaxInterval < c.MinInterval {
		c.MaxInterval = c.MinInterval
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.AppendTimeout <= 0 {
		c.AppendTimeout = DefaultAppendTimeout
	}
	if c.BatchDeadline <= 0 {
		c.BatchDeadline = DefaultBatchDeadline
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.Compression == "" {
		c.Compression = jsonl.CompressionNone
	}
	if c.TaskQueue == "" {
		c.TaskQueue = DefaultTaskQueue
	}
	if c.RecoveryTimeout <= 0 {
		c.RecoveryTimeout = DefaultRecoveryTimeout
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Summary is the outcome of a soak.
type Summary struct {
	// Kills is the number of SIGKILLs sent to the worker.
	Kills int
	// Sessions is the number of sessions checked: the Config.Sessions
	// appended to throughout and the Lifecycles sessions.
	Sessions int
	// Lifecycles is the number of sessions the lifecycle loops took from
	// create to their final dispose.
	Lifecycles int
	// Acked is the number of events the client saw acknowledged.
	Acked int64
	// Lost is the number of acknowledged events missing from the store or
	// stored with other content, over all checks.
	Lost int
	// Duplicates is the number of seqs stored more than once, over all
	// checks.
	Duplicates int
	// Unresumable is the number of sessions that could not be resumed and
	// disposed after the final dispose.
	Unresumable int
	// Failures describes every invariant failure (including the ones
	// counted above), in the order found.
	Failures []string
	// Elapsed is the duration of the run.
	Elapsed time.Duration
}

// String returns the summary line.
func (s Summary) String() string {
	return fmt.Sprintf("soak: kills=%d sessions=%d acked=%d lost=%d duplicates=%d unresumable=%d",
		s.Kills, s.Sessions, s.Acked, s.Lost, s.Duplicates, s.Unresumable)
}

// OK reports whether the soak found nothing wrong.
func (s Summary) OK() bool {
	return s.Lost == 0 && s.Duplicates == 0 && s.Unresumable == 0 && len(s.Failures) == 0
}

// tracked is what the client saw of one session.
type tracked struct {
	id string

	mu    sync.Mutex
	acked []session.Event // acknowledged events, in seq order
	// next is the seq the next append starts at: after the last acked event
	// or, after a resume, the seq the resume reports (past the markers it
	// stored).
	next int64
	// lost and dups are the seqs found lost or duplicated by any check.
	lost, dups map[int64]bool
	// done marks a lifecycle session whose lifecycle is over.
	done bool
}

func newTracked(id string) *tracked {
	return &tracked{id: id, lost: map[int64]bool{}, dups: map[int64]bool{}}
}

func (t *tracked) isDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

func (t *tracked) snapshot() []session.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.acked[:len(t.acked):len(t.acked)]
}

func (t *tracked) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.acked)
}

func (t *tracked) ack(batch []session.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acked = append(t.acked, batch...)
	t.next = batch[len(batch)-1].Seq + 1
}

func (t *tracked) nextSeq() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next
}

// resumed records the seq a resume reports the next append must start at.
// It fails when that seq is below the next acknowledged one: the resumed
// session would have lost acknowledged events.
func (t *tracked) resumed(next int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if next < t.next {
		return fmt.Errorf("the resume reports the next seq %d, below the %d acknowledged", next, t.next)
	}
	t.next = next
	return nil
}

// runner is one soak run.
type runner struct {
	cfg    Config
	dir    string
	root   string
	bin    string
	srv    *devserver.Server
	tc     temporalclient.Client
	cl     *client.Client
	reader *jsonl.Store
	rng    *rand.Rand

	sessions []*tracked

	// cycled are the sessions of the lifecycle loops; the checks during the
	// kills read those whose lifecycle is over.
	cycledMu sync.Mutex
	cycled   []*tracked

	failMu   sync.Mutex
	failures []string

	worker *workerProc
	gen    int
}

func (r *runner) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.failMu.Lock()
	r.failures = append(r.failures, msg)
	r.failMu.Unlock()
	fmt.Fprintf(r.cfg.Progress, "soak: FAIL %s\n", msg)
}

func (r *runner) progress(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, "soak: "+format+"\n", args...)
}

// Run runs the soak. The error reports a harness failure (a build, the
// server or the worker not starting, ctx ended); the invariants the soak
// checks are reported in the Summary (see Summary.OK).
func Run(ctx context.Context, cfg Config) (sum Summary, err error) {
	start := time.Now()
	cfg.defaults()
	r := &runner{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed))}
	defer func() { sum.Elapsed = time.Since(start) }()

	r.dir = cfg.Dir
	if r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "sessionflow-soak-"); err != nil {
			return sum, fmt.Errorf("soak: temporary directory: %w", err)
		}
		if !cfg.Keep {
			defer os.RemoveAll(r.dir)
		}
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return sum, fmt.Errorf("soak: working directory: %w", err)
	}
	r.root = filepath.Join(r.dir, "store")
	if r.bin, err = r.buildWorker(ctx); err != nil {
		return sum, err
	}
	r.progress("dir %s, worker %s", r.dir, r.bin)

	serverLog, err := os.Create(filepath.Join(r.dir, "temporal.log"))
	if err != nil {
		return sum, fmt.Errorf("soak: server log: %w", err)
	}
	defer serverLog.Close()
	var dynamicConfig []string
	if cfg.ContinueAsNewEvents > 0 {
		dynamicConfig = append(dynamicConfig, fmt.Sprintf("limit.historyCount.suggestContinueAsNew=%d", cfg.ContinueAsNewEvents))
	}
	r.srv, err = devserver.Start(ctx, devserver.Options{
		DynamicConfig: dynamicConfig,
		StateDir:      filepath.Join(r.dir, "dev"),
		Locate:        devserver.LocateOptions{Progress: cfg.Progress, WorkDir: cfg.ModuleDir},
		Output:        serverLog,
	})
	if err != nil {
		return sum, fmt.Errorf("soak: starting the dev server: %w", err)
	}
	defer func() {
		if serr := r.srv.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("soak: stopping the dev server: %w", serr))
		}
	}()
	r.progress("dev server %s, state %s", r.srv.Address(), r.srv.DBPath())

	r.tc, err = temporalclient.DialContext(ctx, temporalclient.Options{
		HostPort:  r.srv.Address(),
		Namespace: r.srv.Namespace(),
		Identity:  "sessionflow-soak",
		Logger:    log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		return sum, fmt.Errorf("soak: connecting to the dev server: %w", err)
	}
	defer r.tc.Close()
	r.cl = client.New(r.tc, client.Options{TaskQueue: cfg.TaskQueue, Namespace: r.srv.Namespace(), WorkflowTaskTimeout: cfg.WorkflowTaskTimeout})
	if r.reader, err = jsonl.NewStore(jsonl.Options{Root: r.root, Compression: cfg.Compression}); err != nil {
		return sum, fmt.Errorf("soak: opening the store for read: %w", err)
	}

	if err := r.startWorker(ctx); err != nil {
		return sum, err
	}
	defer r.stopWorker()

	if err := r.createSessions(ctx); err != nil {
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
			r.lifecycleLoop(appendCtx, loop, rand.New(rand.NewSource(seed)), stop)
		}(i, cfg.Seed-int64(i)-1)
	}

	var loopErr error
	for k := 1; k <= cfg.Kills; k++ {
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
		select {
		case <-r.worker.exited:
			r.fail("worker %s exited before it was killed (see %s)", r.worker.identity, filepath.Join(r.dir, "worker.log"))
		default:
		}
		pid := r.worker.cmd.Process.Pid
		before := make([]int, len(r.sessions))
		for i, t := range r.sessions {
			before[i] = t.count()
		}
		killed := time.Now()
		r.killWorker()
		sum.Kills++
		if loopErr = r.startWorker(ctx); loopErr != nil {
			break
		}
		polling := time.Since(killed)
		acked := r.check(ctx, false)
		recovery := ""
		if !cfg.Eager {
			recovery = ", " + r.awaitProgress(ctx, before, killed)
		}
		r.progress("kill %d/%d: worker %d killed after %v, polling again after %v%s; acked=%d, lifecycles done=%d, check ok=%v",
			k, cfg.Kills, pid, interval.Round(time.Millisecond), polling.Round(time.Millisecond), recovery, acked,
			len(r.cycledSessions(false)), len(r.snapshotFailures()) == 0)
	}
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
	r.checkTaskTimeouts(ctx)
	sum.Unresumable = r.disposeAndResume(ctx)
	sum.Unresumable += r.resumeCycled(ctx)
	r.checkLeases(ctx)
	r.check(ctx, true)
	return r.finish(sum), nil
}

// awaitProgress waits until every session has had a batch acknowledged
// since before was taken, or RecoveryTimeout, and describes the wait.
func (r *runner) awaitProgress(ctx context.Context, before []int, killed time.Time) string {
	deadline := time.Now().Add(r.cfg.RecoveryTimeout)
	for {
		waiting := 0
		for i, t := range r.sessions {
			if t.count() <= before[i] {
				waiting++
			}
		}
		if waiting == 0 {
			return fmt.Sprintf("all sessions appending again after %v", time.Since(killed).Round(time.Millisecond))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Sprintf("%d sessions without progress %v after the kill", waiting, time.Since(killed).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finish fills the counts of the summary.
func (r *runner) finish(sum Summary) Summary {
	sum.Lifecycles = len(r.cycledSessions(false))
	sum.Sessions = len(r.sessions) + sum.Lifecycles
	for _, t := range append(r.sessions[:len(r.sessions):len(r.sessions)], r.cycledSessions(true)...) {
		t.mu.Lock()
		sum.Acked += int64(len(t.acked))
		sum.Lost += len(t.lost)
		sum.Duplicates += len(t.dups)
		t.mu.Unlock()
	}
	sum.Failures = r.snapshotFailures()
	return sum
}

func (r *runner) snapshotFailures() []string {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	return append([]string(nil), r.failures...)
}

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
	cmd      *exec.Cmd
	identity string
	exited   chan struct{}
}

// startWorker starts a worker process in its own process group and waits
// until it polls the task queue.
func (r *runner) startWorker(ctx context.Context) error {
	r.gen++
	identity := fmt.Sprintf("soak-worker-%d", r.gen)
	logf, err := os.OpenFile(filepath.Join(r.dir, "worker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("soak: worker log: %w", err)
	}
	fmt.Fprintf(logf, "=== %s\n", identity)
	cmd := exec.Command(r.bin,
		"--address", r.srv.Address(), "--namespace", r.srv.Namespace(),
		"--store-root", r.root, "--compression", string(r.cfg.Compression),
		"--task-queue", r.cfg.TaskQueue, "--metrics-address", "",
		"--identity", identity, "--log-level", "warn",
		"--sticky-timeout", r.cfg.StickyTimeout.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("soak: starting the worker: %w", err)
	}
	w := &workerProc{cmd: cmd, identity: identity, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(w.exited)
	}()
	r.worker = w
	return r.awaitPolling(ctx, w)
}

// awaitPolling waits until the worker polls both the workflow and the
// activity task queue; it fails at once if the worker exits first.
func (r *runner) awaitPolling(ctx context.Context, w *workerProc) error {
	logPath := filepath.Join(r.dir, "worker.log")
	err := readiness.Wait(ctx, readiness.Options{
		What:   "soak worker " + w.identity,
		Exited: w.exited,
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
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	<-w.exited
	r.worker = nil
}

// stopWorker stops the last worker: SIGTERM, then SIGKILL after 10s.
func (r *runner) stopWorker() {
	w := r.worker
	if w == nil {
		return
	}
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.exited
	}
	r.worker = nil
}

// options are the workflow options of the sessions.
func (r *runner) options() *workflows.Options {
	o := &workflows.Options{}
	if r.cfg.HeartbeatTimeout > 0 {
		o.HeartbeatTimeoutMs = r.cfg.HeartbeatTimeout.Milliseconds()
	}
	return o
}

// createSessions creates the sessions while the first worker runs.
func (r *runner) createSessions(ctx context.Context) error {
	for i := 0; i < r.cfg.Sessions; i++ {
		id := fmt.Sprintf("soak-%d-%03d", r.cfg.Seed, i)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := r.cl.Create(cctx, workflows.CreateSessionRequest{SessionID: id, Options: r.options()})
		cancel()
		if err != nil {
			return fmt.Errorf("soak: creating session %s: %w", id, err)
		}
		r.sessions = append(r.sessions, newTracked(id))
	}
	r.progress("%d sessions created", len(r.sessions))
	return nil
}

// stopped reports whether stop is closed or ctx has ended.
func stopped(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// appendLoop appends batches with contiguous seqs to t until stop closes.
func (r *runner) appendLoop(ctx context.Context, t *tracked, rng *rand.Rand, stop <-chan struct{}) {
	for {
		if stopped(ctx, stop) {
			return
		}
		if !r.appendBatch(ctx, t, rng) {
			return
		}
	}
}

// appendBatch appends a batch of random size continuing t's acknowledged
// seqs until it is acknowledged, and records it; false means it could not
// be (a failure is recorded unless ctx ended).
func (r *runner) appendBatch(ctx context.Context, t *tracked, rng *rand.Rand) bool {
	next := t.nextSeq()
	n := 1 + rng.Intn(r.cfg.Batch)
	batch := make([]session.Event, n)
	for i := range batch {
		ev, err := session.NewEvent(EventType, next+int64(i), time.Now().UnixMilli(),
			map[string]any{"session": t.id, "seq": next + int64(i), "nonce": rng.Int63()})
		if err != nil {
			r.fail("session %s: building event %d: %v", t.id, next+int64(i), err)
			return false
		}
		ev.Ignorable = true
		batch[i] = ev
	}
	if !r.appendUntilAcked(ctx, t, batch) {
		return false
	}
	t.ack(batch)
	return true
}

// lifecycleLoop takes new sessions, one after another until stop closes,
// through create, one to three appends, dispose, resume, one append and
// dispose, each step retried or awaited across the kills. A step that does
// not complete within the batch deadline is a failure and ends the loop.
func (r *runner) lifecycleLoop(ctx context.Context, loop int, rng *rand.Rand, stop <-chan struct{}) {
	for n := 0; ; n++ {
		if stopped(ctx, stop) {
			return
		}
		t := newTracked(fmt.Sprintf("soak-%d-l%d-%04d", r.cfg.Seed, loop, n))
		r.cycledMu.Lock()
		r.cycled = append(r.cycled, t)
		r.cycledMu.Unlock()
		if err := r.lifecycle(ctx, t, rng); err != nil {
			if ctx.Err() == nil {
				r.fail("session %s: lifecycle: %v", t.id, err)
			}
			return
		}
		t.mu.Lock()
		t.done = true
		t.mu.Unlock()
	}
}

// lifecycle runs one session's lifecycle (see lifecycleLoop).
func (r *runner) lifecycle(ctx context.Context, t *tracked, rng *rand.Rand) error {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.BatchDeadline)
	_, err := r.cl.Create(cctx, workflows.CreateSessionRequest{SessionID: t.id, Options: r.options()})
	cancel()
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	for i := 1 + rng.Intn(3); i > 0; i-- {
		if !r.appendBatch(ctx, t, rng) {
			return errors.New("append not acknowledged")
		}
	}
	if err := r.disposeUntilClosed(ctx, t.id); err != nil {
		return err
	}
	if err := r.leaseReleased(ctx, t.id); err != nil {
		return err
	}
	cctx, cancel = context.WithTimeout(ctx, r.cfg.BatchDeadline)
	live, err := r.cl.Resume(cctx, t.id, workflows.ResumeSessionRequest{Options: r.options()})
	cancel()
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := t.resumed(live.NextSeq); err != nil {
		return err
	}
	if !r.appendBatch(ctx, t, rng) {
		return errors.New("append after the resume not acknowledged")
	}
	if err := r.disposeUntilClosed(ctx, t.id); err != nil {
		return err
	}
	return r.leaseReleased(ctx, t.id)
}

// disposeUntilClosed disposes the live session id and waits until its
// workflow has completed, asking again while a kill loses the request,
// until the batch deadline.
func (r *runner) disposeUntilClosed(ctx context.Context, id string) error {
	deadline := time.Now().Add(r.cfg.BatchDeadline)
	for {
		err := r.dispose(ctx, id)
		if err == nil {
			return nil
		}
		status, derr := r.status(ctx, id)
		switch {
		case derr == nil && status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
			return nil // an earlier attempt's dispose completed it
		case derr == nil && status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			return fmt.Errorf("dispose: the workflow ended %v: %w", status, err)
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("dispose not done within %v: %w", r.cfg.BatchDeadline, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// status returns the status of the latest run of session id's workflow.
func (r *runner) status(ctx context.Context, id string) (enumspb.WorkflowExecutionStatus, error) {
	d, err := r.tc.DescribeWorkflowExecution(ctx, workflows.WorkflowID(id), "")
	if err != nil {
		return 0, err
	}
	return d.GetWorkflowExecutionInfo().GetStatus(), nil
}

// leaseReleased checks that session id's lease is gone (its workflow has
// completed).
func (r *runner) leaseReleased(ctx context.Context, id string) error {
	l, err := r.reader.LeaseOf(ctx, id)
	switch {
	case err != nil:
		return fmt.Errorf("reading the lease: %w", err)
	case l != nil:
		return fmt.Errorf("lease still held after the dispose: handle %s, owner %+v, pid %d", l.Handle, l.Owner, l.PID)
	}
	return nil
}

// cycledSessions returns the lifecycle sessions, only those whose lifecycle
// is over unless all is set.
func (r *runner) cycledSessions(all bool) []*tracked {
	r.cycledMu.Lock()
	defer r.cycledMu.Unlock()
	var out []*tracked
	for _, t := range r.cycled {
		if all || t.isDone() {
			out = append(out, t)
		}
	}
	return out
}

// resumeCycled resumes and disposes every lifecycle session whose
// lifecycle completed; it returns the number that could not be resumed.
func (r *runner) resumeCycled(ctx context.Context) int {
	cycled := r.cycledSessions(false)
	unresumable := r.resumeAndDispose(ctx, cycled, "lifecycle session")
	r.progress("%d lifecycle sessions resumed and disposed again (%d unresumable)", len(cycled), unresumable)
	return unresumable
}

// resumeAndDispose resumes and disposes each of sessions (kind names them
// in failures); it returns the number that could not be resumed.
func (r *runner) resumeAndDispose(ctx context.Context, sessions []*tracked, kind string) int {
	unresumable := 0
	for _, t := range sessions {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := r.cl.Resume(cctx, t.id, workflows.ResumeSessionRequest{Options: r.options()})
		cancel()
		if err == nil {
			err = r.dispose(ctx, t.id)
		}
		if err != nil {
			unresumable++
			r.fail("%s %s is unresumable: %v", kind, t.id, err)
		}
	}
	return unresumable
}

// appendUntilAcked appends batch, retrying the same batch on any failure
// until it is acknowledged: an Append that returns nil, or, after a seq
// mismatch, a store that holds exactly the batch at its seqs. It reports
// false (after recording a failure) when the batch cannot be acknowledged.
func (r *runner) appendUntilAcked(ctx context.Context, t *tracked, batch []session.Event) bool {
	first, last := batch[0].Seq, batch[len(batch)-1].Seq
	deadline := time.Now().Add(r.cfg.BatchDeadline)
	var lastErr error
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, r.cfg.AppendTimeout)
		_, err := r.cl.Append(actx, t.id, batch)
		cancel()
		if err == nil {
			return true
		}
		lastErr = err
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, client.ErrSeqMismatch) {
			held, detail := r.storeHolds(ctx, t.id, batch)
			if held {
				return true
			}
			if detail != "" {
				r.fail("session %s: append of seqs %d..%d (attempt %d) reports %q and the store %s", t.id, first, last, attempt+1, err, detail)
				return false
			}
		}
		if time.Now().After(deadline) {
			r.fail("session %s: batch seqs %d..%d not acknowledged within %v after %d attempts: %v",
				t.id, first, last, r.cfg.BatchDeadline, attempt+1, lastErr)
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// storeHolds reports whether the store holds exactly batch at its seqs.
// When it does not, detail describes what it holds instead, or is empty
// when the batch has simply not landed (the store ends at its first seq).
func (r *runner) storeHolds(ctx context.Context, id string, batch []session.Event) (bool, string) {
	events, err := r.read(ctx, id)
	if err != nil {
		return false, fmt.Sprintf("does not open for read: %v", err)
	}
	first := batch[0].Seq
	if int64(len(events)) == first {
		return false, ""
	}
	if int64(len(events)) < first {
		return false, fmt.Sprintf("holds only %d events (acknowledged events are missing)", len(events))
	}
	for i, want := range batch {
		j := first + int64(i)
		if j >= int64(len(events)) {
			return false, fmt.Sprintf("ends at seq %d inside the batch", len(events))
		}
		if diff := compare(want, events[j]); diff != "" {
			return false, fmt.Sprintf("holds another event at index %d: %s", j, diff)
		}
	}
	return true, ""
}

// read reads a session's whole log through a read handle.
func (r *runner) read(ctx context.Context, id string) ([]session.Event, error) {
	h, err := r.reader.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return nil, err
	}
	events, err := h.Read(ctx, 0, -1)
	if cerr := h.Close(ctx); err == nil && cerr != nil {
		err = cerr
	}
	return events, err
}

// compare returns "" when got is byte-equal to want in canonical JSON, else
// both encodings.
func compare(want, got session.Event) string {
	w, werr := want.MarshalJSON()
	g, gerr := got.MarshalJSON()
	if werr != nil || gerr != nil {
		return fmt.Sprintf("encoding: %v %v", werr, gerr)
	}
	if !bytes.Equal(w, g) {
		return fmt.Sprintf("acked %s, stored %s", w, g)
	}
	return ""
}

// check reads every session from the store and compares it with what was
// acknowledged before the read. It returns the number of acknowledged
// events it checked.
func (r *runner) check(ctx context.Context, final bool) int64 {
	var total int64
	for _, t := range append(r.sessions[:len(r.sessions):len(r.sessions)], r.cycledSessions(false)...) {
		acked := t.snapshot()
		total += int64(len(acked))
		events, err := r.read(ctx, t.id)
		if err != nil {
			r.fail("session %s does not open for read (final=%v): %v", t.id, final, err)
			continue
		}
		stored := make(map[int64]session.Event, len(events))
		var dups []int64
		contiguous := true
		for i, e := range events {
			if _, seen := stored[e.Seq]; seen {
				dups = append(dups, e.Seq)
				continue
			}
			stored[e.Seq] = e
			if e.Seq != int64(i) {
				contiguous = false
			}
		}
		if !contiguous || len(dups) > 0 {
			seqs := make([]int64, len(events))
			for i, e := range events {
				seqs[i] = e.Seq
			}
			r.fail("session %s: stored seqs are not 0..%d contiguous (duplicates %v): %v", t.id, len(events)-1, dups, abbreviate(seqs))
		}
		var lost []string
		for _, a := range acked {
			got, ok := stored[a.Seq]
			diff := "absent from the store"
			if ok {
				diff = compare(a, got)
			}
			if diff == "" {
				continue
			}
			t.mu.Lock()
			t.lost[a.Seq] = true
			t.mu.Unlock()
			lost = append(lost, fmt.Sprintf("seq %d %s", a.Seq, diff))
		}
		if len(lost) > 0 {
			r.fail("session %s: %d acknowledged events lost (acked %d, stored %d): %s", t.id, len(lost), len(acked), len(events), strings.Join(firstN(lost, 5), "; "))
		}
		if len(dups) > 0 {
			t.mu.Lock()
			for _, s := range dups {
				t.dups[s] = true
			}
			t.mu.Unlock()
		}
	}
	return total
}

// disposeAndResume disposes every session, then resumes and disposes it
// again; it returns the number of sessions that could not be resumed.
func (r *runner) disposeAndResume(ctx context.Context) int {
	for _, t := range r.sessions {
		if err := r.dispose(ctx, t.id); err != nil {
			r.fail("session %s: final dispose: %v", t.id, err)
		}
	}
	unresumable := r.resumeAndDispose(ctx, r.sessions, "session")
	r.progress("%d sessions disposed, resumed and disposed again (%d unresumable)", len(r.sessions), unresumable)
	return unresumable
}

// dispose disposes a live session and waits until its workflow has closed.
func (r *runner) dispose(ctx context.Context, id string) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := r.cl.Dispose(cctx, id); err != nil {
		return err
	}
	if err := r.tc.GetWorkflow(cctx, workflows.WorkflowID(id), "").Get(cctx, nil); err != nil {
		return fmt.Errorf("the disposed workflow of session %s: %w", id, err)
	}
	return nil
}

// checkTaskTimeouts checks that the latest run of every appended-to
// session, after the continues-as-new its appends caused, still has the
// workflow task timeout the client started it with.
func (r *runner) checkTaskTimeouts(ctx context.Context) {
	if r.cfg.WorkflowTaskTimeout <= 0 {
		return
	}
	runs := 0
	for _, t := range r.sessions {
		d, err := r.tc.DescribeWorkflowExecution(ctx, workflows.WorkflowID(t.id), "")
		if err != nil {
			r.fail("session %s: describing its workflow: %v", t.id, err)
			continue
		}
		if d.GetWorkflowExecutionInfo().GetExecution().GetRunId() != d.GetWorkflowExecutionInfo().GetFirstRunId() {
			runs++
		}
		if got := d.GetExecutionConfig().GetDefaultWorkflowTaskTimeout().AsDuration(); got != r.cfg.WorkflowTaskTimeout {
			r.fail("session %s: its latest run's workflow task timeout is %v, not the %v it was started with", t.id, got, r.cfg.WorkflowTaskTimeout)
		}
	}
	r.progress("workflow task timeout %v kept by every session (%d of %d continued as new)", r.cfg.WorkflowTaskTimeout, runs, len(r.sessions))
}

// checkLeases checks that no session's lease outlives its closed workflow.
func (r *runner) checkLeases(ctx context.Context) {
	for _, t := range append(r.sessions[:len(r.sessions):len(r.sessions)], r.cycledSessions(true)...) {
		l, err := r.reader.LeaseOf(ctx, t.id)
		switch {
		case err != nil:
			r.fail("session %s: reading its lease: %v", t.id, err)
		case l != nil:
			r.fail("session %s: lease still held after the final dispose: handle %s, owner %+v, pid %d", t.id, l.Handle, l.Owner, l.PID)
		}
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... %d more", len(s)-n))
	}
	return s
}

// abbreviate prints a seq list, eliding the middle of a long one.
func abbreviate(seqs []int64) string {
	if len(seqs) <= 40 {
		return fmt.Sprint(seqs)
	}
	return fmt.Sprintf("%v ... %v", seqs[:20], seqs[len(seqs)-20:])
}
