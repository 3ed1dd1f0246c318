package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
)

// DefaultHeartbeatInterval is how often a running agent activity heartbeats.
const DefaultHeartbeatInterval = time.Second

// ProgressWindow bounds the text of a ModelProgress heartbeat: the last
// ProgressWindow bytes of the shown text.
const ProgressWindow = 4 << 10

// ToolSet is what the activities need of a tool registry: *tool.Registry
// (a worker's registry of its tools, built-ins included).
type ToolSet interface {
	// Lookup returns the tool called name.
	Lookup(name string) (tool.Tool, bool)
	// Specs are the tools offered to the model.
	Specs() []provider.Tool
	// Execute runs a call; a failure is an IsError result, never an error.
	Execute(ctx context.Context, name string, call tool.Call) tool.Result
}

var _ ToolSet = (*tool.Registry)(nil)

// Activities are the agent's store-backed activities: CallModel, RunTool
// and EndTurn. Register a pointer with a worker; the method names are the
// activity names (CallModelActivity, RunToolActivity, EndTurnActivity).
type Activities struct {
	// Store is the session store. A nil Store makes every activity fail with
	// activities.ErrTypePersistenceNotConfigured.
	Store *jsonl.Store
	// Providers are the model providers the worker offers.
	Providers provider.Set
	// Tools are the tools offered to the model; nil offers none.
	Tools ToolSet
	// System is the system prompt of every model call.
	System string
	// HeartbeatInterval is how often activities heartbeat; zero means
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Now is the clock of stored events' times; nil means time.Now.
	Now func() time.Time
	// TracerProvider provides the tracer of the model and tool call spans;
	// nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// TraceContent records prompts, responses, tool arguments and results
	// on the spans (gen_ai.input.messages, gen_ai.output.messages,
	// gen_ai.tool.call.arguments, gen_ai.tool.call.result); off by default.
	TraceContent bool
	// Limits bound each model call (idle gap, total time, output size);
	// zero fields take their defaults (ModelLimits).
	Limits ModelLimits
}

func (a *Activities) store() (*jsonl.Store, error) {
	if a == nil || a.Store == nil {
		return nil, temporal.NewNonRetryableApplicationError("session persistence is not configured", activities.ErrTypePersistenceNotConfigured, nil)
	}
	return a.Store, nil
}

// interval is how often an activity heartbeats: HeartbeatInterval
// (DefaultHeartbeatInterval when zero), at most a quarter of its heartbeat
// timeout.
func (a *Activities) interval(ctx context.Context) time.Duration {
	every := a.HeartbeatInterval
	if every <= 0 {
		every = DefaultHeartbeatInterval
	}
	return activities.HeartbeatEvery(ctx, every)
}

// nowMs is the time of a stored event, in Unix milliseconds.
func (a *Activities) nowMs() int64 {
	if a.Now != nil {
		return a.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

func (a *Activities) lookup(name string) (tool.Tool, bool) {
	if a.Tools == nil {
		return tool.Tool{}, false
	}
	return a.Tools.Lookup(name)
}

// invalidLog is the non-retryable error of an input that does not match
// the log.
func invalidLog(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeInvalidLog, nil)
}

// heartbeater records heartbeats every interval until closed, each with
// the details its details function returns then. Heartbeats are recorded
// under its mutex, and the state that function reads changes only inside
// step, under the same mutex, so details are computed only for heartbeats
// actually sent and never go back in time. Outside an activity it does
// nothing.
type heartbeater struct {
	ctx      context.Context
	interval time.Duration
	active   bool
	mu       sync.Mutex
	details  func() any
	last     time.Time
	stop     chan struct{}
	done     chan struct{}
}

// startHeartbeat starts heartbeating with the details returned by details
// (nil for none).
func (a *Activities) startHeartbeat(ctx context.Context, details func() any) *heartbeater {
	// last starts at the zero time: the first step is recorded at once,
	// so a watcher sees a stream's first chunk without waiting.
	hb := &heartbeater{ctx: ctx, interval: a.interval(ctx), active: activity.IsActivity(ctx), details: details,
		stop: make(chan struct{}), done: make(chan struct{})}
	if !hb.active {
		close(hb.done)
		return hb
	}
	go func() {
		defer close(hb.done)
		t := time.NewTicker(hb.interval)
		defer t.Stop()
		for {
			select {
			case <-hb.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				hb.mu.Lock()
				if time.Since(hb.last) >= hb.interval {
					hb.record()
				}
				hb.mu.Unlock()
			}
		}
	}()
	return hb
}

// record sends the current details; the caller holds mu.
func (hb *heartbeater) record() {
	if hb.details != nil {
		activity.RecordHeartbeat(hb.ctx, hb.details())
	} else {
		activity.RecordHeartbeat(hb.ctx)
	}
	hb.last = time.Now()
}

// step runs fn, which may change what the details function reads, under
// the mutex, and then records a heartbeat when one is due. It returns fn's
// error.
func (hb *heartbeater) step(fn func() error) error {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if err := fn(); err != nil {
		return err
	}
	if hb.active && time.Since(hb.last) >= hb.interval {
		hb.record()
	}
	return nil
}

// close stops heartbeating and waits for the heartbeat goroutine.
func (hb *heartbeater) close() {
	select {
	case <-hb.stop:
	default:
		close(hb.stop)
	}
	<-hb.done
}

// readLog returns a copy of what fn extracts from the log from seq from,
// read under the write handle's lock after a refresh, and the log's next
// seq.
func readLog(ctx context.Context, h *jsonl.Handle, from int64, fn func(tail []session.Event, next int64) error) (int64, error) {
	return h.Update(ctx, from, func(tail []session.Event, next int64) ([]session.Event, error) {
		return nil, fn(tail, next)
	})
}
