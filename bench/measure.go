package bench

import (
	"context"

	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	temporalclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

// Stats summarizes durations.
type Stats struct {
	N      int
	Median time.Duration
	P90    time.Duration
	Mean   time.Duration
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
	return Stats{N: len(s), Median: s[len(s)/2], P90: s[(len(s)*9)/10], Mean: sum / time.Duration(len(s))}
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
}

// AppendRate is the rate of single-event Append updates on one session.
type AppendRate struct {
	Window  time.Duration
	Callers int
	Appends int
	Elapsed time.Duration
	Latency Stats
}

// PerSecond is the number of appends stored per second.
func (a AppendRate) PerSecond() float64 { return float64(a.Appends) / a.Elapsed.Seconds() }

// HistoryCost is the Temporal history of the resume of a log of LogEvents
// events, from start to disposal.
type HistoryCost struct {
	LogEvents     int
	LogBytes      int64
	HistoryEvents int
	HistoryBytes  int
	ResumeLatency time.Duration
}

// EntityResult is one side of the entity comparison.
type EntityResult struct {
	// Appends and Events are what was acknowledged.
	Appends int
	Events  int
	// Runs is the number of runs of the workflow id (continue-as-new
	// generations + 1); CANAtAppend the acknowledged appends before the
	// first continue-as-new, 0 if none.
	Runs        int
	CANAtAppend int
	// HistoryEvents and HistoryBytes sum every run's history.
	HistoryEvents int
	HistoryBytes  int
	// PerAppend is the mean latency of an append.
	PerAppend time.Duration
	// Outcome says how the drive ended: the failure, or the cap reached.
	Outcome string
}

// BytesPerEvent is the history bytes per appended event.
func (r EntityResult) BytesPerEvent() float64 {
	if r.Events == 0 {
		return 0
	}
	return float64(r.HistoryBytes) / float64(r.Events)
}

func (e *env) createReq(id string, window time.Duration) workflows.CreateSessionRequest {
	req := workflows.CreateSessionRequest{SessionID: id, Meta: &workflows.SessionMeta{Cwd: "/bench"}}
	if window > 0 {
		req.Options = &workflows.Options{AppendWindowMs: max(1, window.Milliseconds())}
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
	return session.NewEvent(session.TypeTodoWrite, seq, 1_700_000_000_000+seq, map[string]any{"text": strings.Repeat("x", pad)})
}

// appendRates measures single-event appends on one session for every
// combination of window and callers.
func (e *env) appendRates(ctx context.Context, res *Results) error {
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
	info, err := e.sf.Create(ctx, e.createReq(id, window))
	if err != nil {
		return AppendRate{}, fmt.Errorf("create: %w", err)
	}
	var (
		mu      sync.Mutex // orders seq assignment and acceptance
		nextSeq = info.NextSeq
		lmu     sync.Mutex
		lats    []time.Duration
		wg      sync.WaitGroup
		first   error
	)
	deadline := time.Now().Add(e.cfg.AppendDuration)
	t0 := time.Now()
	fail := func(err error) {
		lmu.Lock()
		if first == nil {
			first = err
		}
		lmu.Unlock()
	}
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				s0 := time.Now()
				mu.Lock()
				ev, err := event(nextSeq, 64)
				if err != nil {
					mu.Unlock()
					fail(err)
					return
				}
				if callers == 1 {
					_, err = e.sf.Append(ctx, id, []session.Event{ev})
					nextSeq++
					mu.Unlock()
				} else {
					var h temporalclient.WorkflowUpdateHandle
					h, err = e.tc.UpdateWorkflow(ctx, temporalclient.UpdateWorkflowOptions{
						WorkflowID:   workflows.WorkflowID(id),
						UpdateName:   workflows.UpdateAppend,
						Args:         []any{workflows.AppendRequest{Events: []session.Event{ev}}},
						WaitForStage: temporalclient.WorkflowUpdateStageAccepted,
					})
					if err == nil {
						nextSeq++
					}
					mu.Unlock()
					if err == nil {
						err = h.Get(ctx, nil)
					}
				}
				if err != nil {
					fail(err)
					return
				}
				lmu.Lock()
				lats = append(lats, time.Since(s0))
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
	return AppendRate{Window: window, Callers: callers, Appends: len(lats), Elapsed: el, Latency: summarize(lats)}, nil
}

// history returns the events and encoded bytes of one run's history.
func (e *env) history(ctx context.Context, workflowID, runID string) ([]*historypb.HistoryEvent, int, error) {
	it := e.tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var (
		evs   []*historypb.HistoryEvent
		bytes int
	)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, 0, fmt.Errorf("history of %s/%s: %w", workflowID, runID, err)
		}
		evs = append(evs, ev)
		bytes += proto.Size(ev)
	}
	return evs, bytes, nil
}

