// Package bench is sessionflow's performance harness: it starts an
// ephemeral Temporal dev server and an in-process sessionflow worker, and
// measures, in one run, the workflow costs of sessionflow against baselines
// measured in the same run (a one-activity no-op workflow, and an entity
// workflow that keeps its events in workflow state), the history a resume
// records for logs of growing size, and, through `go test ./jsonl -bench`,
// the store. Report renders the results as docs/PERFORMANCE.md. Beside
// them, RunFleet measures many live sessions on one worker, RunCompaction
// one long session compacting its conversation against the scripted model,
// and RunLive the latency of the live text from the provider's chunk to a
// client of the worker's HTTP API, beside the heartbeat path; each renders
// its own section of the report.
//
// The measurements run from the perf command (bench/cmd/perf), never from
// `go test ./...`, which only runs smoke tests with tiny sizes.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// beside the program wiring it measures. It may import any package below the
// client's row (wire, internal/lib/..., session, jsonl, provider, tool,
// activities, agent, workflows) and client, and the other program-wiring
// packages (internal/app/..., deploy); nothing of testsuite.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/tool"
	tlog "go.temporal.io/sdk/log"
)

// taskQueue is the task queue of the harness's worker.
const taskQueue = "sessionflow-bench"

// workflowTimeout bounds the harness's workflows and activities.
const workflowTimeout = 2 * time.Minute

// Config sizes a run. DefaultConfig gives the documented run; the smoke
// test shrinks every size.
type Config struct {
	// LatencyRuns is the number of sequential creates (and of no-op
	// workflows) whose latencies are compared.
	LatencyRuns int
	// Sessions is the number of sessions created for the throughput
	// measurement, InFlight how many creates run at once.
	Sessions int
	InFlight int
	// AppendDuration is how long each append-rate configuration runs;
	// AppendCallers is the number of concurrent callers on one session.
	AppendDuration time.Duration
	AppendCallers  int
	// CoalesceWindow is the coalescing window of the "with coalescing"
	// measurements (sessionflow's default), TinyWindow that of "without".
	CoalesceWindow time.Duration
	TinyWindow     time.Duration
	// HistorySizes are the event counts of the logs whose resume history is
	// measured.
	HistorySizes []int
	// EntityBatch events of EntityEventBytes bytes of text each make one
	// append of the entity comparison; EntityMaxAppends bounds it.
	EntityBatch      int
	EntityEventBytes int
	EntityMaxAppends int
	// SessionflowMaxAppends bounds the sessionflow side of the entity
	// comparison (its appends wait for the coalescing timer, so it is the
	// slow side).
	SessionflowMaxAppends int
	// Store runs the store benchmarks (`go test ./jsonl -bench`) from
	// ModuleDir with StoreBenchSize bytes for the open benchmarks.
	Store          bool
	ModuleDir      string
	StoreBenchSize int64
	// Turns sizes the turn measurements; TurnsOnly runs only them (no
	// store benchmarks, no other workflow measurement).
	Turns     TurnsConfig
	TurnsOnly bool
	// AppendPathOnly runs only the append path comparison (the entity
	// workflow, the local-activity store and the activity store, in one
	// run); LongAppends, when positive, runs that many single-caller appends
	// on one session, timed at the start and at the end (beside the
	// comparison when AppendPathOnly is set, alone otherwise).
	AppendPathOnly bool
	LongAppends    int
	// ServerArgs are more arguments of the dev server (`temporal server
	// start-dev`), e.g. --metrics-port to read its request counts.
	ServerArgs []string
	// TemporalAddress, when set, is the Temporal frontend (host:port) the
	// measurements run against instead of the embedded dev server, in the
	// namespace TemporalNamespace ("default" when empty): a server whose
	// persistence makes its writes durable, as the local cluster's
	// PostgreSQL does, where the dev server keeps its state in memory.
	TemporalAddress, TemporalNamespace string
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
	// extraProviders are offered by the worker beside the turn
	// measurements' providers (the compaction measurement's model).
	extraProviders provider.Set
}

