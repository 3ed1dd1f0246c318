package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// DefaultHeartbeatInterval is how often a running activity, a store
// activity or an agent activity, heartbeats when its Runtime names no
// interval (docs/DECISIONS.md D84). HeartbeatEvery shortens it to a quarter
// of the activity's heartbeat timeout.
const DefaultHeartbeatInterval = time.Second

// minHeartbeatInterval bounds HeartbeatEvery from below.
const minHeartbeatInterval = 10 * time.Millisecond

// Runtime is what every activity of a worker shares, the store activities
// (Activities) and the agent's (package agent): the session store, the
// heartbeat, and the classification of errors into retryable and
// non-retryable ones (MapError). A worker builds one and gives it to both.
// A nil *Runtime, or one without a Store, makes every activity fail with
// ErrTypePersistenceNotConfigured.
type Runtime struct {
	// Store is the session store.
	Store *jsonl.Store
	// HeartbeatInterval is how often a running activity heartbeats; zero
	// means DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Permissions are the worker's permission defaults (worker
	// --sandbox-mode, --approval-policy, --preset), reported by
	// CreateHandle and OpenHandle so that a session workflow records them
	// in its history; zero for none.
	Permissions PermissionDefaults
}

// PermissionDefaults are a worker's defaults of the permissions of the
// sessions whose agentOptions and log set none: "" for a knob the worker
// leaves to the built-in default (wire.DefaultSandboxMode,
// wire.DefaultApprovalPolicy).
type PermissionDefaults struct {
	SandboxMode    string `json:"sandboxMode,omitempty"`
	ApprovalPolicy string `json:"approvalPolicy,omitempty"`
}

// permissionDefaults returns r's permission defaults, nil for none.
func (r *Runtime) permissionDefaults() *PermissionDefaults {
	if r == nil || r.Permissions == (PermissionDefaults{}) {
		return nil
	}
	d := r.Permissions
	return &d
}

// Sessions returns the store, or the non-retryable
// ErrTypePersistenceNotConfigured error when the runtime has none.
func (r *Runtime) Sessions() (*jsonl.Store, error) {
	if r == nil || r.Store == nil {
		return nil, temporal.NewNonRetryableApplicationError("session persistence is not configured", wire.ErrTypePersistenceNotConfigured, nil)
	}
	return r.Store, nil
}

// Attach returns the handle of ref in this process (jsonl.Store.Attach), or
// the error of Sessions.
func (r *Runtime) Attach(ref jsonl.HandleRef) (*jsonl.Handle, error) {
	st, err := r.Sessions()
	if err != nil {
		return nil, err
	}
	return st.Attach(ref), nil
}

// HeartbeatEvery returns how often the activity of ctx heartbeats: the
// runtime's interval as HeartbeatEvery (the function) fits it to the
// activity's heartbeat timeout.
func (r *Runtime) HeartbeatEvery(ctx context.Context) time.Duration {
	var every time.Duration
	if r != nil {
		every = r.HeartbeatInterval
	}
	return HeartbeatEvery(ctx, every)
}

// HeartbeatEvery returns how often a running activity heartbeats: every
// (DefaultHeartbeatInterval when zero), but at most a quarter of the
// activity's heartbeat timeout, so that a short timeout (the store
// activities' 5 s, docs/DECISIONS.md D49) does not expire while the
// activity works. The SDK sends at most one heartbeat per 80% of the timeout
// whatever the rate of the calls.
func HeartbeatEvery(ctx context.Context, every time.Duration) time.Duration {
	if every <= 0 {
		every = DefaultHeartbeatInterval
	}
	if activity.IsActivity(ctx) {
		if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 && hb/4 < every {
			every = max(hb/4, min(every, minHeartbeatInterval))
		}
	}
	return every
}

// Heartbeat records the heartbeats of one running activity: a goroutine
// records one every interval until Stop, and Step records one when it is due.
// The first is due an interval after the start, so an activity that ends
// sooner (a zero-latency model call, a quick tool) sends none: a heartbeat
// is a request to the server and a write of the activity's state there,
// which such an activity would pay on its own path. A cancellation still
// reaches the activity with its first heartbeat's answer, an interval after
// its start at the latest, and with the later ones as before.
// Each carries the details its details function returns then (none when it
// is nil). Heartbeats are recorded under its mutex, and the state that
// function reads changes only inside Step, under the same mutex, so details
// are computed only for heartbeats actually recorded and never go back in
// time. Outside an activity, and in a local activity (which cannot
// heartbeat), it records nothing.
type Heartbeat struct {
	ctx      context.Context
	interval time.Duration
	active   bool
	mu       sync.Mutex
	details  func() any
	last     time.Time
	stop     chan struct{}
	done     chan struct{}
}

// Heartbeat starts heartbeating the activity of ctx with the details
// returned by details (nil for none). The caller must call Stop.
func (r *Runtime) Heartbeat(ctx context.Context, details func() any) *Heartbeat {
	active := activity.IsActivity(ctx) && !activity.GetInfo(ctx).IsLocalActivity
	// last starts now: the first heartbeat, of a step or of the ticker, is
	// due an interval after the start.
	hb := &Heartbeat{ctx: ctx, interval: r.HeartbeatEvery(ctx), active: active, details: details,
		last: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if !active {
		close(hb.done)
		return hb
	}
	go hb.run()
	return hb
}

// run records a heartbeat every interval unless a step recorded one in the
// last half of it (a tick comes a little less than an interval after the
// heartbeat of the tick before it).
func (hb *Heartbeat) run() {
	defer close(hb.done)
	t := time.NewTicker(hb.interval)
	defer t.Stop()
	for {
		select {
		case <-hb.stop:
			return
		case <-hb.ctx.Done():
			return
		case <-t.C:
			hb.mu.Lock()

			if time.Since(hb.last) >= hb.interval/2 {
				hb.record()
			}
			hb.mu.Unlock()
		}
	}
}

// record sends the current details; the caller holds mu.
func (hb *Heartbeat) record() {
	if hb.details != nil {
		activity.RecordHeartbeat(hb.ctx, hb.details())
	} else {
		activity.RecordHeartbeat(hb.ctx)
	}
	hb.last = time.Now()
}

// Step runs fn, which may change what the details function reads, under the
// mutex, and then records a heartbeat when one is due (an interval after the
// last one). It returns fn's error.
func (hb *Heartbeat) Step(fn func() error) error {
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

// Stop stops heartbeating and waits for the heartbeat goroutine. It may be
// called more than once.
func (hb *Heartbeat) Stop() {
	select {
	case <-hb.stop:
	default:
		close(hb.stop)
	}
	<-hb.done
}

// cancellable runs fn while heartbeating and returns as soon as ctx is done,
// leaving fn to finish on its own. Only operations whose late success is
// undone by the workflow's compensation (create and open, closed by handle id)
// and reads use it.
func cancellable[T any](r *Runtime, ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	hb := r.Heartbeat(ctx, nil)
	defer hb.Stop()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}
