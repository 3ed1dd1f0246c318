package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionflow/sessionflow/workflows"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Stats summarizes durations.
type Stats struct {
	N      int
	Median time.Duration
	P90    time.Duration
	// P99 is the value below which 99% of the others lie: the largest of
	// fewer than 100.
	P99  time.Duration
	Mean time.Duration
	// Max is the largest.
	Max time.Duration
}

func summarize(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Stats{N: len(s), Median: s[len(s)/2], P90: s[(len(s)*9)/10], P99: s[(len(s)*99)/100], Mean: sum / time.Duration(len(s)), Max: s[len(s)-1]}
}

// Results are the measurements of one run.
type Results struct {
	// Config is the run's configuration.
	Config Config
	// Started, Elapsed and the 1-minute load averages before and after.
	Started    time.Time
	Elapsed    time.Duration
	LoadBefore float64
	LoadAfter  float64
	// Store holds the store benchmarks, nil when not run.
	Store *StoreResults
	// CreateLatency is client.Create until live; NoopLatency a one-activity
	// workflow started and awaited, measured interleaved with it.
	CreateLatency Stats
	NoopLatency   Stats
	// Throughput: sessions created per second, against no-op workflows per
	// second at the same concurrency.
	CreatesPerSecond float64
	NoopsPerSecond   float64
	// Appends are the append rates, one per (window, callers).
	Appends []AppendRate
	// History is the resume history per log size.
	History []HistoryCost
	// Entity and SessionflowSameLoad compare the history-bound entity
	// workflow with sessionflow on the same appends.
	Entity              EntityResult
	SessionflowSameLoad EntityResult
	// Turns holds the turn measurements, nil when not run.
	Turns *TurnResults
	// AppendPath holds the append path comparison, nil when not run;
	// LongAppends the long session's appends, nil when not run.
	AppendPath  *AppendPathResult
	LongAppends *LongAppendResult
}

// AppendRate is the rate of single-event Append updates on one session.
type AppendRate struct {
	Window  time.Duration
	Callers int
	// AtEnd says the callers appended at the end (client.AppendAtEnd):
	// each on its own, without agreeing on seqs.
	AtEnd   bool
	Appends int
	Elapsed time.Duration
	Latency Stats
}

// PerSecond is the number of appends stored per second.
func (a AppendRate) PerSecond() float64 { return float64(a.Appends) / a.Elapsed.Seconds() }

func (e *env) createReq(id string, window time.Duration) wire.CreateSessionRequest {
	req := wire.CreateSessionRequest{SessionID: id, Meta: &wire.SessionMeta{Cwd: "/bench"}}
	if window > 0 {
		req.Options = &wire.Options{AppendWindowMs: max(1, window.Milliseconds())}
	}
	return req
}

