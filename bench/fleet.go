package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	temporalclient "go.temporal.io/sdk/client"
	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// fleetTaskQueue is the task queue of the many-sessions measurement.
const fleetTaskQueue = "sessionflow-fleet"

// FleetConfig sizes the many-sessions measurement: Sessions live sessions
// on one worker (created through the client, InFlight at a time, and left
// live), Appends single-event appends measured on one session before they
// exist and over random sessions once they do, and the same appends after
// the worker is replaced by one whose workflow cache (SmallCache) holds only
// part of them, so that most appends find their session evicted.
type FleetConfig struct {
	Sessions       int
	InFlight       int
	Appends        int
	MaxDescriptors int
	SmallCache     int
	ModuleDir      string
	Progress       io.Writer
}

// DefaultFleetConfig returns the sizes of the documented run.
func DefaultFleetConfig() FleetConfig {
	return FleetConfig{
		Sessions:       10_000,
		InFlight:       32,
		Appends:        1_000,
		MaxDescriptors: workerapp.DefaultMaxStoreDescriptors,
		SmallCache:     1_000,
		ModuleDir:      ".",
	}
}

// ProcSample is the process's footprint at one moment: resident memory,
// the Go heap in use after a collection, open descriptors and goroutines.
type ProcSample struct {
	RSS        int64
	HeapInuse  int64
	FDs        int
	Goroutines int
}

// Latencies are the percentiles of one set of appends.
type Latencies struct {
	N             int
	P50, P99, Max time.Duration
	Mean          time.Duration
}

// FleetResults are the many-sessions measurements of one run.
type FleetResults struct {
	Config     FleetConfig
	Started    time.Time
	Elapsed    time.Duration
	LoadBefore float64
	LoadAfter  float64
	// NoFileLimit is the process's descriptor limit (RLIMIT_NOFILE).
	NoFileLimit uint64
	// CreateElapsed is the time the Sessions creates took; Created how
	// many succeeded (all, or the run fails).
	CreateElapsed time.Duration
	Created       int
	// One is the footprint with one live session, Created0 with every
	// session live and none appended to yet, All after the appends over
	// random sessions; PeakFDs the most descriptors open at any sample of
	// the run until the worker is replaced.
	One, Created0, All ProcSample
	// StoreOpen is the descriptors the store kept open at All.
	StoreOpen int
	PeakFDs   int
	// PeakStoreFDs is the most descriptors the worker's store kept open at
	// any sample (jsonl.Store.OpenDescriptors), against the limit.
	PeakStoreFDs int
	// Failures are the first workflow task failures found, with their
	// causes.
	Failures []string
	// Single is the appends on one session before the others exist, Fleet
	// those over random sessions with all of them live, Evicted those over
	// random sessions after the worker was replaced by one with a small
	// workflow cache.
	Single, Fleet, Evicted Latencies
	// EvictedDistinct is how many distinct sessions the evicted phase
	// appended to (each replayed from its history on its first append).
	EvictedDistinct int
	// Histories is how many session histories were read at the end, with
	// the workflow task timeouts and failures found in them.
	Histories    int
	TaskTimeouts int
	TaskFailures int
	// PrematureEnd is how many of the task failures are the server's
	// "premature end of stream" of a history read after an eviction while
	// an update's speculative task is pending (temporalio/temporal#7741);
	// the SDK fails that task and the next one, with the whole history,
	// goes on.
	PrematureEnd  int
	ActivityFails int
}

