package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/wire"
)

// liveTaskQueue and liveProvider are the task queue and the provider of the
// live text measurement.
const (
	liveTaskQueue = "sessionflow-live"
	liveProvider  = "bench-stamps"
)

// LiveConfig sizes the live text measurement: Sessions sessions stream one
// turn each at the same time; each turn's model call streams Chunks text
// chunks, one every ChunkEvery, each carrying the time the provider made
// it.
type LiveConfig struct {
	Sessions   int
	Chunks     int
	ChunkEvery time.Duration
	// WatchInterval is client.WatchTurn's poll interval on the heartbeat
	// path (0: its default).
	WatchInterval time.Duration
	ModuleDir     string
	Progress      io.Writer
}

// DefaultLiveConfig returns the sizes of the documented run.
func DefaultLiveConfig() LiveConfig {
	return LiveConfig{Sessions: 100, Chunks: 60, ChunkEvery: 50 * time.Millisecond, ModuleDir: "."}
}

// LiveResults are the live text measurements of one run: the time from
// the provider's chunk to a reader seeing its text, on each path.
type LiveResults struct {
	Config     LiveConfig
	Started    time.Time
	Elapsed    time.Duration
	LoadBefore float64
	LoadAfter  float64
	// Sent is how many chunks the provider made.
	Sent int
	// Live is the livetext follower's (livetext.Source over a store of the
	// root, as another process would open it); Heartbeat is
	// client.WatchTurn's without a live source (the heartbeat details,
	// polled through DescribeWorkflow, then the stored answer at the turn's
	// end).
	Live, Heartbeat Latencies
	// Watch is client.WatchTurn's with the live source (WatchOptions.Live),
	// a second watch of each turn beside the heartbeat one.
	Watch Latencies
	// WatchAfterFirst is the part of Watch yielded after each watch's
	// first text progress (which waits for the LoopState answer that names
	// the turn).
	WatchAfterFirst Latencies
	// HTTP is the live text through the worker's HTTP API (`worker
	// --http`, package httpapi): GET /v1/sessions/{id}/live, the route the
	// web view reads, one Server-Sent Events stream per session, read by an
	// HTTP client over loopback.
	HTTP Latencies
	// HTTPStreams is how many live streams the HTTP API held open at once
	// (one per session); HTTPOrderErrors counts chunks an HTTP stream
	// delivered out of offset order or twice (0 when sound).
	HTTPStreams, HTTPOrderErrors int
	// HeartbeatLive is the part of Heartbeat yielded before the answer was
	// stored (from the heartbeat details, not from the stored answer).
	HeartbeatLive Latencies
	// Turns is how many turns completed.
	Turns int
	// PushNs and PushLiveNs are the model activity's work per chunk, in
	// nanoseconds: the assembler's push alone, and the push with the chunk
	// handed to a live file (testing.Benchmark, before the turns).
	PushNs, PushLiveNs float64
}

// chunkCost measures the model activity's work per chunk with and without
// the live file (what livetext's BenchmarkModelChunk measures).
func chunkCost() (push, pushLive float64, err error) {
	chunk := provider.Chunk{Type: provider.ChunkText, Delta: "a token or two "}
	r := testing.Benchmark(func(b *testing.B) {
		a := provider.NewAssembler()
		for b.Loop() {
			_ = a.Push(chunk, 1)
		}
	})
	dir, err := os.MkdirTemp("", "sessionflow-livecost-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	var werr error
	rl := testing.Benchmark(func(b *testing.B) {
		a := provider.NewAssembler()
		w, err := livetext.Start(dir, 1, 1, 1)
		if err != nil {
			werr = err
			return
		}
		for b.Loop() {
			_ = a.Push(chunk, 1)
			w.Chunk(wire.LiveKindText, chunk.Delta)
		}
		b.StopTimer()
		_ = w.End(true)
	})
	if werr != nil {
		return 0, 0, werr
	}
	return float64(r.NsPerOp()), float64(rl.NsPerOp()), nil
}

// stampProvider streams chunks text chunks, one every every, each the
// time it was made: "[<unix nanoseconds, 19 digits>]".
type stampProvider struct {
	chunks int
	every  time.Duration
}

func (p stampProvider) Stream(ctx context.Context, _ provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		t := time.NewTicker(p.every)
		defer t.Stop()
		for range p.chunks {
			select {
			case <-ctx.Done():
				yield(provider.Chunk{}, ctx.Err())
				return
			case <-t.C:
			}
			if !yield(provider.Chunk{Type: provider.ChunkText, Delta: stamp(time.Now())}, nil) {
				return
			}
		}
		if !yield(provider.Chunk{Type: provider.ChunkUsage, Usage: &provider.Usage{InputTokens: 1, OutputTokens: int64(p.chunks)}}, nil) {
			return
		}
		yield(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishStop}, nil)
	}
}