// chain sums the histories of a workflow id's runs, from runID along its
// continue-as-new links. It returns the runs, events and bytes and the last
// run's history.
func (e *env) chain(ctx context.Context, workflowID, runID string) (runs, events, bytes int, last []*historypb.HistoryEvent, err error) {
	for runID != "" {
		evs, b, err := e.history(ctx, workflowID, runID)
		if err != nil {
			return 0, 0, 0, nil, err
		}
		runs++
		events += len(evs)
		bytes += b
		last = evs
		runID = ""
		if n := len(evs); n > 0 {
			if a := evs[n-1].GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				runID = a.GetNewExecutionRunId()
			}
		}
	}
	return runs, events, bytes, last, nil
}

// describeEnd says how a run's history ends: its close event, or its last
// workflow task failure while it still runs.
func describeEnd(evs []*historypb.HistoryEvent) string {
	if len(evs) == 0 {
		return "no history"
	}
	lastEv := evs[len(evs)-1]
	for i := len(evs) - 1; i >= 0; i-- {
		if a := evs[i].GetWorkflowTaskFailedEventAttributes(); a != nil {
			msg := a.GetFailure().GetMessage()
			if len(msg) > 160 {
				msg = msg[:160] + "..."
			}
			return fmt.Sprintf("workflow task failed (%s): %s; last event %s", a.GetCause(), msg, lastEv.GetEventType())
		}
	}
	if a := lastEv.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
		return fmt.Sprintf("terminated: %s", a.GetReason())
	}
	return fmt.Sprintf("last event %s", lastEv.GetEventType())
}

// resumeHistory writes logs of every size and resumes them.
func (e *env) resumeHistory(ctx context.Context, res *Results) error {
	for _, n := range e.cfg.HistorySizes {
		id := fmt.Sprintf("hist-%d", n)
		size, err := WriteRawLog(ctx, e.store, id, n)
		if err != nil {
			return err
		}
		t0 := time.Now()
		info, err := e.sf.Resume(ctx, id, workflows.ResumeSessionRequest{})
		if err != nil {
			return fmt.Errorf("resume %s: %w", id, err)
		}
		lat := time.Since(t0)
		if _, err := e.sf.Dispose(ctx, id); err != nil {
			return fmt.Errorf("dispose %s: %w", id, err)
		}
		evs, b, err := e.history(ctx, info.WorkflowID, info.RunID)
		if err != nil {
			return err
		}
		e.log("  %d events: %d history events, %d bytes, resume %s", n, len(evs), b, lat.Round(time.Millisecond))
		res.History = append(res.History, HistoryCost{LogEvents: n, LogBytes: size, HistoryEvents: len(evs), HistoryBytes: b, ResumeLatency: lat})
	}
	return nil
}

// batch returns cfg.EntityBatch events from seq.
func (e *env) batch(seq int64) ([]session.Event, error) {
	out := make([]session.Event, e.cfg.EntityBatch)
	for i := range out {
		ev, err := event(seq+int64(i), e.cfg.EntityEventBytes)
		if err != nil {
			return nil, err
		}
		out[i] = ev
	}
	return out, nil
}

