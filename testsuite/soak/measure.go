package soak

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Sizes of the measurements of a cluster soak (Config.Measure).
const (
	measureLatencyRuns    = 30
	measureCreates        = 200
	measureInFlight       = 16
	measureAppendSessions = 8
	measureAppendDuration = 15 * time.Second
)

// ClusterFigures are the measurements a cluster soak takes before its
// kills, with every worker running.
type ClusterFigures struct {
	// Workers is the number of worker processes.
	Workers int
	// CreateToLive is client.Create until the session is live (median and
	// 90th percentile of sequential creates).
	CreateToLive, CreateToLiveP90 time.Duration
	// AppendLatency is a single-event Append on a live session (median), the
	// baseline of CreateToLive: one update through a worker and one store
	// activity.
	AppendLatency time.Duration
	// Creates sessions were created with InFlight at a time at
	// SessionsPerSecond.
	Creates, InFlight int
	SessionsPerSecond float64
	// AppendsPerSecond is the rate of single-event Appends, AppendSessions
	// sessions with one caller each.
	AppendSessions   int
	AppendsPerSecond float64
}

// String is the figures' summary line.
func (f ClusterFigures) String() string {
	return fmt.Sprintf("cluster figures: workers=%d create-to-live median=%v p90=%v (%.2fx a single-event append of %v) sessions/s=%.1f (%d creates, %d in flight) appends/s=%.1f (%d sessions)",
		f.Workers, f.CreateToLive.Round(100*time.Microsecond), f.CreateToLiveP90.Round(100*time.Microsecond),
		float64(f.CreateToLive)/float64(f.AppendLatency), f.AppendLatency.Round(100*time.Microsecond),
		f.SessionsPerSecond, f.Creates, f.InFlight, f.AppendsPerSecond, f.AppendSessions)
}

// measure takes the ClusterFigures.
func (r *runner) measure(ctx context.Context) (ClusterFigures, error) {
	f := ClusterFigures{Workers: r.cfg.Workers, Creates: measureCreates, InFlight: measureInFlight, AppendSessions: measureAppendSessions}
	prefix := fmt.Sprintf("measure-%d", r.cfg.Seed)

	// Sequential creates, each followed by one single-event append.
	var creates, appends []time.Duration
	for i := range measureLatencyRuns + 2 {
		id := fmt.Sprintf("%s-lat-%03d", prefix, i)
		t0 := time.Now()
		s, err := r.cl.Create(ctx, wire.CreateSessionRequest{SessionID: id})
		if err != nil {
			return f, fmt.Errorf("soak: measuring: create %s: %w", id, err)
		}
		created := time.Since(t0)
		ev, err := measureTick(id, s.NextSeq)
		if err != nil {
			return f, err
		}
		t0 = time.Now()
		if _, err := r.cl.Append(ctx, id, session.WireEvents([]session.Event{ev})); err != nil {
			return f, fmt.Errorf("soak: measuring: append to %s: %w", id, err)
		}
		appended := time.Since(t0)
		if _, err := r.cl.Dispose(ctx, id); err != nil {
			return f, fmt.Errorf("soak: measuring: dispose %s: %w", id, err)
		}
		if i >= 2 { // two warm-up rounds
			creates = append(creates, created)
			appends = append(appends, appended)
		}
	}
	slices.Sort(creates)
	slices.Sort(appends)
	f.CreateToLive, f.CreateToLiveP90 = creates[len(creates)/2], creates[len(creates)*9/10]
	f.AppendLatency = appends[len(appends)/2]

	// Creates in flight.
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, measureInFlight)
	t0 := time.Now()
	for range measureInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < measureCreates; i = next.Add(1) - 1 {
				id := fmt.Sprintf("%s-tp-%03d", prefix, i)
				if _, err := r.cl.Create(ctx, wire.CreateSessionRequest{SessionID: id}); err != nil {
					errs <- fmt.Errorf("soak: measuring: create %s: %w", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	f.SessionsPerSecond = float64(measureCreates) / time.Since(t0).Seconds()
	select {
	case err := <-errs:
		return f, err
	default:
	}
	for i := range measureCreates {
		id := fmt.Sprintf("%s-tp-%03d", prefix, i)
		if _, err := r.cl.Dispose(ctx, id); err != nil {
			return f, fmt.Errorf("soak: measuring: dispose %s: %w", id, err)
		}
	}

	// Single-event appends, one caller per session.
	var total atomic.Int64
	deadline := time.Now().Add(measureAppendDuration)
	t0 = time.Now()
	for i := range measureAppendSessions {
		id := fmt.Sprintf("%s-ap-%d", prefix, i)
		s, err := r.cl.Create(ctx, wire.CreateSessionRequest{SessionID: id})
		if err != nil {
			return f, fmt.Errorf("soak: measuring: create %s: %w", id, err)
		}
		wg.Add(1)
		go func(id string, seq int64) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				ev, err := measureTick(id, seq)
				if err == nil {
					_, err = r.cl.Append(ctx, id, session.WireEvents([]session.Event{ev}))
				}
				if err != nil {
					errs <- fmt.Errorf("soak: measuring: append to %s: %w", id, err)
					return
				}
				seq++
				total.Add(1)
			}
		}(id, s.NextSeq)
	}
	wg.Wait()
	f.AppendsPerSecond = float64(total.Load()) / time.Since(t0).Seconds()
	select {
	case err := <-errs:
		return f, err
	default:
	}
	for i := range measureAppendSessions {
		if _, err := r.cl.Dispose(ctx, fmt.Sprintf("%s-ap-%d", prefix, i)); err != nil {
			return f, fmt.Errorf("soak: measuring: dispose: %w", err)
		}
	}
	r.rep.progress("%s", f)
	return f, nil
}

// measureTick is one soak event of session id at seq.
func measureTick(id string, seq int64) (session.Event, error) {
	ev, err := session.NewEvent(EventType, seq, time.Now().UnixMilli(), map[string]any{"session": id, "seq": seq})
	if err != nil {
		return ev, fmt.Errorf("soak: building event %d of %s: %w", seq, id, err)
	}
	ev.Ignorable = true
	return ev, nil
}