// DefaultConfig returns the sizes of the documented run.
func DefaultConfig() Config {
	return Config{
		LatencyRuns:           30,
		Sessions:              200,
		InFlight:              16,
		AppendDuration:        8 * time.Second,
		AppendCallers:         16,
		CoalesceWindow:        200 * time.Millisecond,
		TinyWindow:            time.Millisecond,
		HistorySizes:          []int{10, 10_000, 1_000_000},
		EntityBatch:           8,
		EntityEventBytes:      512,
		EntityMaxAppends:      3000,
		SessionflowMaxAppends: 100,
		Store:                 true,
		ModuleDir:             ".",
		StoreBenchSize:        100 << 20,
		Turns:                 DefaultTurnsConfig(),
	}
}

// env is a running server, worker and clients.
type env struct {
	cfg    Config
	server *devserver.Server
	tc     temporalclient.Client
	sf     *client.Client
	store  *jsonl.Store
	root   string
	stop   func() error
	log    func(format string, args ...any)
	// clock times the tool rounds of the round providers.
	clock *roundClock
	// syncs counts the worker store's fsyncs.
	syncs *syncCounter
	// rpcs counts the attempts of tc's calls.
	rpcs *rpcCounter
}

// Run starts a dev server and a worker, runs every measurement of cfg and
// stops them again.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	logf := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "perf: "+format+"\n", args...)
		}
	}
	res := &Results{Config: cfg, Started: time.Now(), LoadBefore: LoadAverage()}
	if cfg.Store && !cfg.TurnsOnly && !cfg.appendOnly() {
		logf("store benchmarks (go test ./jsonl -bench)")
		st, err := RunStoreBenchmarks(ctx, cfg.ModuleDir, cfg.StoreBenchSize)
		if err != nil {
			return nil, err
		}
		res.Store = st
	}
	e, err := start(ctx, cfg, logf)
	if err != nil {
		return nil, err
	}
	defer func() { _ = e.stop() }()

	steps := []struct {
		name string
		fn   func(context.Context, *Results) error
	}{
		{"create-to-live latency vs no-op workflow", e.latency},
		{"sessions per second", e.throughput},
		{"appends per second", e.appendRates},
		{"resume history vs log size", e.resumeHistory},
		{"entity workflow vs sessionflow, and the append paths", e.appendPath},
	}
	if cfg.TurnsOnly || cfg.appendOnly() {
		steps = steps[:0]
	}
	if cfg.AppendPathOnly {
		steps = append(steps, struct {
			name string
			fn   func(context.Context, *Results) error
		}{"append path: local activity, activity, entity workflow", e.appendPath})
	}
	if cfg.LongAppends > 0 {
		steps = append(steps, struct {
			name string
			fn   func(context.Context, *Results) error
		}{"a long session's appends", e.longAppends})
	}
	if (cfg.Turns.Enabled && !cfg.appendOnly()) || cfg.TurnsOnly {
		steps = append(steps, struct {
			name string
			fn   func(context.Context, *Results) error
		}{"turns: sessionflow vs the agent-sample pattern", e.turns})
	}
	for _, s := range steps {
		logf("%s", s.name)
		t0 := time.Now()
		if err := s.fn(ctx, res); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		logf("%s: %s", s.name, time.Since(t0).Round(time.Millisecond))
	}
	res.LoadAfter = LoadAverage()
	res.Elapsed = time.Since(res.Started)
	if err := e.stop(); err != nil {
		return nil, fmt.Errorf("stopping: %w", err)
	}
	return res, nil
}

// startServer starts the embedded dev server, or connects to
// cfg.TemporalAddress, and returns its client and how to stop it (ds is nil
// for a server the harness did not start).
//
// The client it returns counts its calls' attempts in rpcs (the worker's
// and the bench's alike), so that a run can report the updates the server
// refused and the SDK sent again.
func startServer(ctx context.Context, cfg Config, rpcs *rpcCounter, logf func(string, ...any)) (ds *devserver.Server, tc temporalclient.Client, stop func() error, err error) {
	dial := func(address, ns string) (temporalclient.Client, error) {
		return temporalclient.DialContext(ctx, temporalclient.Options{HostPort: address, Namespace: ns,
			Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			// As sessionflow's programs dial (temporalconn): an update refused
			// while a session continues as new is sent again at once.
			ConnectionOptions: temporalclient.ConnectionOptions{DialOptions: []grpc.DialOption{
				client.DialOption(), grpc.WithChainUnaryInterceptor(rpcs.interceptor)}},
		})
	}
	if cfg.TemporalAddress != "" {
		ns := cfg.TemporalNamespace
		if ns == "" {
			ns = "default"
		}
		logf("connecting to the Temporal server at %s (namespace %s)", cfg.TemporalAddress, ns)
		tc, err = dial(cfg.TemporalAddress, ns)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("connecting to %s: %w", cfg.TemporalAddress, err)
		}
		return nil, tc, func() error { tc.Close(); return nil }, nil
	}
	logf("starting the dev server")
	ds, err = devserver.Start(ctx, devserver.Options{
		Ephemeral: true,
		Locate:    devserver.LocateOptions{Progress: cfg.Progress, WorkDir: cfg.ModuleDir},
		ExtraArgs: cfg.ServerArgs,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting the dev server: %w", err)
	}
	if tc, err = dial(ds.Address(), ds.Namespace()); err != nil {
		return nil, nil, nil, errors.Join(fmt.Errorf("connecting to the dev server: %w", err), ds.Stop())
	}
	return ds, tc, func() error { tc.Close(); return ds.Stop() }, nil
}