// stampLen is the length of a stamp.
const stampLen = 21

func stamp(t time.Time) string { return fmt.Sprintf("[%019d]", t.UnixNano()) }

// stamps returns the times of the whole stamps in text.
func stamps(text string) []time.Time {
	var out []time.Time
	for i := 0; i+stampLen <= len(text); i++ {
		if text[i] != '[' || text[i+stampLen-1] != ']' {
			continue
		}
		n, err := strconv.ParseInt(text[i+1:i+stampLen-1], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, time.Unix(0, n))
		i += stampLen - 1
	}
	return out
}

// seen records, per path, the latency of each stamp the first time it is
// seen.
type seen struct {
	mu    sync.Mutex
	first map[int64]bool
	ds    []time.Duration
}

func (s *seen) add(at time.Time, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range stamps(text) {
		if s.first[t.UnixNano()] {
			continue
		}
		s.first[t.UnixNano()] = true
		s.ds = append(s.ds, at.Sub(t))
	}
}

func newSeen() *seen { return &seen{first: map[int64]bool{}} }

// seenText is a text progress and when it was yielded.
type seenText struct {
	at   time.Time
	text string
}

// RunLive starts a dev server and a worker (with its HTTP API on loopback)
// whose model provider stamps its chunks, runs one turn on each of Sessions
// sessions at once, and measures how long each chunk takes to reach a
// client of the HTTP API's live route, a livetext follower,
// client.WatchTurn with the live source and client.WatchTurn's heartbeat
// path.
func RunLive(ctx context.Context, cfg LiveConfig) (*LiveResults, error) {
	logf := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "perf: live: "+format+"\n", args...)
		}
	}
	res := &LiveResults{Config: cfg, Started: time.Now(), LoadBefore: LoadAverage()}
	var err error
	logf("the model activity's cost per chunk")
	if res.PushNs, res.PushLiveNs, err = chunkCost(); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "sessionflow-live-")
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

	wcfg := workerapp.DefaultConfig()
	wcfg.Client = ds.Client()
	wcfg.TaskQueue = liveTaskQueue
	wcfg.StoreRoot = root
	wcfg.Compression = jsonl.CompressionNone
	wcfg.MetricsAddress = ""
	wcfg.StopTimeout = 10 * time.Second
	wcfg.Agent.Providers = provider.Set{liveProvider: stampProvider{chunks: cfg.Chunks, every: cfg.ChunkEvery}}
	// The worker serves the HTTP API as `worker --http` does, with its
	// default options: its live route is the one measured.
	wcfg.HTTPAddress = "127.0.0.1:0"
	started := make(chan workerapp.Started, 1)
	wcfg.OnStarted = func(s workerapp.Started) { started <- s }
	wctx, cancelWorker := context.WithCancel(context.Background())
	workerDone := make(chan error, 1)
	go func() { workerDone <- workerapp.Run(wctx, wcfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	defer func() { cancelWorker(); <-workerDone }()
	var httpBase string
	select {
	case s := <-started:
		httpBase = "http://" + s.HTTPAddr
	case err := <-workerDone:
		return nil, fmt.Errorf("starting the worker: %w", err)
	}
	// The followers read the root through a store of their own, as a
	// process beside the worker would.
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone})
	if err != nil {
		return nil, err
	}
	sf := client.New(ds.Client(), client.Options{TaskQueue: liveTaskQueue})
	// One HTTP connection per stream, as separate clients would hold.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Sessions, DisableCompression: true}}
	defer hc.CloseIdleConnections()

	n := cfg.Sessions
	ids := make([]string, n)
	logf("creating %d sessions", n)
	if _, err := parallel(n, 16, func(i int) error {
		ids[i] = fmt.Sprintf("live-%04d", i)
		_, err := sf.Create(ctx, wire.CreateSessionRequest{SessionID: ids[i], Meta: &wire.SessionMeta{Cwd: "/bench"},
			AgentOptions: &wire.AgentOptions{Provider: liveProvider, Model: "bench"}})
		if err != nil {
			return fmt.Errorf("create %s: %w", ids[i], err)
		}
		return nil
	}); err != nil {
		return nil, err
	}

	live, hb, hbLive, viaHTTP, viaWatch, watchLater := newSeen(), newSeen(), newSeen(), newSeen(), newSeen(), newSeen()
	var openStreams, maxStreams, orderErrors atomic.Int64
	logf("%d sessions stream a turn of %d chunks, one every %s", n, cfg.Chunks, cfg.ChunkEvery)
	t0 := time.Now()
	var (
		mu    sync.Mutex
		turns int
	)
	_, err = parallel(n, n, func(i int) error {
		fctx, stopFollow := context.WithCancel(ctx)
		followed := make(chan error, 1)
		go func() {
			var ferr error
			for e, err := range (livetext.Source{Store: st}).FollowLive(fctx, ids[i]) {
				if err != nil {
					ferr = err
					break
				}
				if e.Event == wire.LiveChunk {
					live.add(time.Now(), e.Text)
				}
			}
			followed <- ferr
		}()
		// The HTTP stream is open (its first comment read) before the
		// turn starts, as a viewer's page is.
		sseDone := make(chan error, 1)
		opened := make(chan struct{})
		go func() {
			next := map[string]int64{} // kind -> the next offset expected
			isOpen := false
			defer func() {
				if isOpen {
					openStreams.Add(-1)
				}
			}()
			sseDone <- followSSE(fctx, hc, httpBase, ids[i], func() {
				isOpen = true
				maxInt(&maxStreams, openStreams.Add(1))
				close(opened)
			}, func(e wire.LiveEvent) {
				switch e.Event {
				case wire.LiveChunk:
					viaHTTP.add(time.Now(), e.Text)
					if e.Offset != next[e.Kind] {
						orderErrors.Add(1)
					}
					next[e.Kind] = e.Offset + int64(len(e.Text))
				case wire.LiveReset:
					clear(next)
				}
			})
		}()
		select {
		case <-opened:
		case err := <-sseDone:
			stopFollow()
			if err == nil {
				err = errors.New("the stream ended before it opened")
			}
			return fmt.Errorf("follow %s over HTTP: %w", ids[i], err)
		}
		content, _ := json.Marshal("stream")
		in, err := sf.Followup(ctx, ids[i], wire.InputRequest{Content: content})
		if err != nil {
			stopFollow()
			return fmt.Errorf("followup %s: %w", ids[i], err)
		}
		watchDone := make(chan error, 1)
		go func() {
			texted := false
			for p, err := range sf.WatchTurn(ctx, ids[i], in.MessageID, client.WatchOptions{Interval: cfg.WatchInterval, Events: st, Live: livetext.Source{Store: st}}) {
				if err != nil {
					watchDone <- fmt.Errorf("watch %s with the live source: %w", ids[i], err)
					return
				}
				if p.Kind == client.ProgressText {
					now := time.Now()
					if texted {
						watchLater.add(now, p.Text)
					}
					texted = true
					viaWatch.add(now, p.Text)
				}
			}
			watchDone <- nil
		}()
		var (
			ended *wire.TurnInfo
			texts []seenText
			evs   []wire.Event
		)
		for p, err := range sf.WatchTurn(ctx, ids[i], in.MessageID, client.WatchOptions{Interval: cfg.WatchInterval, Events: st}) {
			if err != nil {
				stopFollow()
				return fmt.Errorf("watch %s: %w", ids[i], err)
			}
			switch p.Kind {
			case client.ProgressText:
				now := time.Now()
				hb.add(now, p.Text)
				texts = append(texts, seenText{at: now, text: p.Text})
			case client.ProgressEnded:
				ended, evs = p.Info, p.Events
			}
		}
		// The text the heartbeat details showed: what the watch yielded
		// before the answer was stored (the rest it read from the log).
		stored := time.Time{}
		for _, e := range evs {
			if e.Type == wire.TypeAssistantMessage {
				stored = time.UnixMilli(e.Time)
			}
		}
		for _, t := range texts {
			if !stored.IsZero() && t.at.Before(stored) {
				hbLive.add(t.at, t.text)
			}
		}
		// The follower saw the end marker well before the turn's end; a
		// moment more for a slow one.
		time.Sleep(100 * time.Millisecond)
		stopFollow()
		if err := <-followed; err != nil {
			return fmt.Errorf("follow %s: %w", ids[i], err)
		}
		if err := <-watchDone; err != nil {
			return err
		}
		if err := <-sseDone; err != nil {
			return fmt.Errorf("follow %s over HTTP: %w", ids[i], err)
		}
		if ended == nil || ended.Reason == nil || ended.Reason.Kind != wire.TurnEndCompleted {
			return fmt.Errorf("the turn of %s did not complete: %+v", ids[i], ended)
		}
		mu.Lock()
		turns++
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	logf("done in %s", time.Since(t0).Round(time.Millisecond))
	res.Turns = turns
	res.Sent = n * cfg.Chunks
	res.Live, res.Heartbeat, res.HeartbeatLive = latencies(live.ds), latencies(hb.ds), latencies(hbLive.ds)
	res.HTTP, res.Watch, res.WatchAfterFirst = latencies(viaHTTP.ds), latencies(viaWatch.ds), latencies(watchLater.ds)
	res.HTTPStreams, res.HTTPOrderErrors = int(maxStreams.Load()), int(orderErrors.Load())
	res.Elapsed = time.Since(res.Started)
	res.LoadAfter = LoadAverage()
	return res, nil
}

// maxInt raises m to v if v is larger.
func maxInt(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}
