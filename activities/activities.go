// Package activities holds sessionflow's Temporal activities over a
// *jsonl.Store: create, open, read, repair, append, seed, flush, close and
// stat of session handles.
//
// Every activity is idempotent under retry (LIFECYCLE.md §4 step 2,
// FORMAT.md §6.1): handle ids are chosen by the calling workflow, so a
// retried create or open returns the handle the first attempt took, a
// retried append of a batch that already landed succeeds without writing, a
// retried repair finds its marker last and appends nothing, and closing is
// idempotent. Named store errors become non-retryable application errors
// whose type is the error's code (FORMAT.md §7.1); transient I/O errors stay
// retryable. Activities that read a log heartbeat while they read, and never
// return events through history except a bounded batch given to them.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 4. It
// may import wire, internal/lib/..., session and the packages of row 3 (jsonl,
// provider, tool and theirs); not agent, workflows, client or anything above.
package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/jsonl"
)

// PersistenceNotConfiguredText is the error text of a resume without a
// persistence backend (LIFECYCLE.md §12).
const PersistenceNotConfiguredText = "cannot resume: session persistence is not configured (load a dsh-session-persistence backend)"

// DefaultHeartbeatInterval is how often a running activity heartbeats.
const DefaultHeartbeatInterval = 2 * time.Second

// DefaultReadChunk is how many events a reading activity takes per store read
// (and per heartbeat opportunity).
const DefaultReadChunk = 1 << 16

// Activities are sessionflow's activities over one store. Register a pointer
// with a worker; the method names are the activity names.
type Activities struct {
	// Store is the session store. A nil Store makes every activity fail with
	// ErrTypePersistenceNotConfigured.
	Store *jsonl.Store
	// HeartbeatInterval is how often long operations heartbeat; zero means
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// ReadChunk is the number of events read per store call; zero means
	// DefaultReadChunk.
	ReadChunk int64
	// Temporal is the client ForfeitDeadOwner asks whether a lease's owning
	// workflow still runs. Without it ForfeitDeadOwner keeps every lease.
	Temporal sdkclient.Client
}

func (a *Activities) interval(ctx context.Context) time.Duration {
	return HeartbeatEvery(ctx, a.HeartbeatInterval)
}

// minHeartbeatInterval bounds HeartbeatEvery from below.
const minHeartbeatInterval = 10 * time.Millisecond

// HeartbeatEvery returns how often a running activity heartbeats: every
// (DefaultHeartbeatInterval when zero), but at most a quarter of the
// activity's heartbeat timeout, so that a short timeout (the store
// activities' 1 s, docs/DECISIONS.md D49) does not expire while the
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

func (a *Activities) chunk() int64 {
	if a.ReadChunk > 0 {
		return a.ReadChunk
	}
	return DefaultReadChunk
}

func (a *Activities) store() (*jsonl.Store, error) {
	if a == nil || a.Store == nil {
		return nil, temporal.NewNonRetryableApplicationError("session persistence is not configured", ErrTypePersistenceNotConfigured, nil)
	}
	return a.Store, nil
}

// heartbeat records heartbeats (without details: they would only add
// payloads) every interval until the returned stop is called. Outside an
// activity context, and in a local activity (which cannot heartbeat), it
// does nothing.
func (a *Activities) heartbeat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).IsLocalActivity {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(a.interval(ctx))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// cancellable runs fn while heartbeating and returns as soon as ctx is done,
// leaving fn to finish on its own. Only operations whose late success is
// undone by the workflow's compensation (create and open, closed by handle id)
// and reads use it.
func cancellable[T any](a *Activities, ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	stop := a.heartbeat(ctx)
	defer stop()
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