// start starts the dev server (or connects to cfg.TemporalAddress) and the
// worker.
func start(ctx context.Context, cfg Config, logf func(string, ...any)) (*env, error) {
	root, err := os.MkdirTemp("", "sessionflow-bench-")
	if err != nil {
		return nil, fmt.Errorf("creating the store root: %w", err)
	}
	rpcs := newRPCCounter()
	ds, tc, stopServer, err := startServer(ctx, cfg, rpcs, logf)
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone})
	if err != nil {
		_ = stopServer()
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	wcfg := workerapp.DefaultConfig()
	wcfg.Client = tc
	wcfg.TaskQueue = taskQueue
	wcfg.StoreRoot = root
	wcfg.Compression = jsonl.CompressionNone
	wcfg.MetricsAddress = ""
	wcfg.StopTimeout = 10 * time.Second
	providers, err := turnProviders(cfg.Turns)
	if err != nil {
		_ = stopServer()
		_ = os.RemoveAll(root)
		return nil, err
	}
	for name, p := range cfg.extraProviders {
		providers[name] = p
	}
	syncs := &syncCounter{}
	wcfg.StoreFS = timedFS{FS: jsonl.OSFS{}, c: syncs}
	clock := newRoundClock(syncs)
	for name, p := range roundProviders(cfg.Turns.Rounds, cfg.Turns.ResponseChunks, cfg.Turns.ChunkBytes, clock) {
		providers[name] = p
	}
	tools, err := tool.NewRegistry(NoopTool())
	if err != nil {
		_ = stopServer()
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("the sample's tools: %w", err)
	}
	wcfg.Agent.Providers = providers
	wcfg.Agent.Tools = append(wcfg.Agent.Tools, NoopTool())
	wcfg.Register = func(r worker.Registry) {
		Register(r)
		RegisterSample(r, providers, tools)
	}
	started := make(chan struct{})
	wcfg.OnStarted = func(workerapp.Started) { close(started) }
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- workerapp.Run(wctx, wcfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	select {
	case <-started:
	case err := <-done:
		cancel()
		_ = stopServer()
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("starting the worker: %w", err)
	}
	stopped := false
	var stopErr error
	e := &env{
		cfg:    cfg,
		server: ds,
		tc:     tc,
		rpcs:   rpcs,
		sf:     client.New(tc, client.Options{TaskQueue: taskQueue, Namespace: cfg.TemporalNamespace}),
		store:  st,
		root:   root,
		log:    logf,
		clock:  clock,
		syncs:  syncs,
	}
	e.stop = func() error {
		if stopped {
			return stopErr
		}
		stopped = true
		cancel()
		werr := <-done
		serr := stopServer()
		_ = os.RemoveAll(root)
		if werr != nil {
			stopErr = fmt.Errorf("worker: %w", werr)
		} else if serr != nil {
			stopErr = fmt.Errorf("dev server: %w", serr)
		}
		return stopErr
	}
	return e, nil
}

// LoadAverage returns the 1-minute load average, or -1 when it cannot be
// read.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	if _, err := fmt.Sscanf(string(b), "%f", &l); err != nil {
		return -1
	}
	return l
}

// appendOnly reports whether the run measures only the append path
// (AppendPathOnly or LongAppends).
func (c Config) appendOnly() bool { return c.AppendPathOnly || c.LongAppends > 0 }