// latencies summarizes durations into percentiles.
func latencies(ds []time.Duration) Latencies {
	if len(ds) == 0 {
		return Latencies{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return Latencies{N: len(s), P50: at(0.50), P99: at(0.99), Max: s[len(s)-1], Mean: sum / time.Duration(len(s))}
}

// sampleProc reads the process's footprint; gc collects first so that the
// heap in use is what is live.
func sampleProc(gc bool) ProcSample {
	if gc {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ProcSample{RSS: rss(), HeapInuse: int64(ms.HeapInuse), FDs: countFDs(), Goroutines: runtime.NumGoroutine()}
}

// rss is the process's resident set size in bytes, -1 when unknown.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	var size, res int64
	if _, err := fmt.Sscanf(string(b), "%d %d", &size, &res); err != nil {
		return -1
	}
	return res * int64(os.Getpagesize())
}

// countFDs is the number of the process's open descriptors, -1 when
// unknown.
func countFDs() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

// fleetWorker is an in-process worker of the measurement.
type fleetWorker struct {
	stop  func() error
	store *jsonl.Store
}

func startFleetWorker(ds *devserver.Server, root string, limit, cacheSize int) (*fleetWorker, error) {
	wcfg := workerapp.DefaultConfig()
	wcfg.Client = ds.Client()
	wcfg.TaskQueue = fleetTaskQueue
	wcfg.StoreRoot = root
	wcfg.Compression = jsonl.CompressionNone
	wcfg.MetricsAddress = ""
	wcfg.StopTimeout = 10 * time.Second
	wcfg.MaxStoreDescriptors = limit
	wcfg.WorkflowCacheSize = cacheSize
	started := make(chan *jsonl.Store, 1)
	wcfg.OnStarted = func(s workerapp.Started) { started <- s.Store }
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- workerapp.Run(wctx, wcfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	select {
	case st := <-started:
		return &fleetWorker{stop: func() error { cancel(); return <-done }, store: st}, nil
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("starting the worker: %w", err)
	}
}

// RunFleet starts a dev server and a worker and measures Sessions live
// sessions on that worker.
func RunFleet(ctx context.Context, cfg FleetConfig) (*FleetResults, error) {
	logf := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "perf: fleet: "+format+"\n", args...)
		}
	}
	res := &FleetResults{Config: cfg, Started: time.Now(), LoadBefore: LoadAverage()}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil {
		res.NoFileLimit = rl.Cur
	}
	root, err := os.MkdirTemp("", "sessionflow-fleet-")
	if err != nil {
		return nil, fmt.Errorf("creating the store root: %w", err)
	}
	defer os.RemoveAll(root)
	logf("starting the dev server")
	ds, err := devserver.Start(ctx, devserver.Options{
		Ephemeral: true,
		Locate:    devserver.LocateOptions{Progress: cfg.Progress, WorkDir: cfg.ModuleDir},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the dev server: %w", err)
	}
	defer func() { _ = ds.Stop() }()
	w, err := startFleetWorker(ds, root, cfg.MaxDescriptors, 0)
	if err != nil {
		return nil, err
	}
	defer func() {
		if w != nil {
			_ = w.stop()
		}
	}()
	sf := client.New(ds.Client(), client.Options{TaskQueue: fleetTaskQueue})

	var peak, peakStore atomic.Int64
	var current atomic.Pointer[jsonl.Store]
	current.Store(w.store)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if n := int64(countFDs()); n > peak.Load() {
				peak.Store(n)
			}
			if n, _ := current.Load().OpenDescriptors(); int64(n) > peakStore.Load() {
				peakStore.Store(int64(n))
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
		}
	}()

	n := cfg.Sessions
	ids := make([]string, n+1)
	next := make([]int64, n+1)
	ids[n] = "fleet-single"
	info, err := sf.Create(ctx, wire.CreateSessionRequest{SessionID: ids[n], Meta: &wire.SessionMeta{Cwd: "/bench"}})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", ids[n], err)
	}
	next[n] = info.NextSeq
	appendTo := func(i int) (time.Duration, error) {
		ev, err := event(next[i], 64)
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		r, err := sf.Append(ctx, ids[i], session.WireEvents([]session.Event{ev}))
		d := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("append to %s at %d: %w", ids[i], next[i], err)
		}
		if r.NextSeq != next[i]+1 {
			return 0, fmt.Errorf("append to %s at %d: the session's cursor is %d, want %d", ids[i], next[i], r.NextSeq, next[i]+1)
		}
		next[i]++
		return d, nil
	}
	measure := func(pick func(k int) int) ([]time.Duration, error) {
		ds := make([]time.Duration, 0, cfg.Appends)
		for k := 0; k < cfg.Appends; k++ {
			d, err := appendTo(pick(k))
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		return ds, nil
	}
	logf("%d appends on one session", cfg.Appends)
	if _, err := measure(func(int) int { return n }); err != nil { // warm-up
		return nil, err
	}
	single, err := measure(func(int) int { return n })
	if err != nil {
		return nil, err
	}
	res.Single = latencies(single)
	res.One = sampleProc(true)

	logf("creating %d sessions, %d at a time", n, cfg.InFlight)
	var created atomic.Int64
	t0 := time.Now()
	el, err := parallel(n, cfg.InFlight, func(i int) error {
		ids[i] = fmt.Sprintf("fleet-%05d", i)
		info, err := sf.Create(ctx, wire.CreateSessionRequest{SessionID: ids[i], Meta: &wire.SessionMeta{Cwd: "/bench"}})
		if err != nil {
			return fmt.Errorf("create %s: %w", ids[i], err)
		}
		next[i] = info.NextSeq
		if c := created.Add(1); c%1000 == 0 {
			logf("  %d sessions live after %s, %d descriptors open", c, time.Since(t0).Round(time.Second), countFDs())
		}
		return nil
	})
	res.Created = int(created.Load())
	res.CreateElapsed = el
	if err != nil {
		return nil, fmt.Errorf("after %d creates: %w", res.Created, err)
	}
	res.Created0 = sampleProc(true)

	rng := rand.New(rand.NewPCG(1, 2))
	logf("%d appends over random sessions of %d", cfg.Appends, n)
	if _, err := measure(func(int) int { return rng.IntN(n) }); err != nil { // warm-up
		return nil, err
	}
	fleet, err := measure(func(int) int { return rng.IntN(n) })
	if err != nil {
		return nil, err
	}
	res.Fleet = latencies(fleet)
	res.All = sampleProc(true)
	res.StoreOpen, _ = w.store.OpenDescriptors()

	logf("replacing the worker by one with a workflow cache of %d", cfg.SmallCache)
	if err := w.stop(); err != nil {
		w = nil
		return nil, fmt.Errorf("stopping the worker: %w", err)
	}
	res.PeakFDs, res.PeakStoreFDs = int(peak.Load()), int(peakStore.Load())
	runtime.GC() // the stopped worker's store keeps its descriptors until collected
	if w, err = startFleetWorker(ds, root, cfg.MaxDescriptors, cfg.SmallCache); err != nil {
		return nil, err
	}
	current.Store(w.store)
	seen := map[int]bool{}
	evicted, err := measure(func(int) int {
		i := rng.IntN(n)
		seen[i] = true
		return i
	})
	if err != nil {
		return nil, err
	}
	res.Evicted = latencies(evicted)
	res.EvictedDistinct = len(seen)
	res.PeakStoreFDs = max(res.PeakStoreFDs, int(peakStore.Load()))

	logf("reading %d histories", n+1)
	if err := scanHistories(ctx, ds.Client(), ids, res); err != nil {
		return nil, err
	}
	res.LoadAfter = LoadAverage()
	res.Elapsed = time.Since(res.Started)
	return res, nil
}

// scanHistories counts the workflow task timeouts and failures, and the
// failed activities, in the histories of the sessions ids.
func scanHistories(ctx context.Context, tc temporalclient.Client, ids []string, res *FleetResults) error {
	var mu sync.Mutex
	_, err := parallel(len(ids), 8, func(i int) error {
		it := tc.GetWorkflowHistory(ctx, wire.WorkflowID(ids[i]), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var timeouts, failures, acts, premature int
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return fmt.Errorf("history of %s: %w", ids[i], err)
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				timeouts++
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
				failures++
				a := ev.GetWorkflowTaskFailedEventAttributes()
				if strings.Contains(a.GetFailure().GetMessage(), "premature end of stream") {
					premature++
				}
				mu.Lock()
				if len(res.Failures) < 5 {
					res.Failures = append(res.Failures, fmt.Sprintf("%s: %s: %s", ids[i], a.GetCause(), a.GetFailure().GetMessage()))
				}
				mu.Unlock()
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
				acts++
			}
		}
		mu.Lock()
		res.Histories++
		res.TaskTimeouts += timeouts
		res.TaskFailures += failures
		res.PrematureEnd += premature
		res.ActivityFails += acts
		mu.Unlock()
		return nil
	})
	return err
}