func (e *env) noop(ctx context.Context, id string) error {
	run, err := e.tc.ExecuteWorkflow(ctx, temporalclient.StartWorkflowOptions{
		ID: id, TaskQueue: taskQueue, WorkflowExecutionTimeout: workflowTimeout,
	}, NoopWorkflowName)
	if err != nil {
		return fmt.Errorf("starting %s: %w", id, err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return fmt.Errorf("running %s: %w", id, err)
	}
	return nil
}

// latency alternates sequential creates and no-op workflows.
func (e *env) latency(ctx context.Context, res *Results) error {
	const warmup = 2
	var creates, noops []time.Duration
	for i := 0; i < e.cfg.LatencyRuns+warmup; i++ {
		id := fmt.Sprintf("lat-%d", i)
		t0 := time.Now()
		if _, err := e.sf.Create(ctx, e.createReq(id, 0)); err != nil {
			return fmt.Errorf("create %s: %w", id, err)
		}
		d := time.Since(t0)
		if _, err := e.sf.Dispose(ctx, id); err != nil {
			return fmt.Errorf("dispose %s: %w", id, err)
		}
		t0 = time.Now()
		if err := e.noop(ctx, "noop-lat-"+id); err != nil {
			return err
		}
		n := time.Since(t0)
		if i >= warmup {
			creates = append(creates, d)
			noops = append(noops, n)
		}
	}
	res.CreateLatency = summarize(creates)
	res.NoopLatency = summarize(noops)
	return nil
}

// parallel runs fn(i) for i in [0,n) with at most inFlight at once and
// returns the elapsed time and the first error.
func parallel(n, inFlight int, fn func(i int) error) (time.Duration, error) {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	t0 := time.Now()
	for w := 0; w < inFlight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(t0), first
}

// throughput creates Sessions sessions InFlight at a time, then as many
// no-op workflows the same way.
func (e *env) throughput(ctx context.Context, res *Results) error {
	n, k := e.cfg.Sessions, e.cfg.InFlight
	el, err := parallel(n, k, func(i int) error {
		_, err := e.sf.Create(ctx, e.createReq(fmt.Sprintf("tp-%d", i), 0))
		return err
	})
	if err != nil {
		return fmt.Errorf("creating: %w", err)
	}
	res.CreatesPerSecond = float64(n) / el.Seconds()
	el, err = parallel(n, k, func(i int) error { return e.noop(ctx, fmt.Sprintf("noop-tp-%d", i)) })
	if err != nil {
		return err
	}
	res.NoopsPerSecond = float64(n) / el.Seconds()
	_, err = parallel(n, k, func(i int) error {
		_, err := e.sf.Dispose(ctx, fmt.Sprintf("tp-%d", i))
		return err
	})
	if err != nil {
		return fmt.Errorf("disposing: %w", err)
	}
	return nil
}

// event returns a todo/write event at seq carrying pad bytes of text.
func event(seq int64, pad int) (session.Event, error) {
	return session.NewEvent(wire.TypeTodoWrite, seq, 1_700_000_000_000+seq, map[string]any{"text": strings.Repeat("x", pad)})
}

// appendRates measures single-event appends on one session for every
// combination of window and callers.
func (e *env) appendRates(ctx context.Context, res *Results) error {
	if err := e.checkAdmitsCallers(ctx); err != nil {
		return err
	}
	n := 0
	for _, w := range []time.Duration{0, e.cfg.CoalesceWindow, e.cfg.TinyWindow} {
		for _, callers := range []int{1, e.cfg.AppendCallers} {
			n++
			id := fmt.Sprintf("append-%d", n)
			r, err := e.appendRate(ctx, id, w, callers)
			if err != nil {
				return fmt.Errorf("window %s, %d callers: %w", w, callers, err)
			}
			e.log("  window %s, %d callers: %.1f appends/s", w, callers, r.PerSecond())
			res.Appends = append(res.Appends, r)
		}
	}
	return nil
}

func (e *env) appendRate(ctx context.Context, id string, window time.Duration, callers int) (AppendRate, error) {
	return e.appendRateReq(ctx, e.createReq(id, window), window, callers)
}

// appendRateReq is appendRate on the session req creates.
func (e *env) appendRateReq(ctx context.Context, req wire.CreateSessionRequest, window time.Duration, callers int) (AppendRate, error) {
	return e.appendRateMode(ctx, req, window, callers, false)
}

// appendRateMode is appendRateReq; with atEnd, each caller appends at the
// end (client.AppendAtEnd) on its own, its next append once the last is
// stored, instead of taking the next seq under a lock held until its
// append is accepted.
func (e *env) appendRateMode(ctx context.Context, req wire.CreateSessionRequest, window time.Duration, callers int, atEnd bool) (AppendRate, error) {
	id := req.SessionID
	info, err := e.sf.Create(ctx, req)
	if err != nil {
		return AppendRate{}, fmt.Errorf("create: %w", err)
	}
	var (
		mu      sync.Mutex // orders seq assignment and acceptance
		nextSeq = info.NextSeq
		lmu     sync.Mutex
		lats    []time.Duration
		starts  []time.Time
		wg      sync.WaitGroup
		first   error
	)
	deadline := time.Now().Add(e.cfg.AppendDuration)
	rpcsBefore := e.rpcs.snapshot()
	t0 := time.Now()
	fail := func(err error) {
		lmu.Lock()
		if first == nil {
			first = err
		}
		lmu.Unlock()
	}
	// appendOne appends one event: at the end, or at the next seq taken
	// under mu, held until the append is accepted.
	appendOne := func() error {
		if atEnd {
			ev, err := event(0, 64)
			if err == nil {
				_, err = e.sf.AppendAtEnd(ctx, id, session.WireEvents([]session.Event{ev}))
			}
			return err
		}
		mu.Lock()
		ev, err := event(nextSeq, 64)
		if err != nil {
			mu.Unlock()
			return err
		}
		if callers == 1 {
			_, err = e.sf.Append(ctx, id, session.WireEvents([]session.Event{ev}))
			nextSeq++
			mu.Unlock()
			return err
		}
		h, err := e.tc.UpdateWorkflow(ctx, temporalclient.UpdateWorkflowOptions{
			WorkflowID:   wire.WorkflowID(id),
			UpdateName:   wire.UpdateAppend,
			Args:         []any{workflows.AppendRequest{Events: []session.Event{ev}}},
			WaitForStage: temporalclient.WorkflowUpdateStageAccepted,
		})
		if err == nil {
			nextSeq++
		}
		mu.Unlock()
		if err != nil {
			return err
		}
		return h.Get(ctx, nil)
	}
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				s0 := time.Now()
				if err := appendOne(); err != nil {
					fail(err)
					return
				}
				lmu.Lock()
				lats = append(lats, time.Since(s0))
				starts = append(starts, s0)
				lmu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	if first != nil {
		return AppendRate{}, first
	}
	dr, err := e.sf.Dispose(ctx, id)
	if err != nil {
		return AppendRate{}, fmt.Errorf("dispose: %w", err)
	}
	if got := dr.NextSeq - info.NextSeq; got != int64(len(lats)) {
		return AppendRate{}, fmt.Errorf("stored %d events, acknowledged %d", got, len(lats))
	}
	r := AppendRate{Window: window, Callers: callers, AtEnd: atEnd, Appends: len(lats), Elapsed: el, Latency: summarize(lats)}
	tasks, cans, err := e.sessionTasks(ctx, info.WorkflowID, info.RunID)
	if err != nil {
		return AppendRate{}, err
	}
	e.log("  %s: %d callers%s, %.1f appends/s, latency median %s p90 %s p99 %s max %s; %s; refused update attempts: %s; %s",
		id, callers, map[bool]string{true: " at the end"}[atEnd], r.PerSecond(),
		ms(r.Latency.Median), ms(r.Latency.P90), ms(r.Latency.P99), ms(r.Latency.Max), tasks,
		formatFailures(e.rpcs.failuresSince(rpcsBefore, "UpdateWorkflowExecution")),
		slowAcrossCAN(starts, lats, cans, 250*time.Millisecond))
	return r, nil
}

// slowAcrossCAN says how many appends took longer than slow, how much of
// the callers' time they took, and how many of them were in flight when a
// run continued as new (at one of cans).
func slowAcrossCAN(starts []time.Time, lats []time.Duration, cans []time.Time, slow time.Duration) string {
	var n, across int
	var sum, total time.Duration
	for i, l := range lats {
		total += l
		if l <= slow {
			continue
		}
		n++
		sum += l
		for _, c := range cans {
			if !c.Before(starts[i]) && !c.After(starts[i].Add(l)) {
				across++
				break
			}
		}
	}
	return fmt.Sprintf("%d appends over %s (%.0f%% of the callers' time), %d of them in flight at one of %d continue-as-new",
		n, ms(slow), 100*sum.Seconds()/max(total.Seconds(), 1e-9), across, len(cans))
}

// sessionTasks summarizes the workflow tasks of a session's runs, from
// runID along its continue-as-new links: the runs, the tasks completed,
// failed (by cause) and timed out, and the updates accepted.
func (e *env) sessionTasks(ctx context.Context, workflowID, runID string) (string, []time.Time, error) {
	var runs, completed, timedOut, accepted int
	var cans []time.Time
	failed := map[string]int{}
	err := e.eachRun(ctx, workflowID, runID, func(evs []*historypb.HistoryEvent, _ int) {
		runs++
		for _, ev := range evs {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				cans = append(cans, ev.GetEventTime().AsTime())
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				completed++
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
				failed[ev.GetWorkflowTaskFailedEventAttributes().GetCause().String()]++
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				timedOut++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				accepted++
			}
		}
	})
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("%d runs, %d workflow tasks completed, failed %s, %d timed out, %d updates accepted",
		runs, completed, formatFailures(failed), timedOut, accepted), cans, nil
}