// entityComparison drives the entity workflow until it fails or reaches
// the cap, then sessionflow with as many appends.
func (e *env) entityComparison(ctx context.Context, res *Results) error {
	const wid = "entity-1"
	run, err := e.tc.ExecuteWorkflow(ctx, temporalclient.StartWorkflowOptions{ID: wid, TaskQueue: taskQueue}, EntityWorkflowName, EntityState{})
	if err != nil {
		return fmt.Errorf("starting the entity: %w", err)
	}
	firstRun := run.GetRunID()
	var (
		r     EntityResult
		total time.Duration
		seq   int64
	)
	r.Outcome = fmt.Sprintf("cap of %d appends reached", e.cfg.EntityMaxAppends)
	for r.Appends < e.cfg.EntityMaxAppends {
		evs, err := e.batch(seq)
		if err != nil {
			return err
		}
		uctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		t0 := time.Now()
		h, err := e.tc.UpdateWorkflow(uctx, temporalclient.UpdateWorkflowOptions{
			WorkflowID:   wid,
			UpdateName:   workflows.UpdateAppend,
			Args:         []any{workflows.AppendRequest{Events: evs}},
			WaitForStage: temporalclient.WorkflowUpdateStageCompleted,
		})
		var out workflows.AppendResult
		if err == nil {
			err = h.Get(uctx, &out)
		}
		d := time.Since(t0)
		cancel()
		if err != nil {
			r.Outcome = fmt.Sprintf("append %d failed: %v", r.Appends+1, err)
			break
		}
		if h.RunID() != firstRun && r.CANAtAppend == 0 {
			r.CANAtAppend = r.Appends
		}
		total += d
		r.Appends++
		seq += int64(len(evs))
		if out.NextSeq != seq {
			return fmt.Errorf("entity holds %d events, %d appended", out.NextSeq, seq)
		}
	}
	r.Events = int(seq)
	if r.Appends > 0 {
		r.PerAppend = total / time.Duration(r.Appends)
	}
	// End it: done when it still answers, else terminate.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_ = e.tc.SignalWorkflow(sctx, wid, "", EntitySignalDone, nil)
	cancel()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = e.tc.GetWorkflow(wctx, wid, "").Get(wctx, nil)
	cancel()
	if err != nil {
		_ = e.tc.TerminateWorkflow(ctx, wid, "", "bench: entity stuck")
	}
	runs, hev, hb, last, err := e.chain(ctx, wid, firstRun)
	if err != nil {
		return err
	}
	r.Runs, r.HistoryEvents, r.HistoryBytes = runs, hev, hb
	r.Outcome += "; last run: " + describeEnd(last)
	res.Entity = r
	e.log("  entity: %d appends, %d events, %d runs, CAN at %d, %.0f history B/event, %s per append; %s",
		r.Appends, r.Events, r.Runs, r.CANAtAppend, r.BytesPerEvent(), r.PerAppend, r.Outcome)

	// sessionflow, same appends.
	sr, err := e.sessionflowSameLoad(ctx, max(1, min(r.Appends, e.cfg.SessionflowMaxAppends)))
	if err != nil {
		return err
	}
	res.SessionflowSameLoad = sr
	e.log("  sessionflow: %d appends, %d runs, %.0f history B/event, %s per append",
		sr.Appends, sr.Runs, sr.BytesPerEvent(), sr.PerAppend)
	return nil
}

func (e *env) sessionflowSameLoad(ctx context.Context, appends int) (EntityResult, error) {
	const id = "same-load"
	info, err := e.sf.Create(ctx, e.createReq(id, 0))
	if err != nil {
		return EntityResult{}, err
	}
	var (
		r     EntityResult
		total time.Duration
	)
	seq := info.NextSeq
	for r.Appends < appends {
		evs, err := e.batch(seq)
		if err != nil {
			return r, err
		}
		t0 := time.Now()
		if _, err := e.sf.Append(ctx, id, evs); err != nil {
			return r, fmt.Errorf("append %d: %w", r.Appends+1, err)
		}
		total += time.Since(t0)
		r.Appends++
		seq += int64(len(evs))
	}
	r.Events = int(seq - info.NextSeq)
	r.PerAppend = total / time.Duration(r.Appends)
	if _, err := e.sf.Dispose(ctx, id); err != nil {
		return r, fmt.Errorf("dispose: %w", err)
	}
	runs, hev, hb, last, err := e.chain(ctx, info.WorkflowID, info.RunID)
	if err != nil {
		return r, err
	}
	r.Runs, r.HistoryEvents, r.HistoryBytes = runs, hev, hb
	r.Outcome = "completed, " + describeEnd(last)
	if runs > 1 {
		r.Outcome += fmt.Sprintf(" (continued as new %d times, carrying only the cursor)", runs-1)
	}
	return r, nil
}
