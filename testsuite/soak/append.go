package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

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
	// batches counts the acknowledged appends.
	batches int
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
	t.batches++
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

// options are the workflow options of the sessions.
func (r *runner) options() *wire.Options {
	o := &wire.Options{}
	if r.cfg.HeartbeatTimeout > 0 {
		o.HeartbeatTimeoutMs = r.cfg.HeartbeatTimeout.Milliseconds()
	}
	o.ContinueAsNewEvents = r.cfg.SessionContinueAsNewEvents
	return o
}

// createSessions creates the sessions while the first worker runs.
func (r *runner) createSessions(ctx context.Context) error {
	for i := 0; i < r.cfg.Sessions; i++ {
		id := fmt.Sprintf("soak-%d-%03d", r.cfg.Seed, i)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := r.cl.Create(cctx, wire.CreateSessionRequest{SessionID: id, Options: r.options()})
		cancel()
		if err != nil {
			return fmt.Errorf("soak: creating session %s: %w", id, err)
		}
		r.sessions = append(r.sessions, newTracked(id))
	}
	r.rep.progress("%d sessions created", len(r.sessions))
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
			r.rep.fail("session %s: building event %d: %v", t.id, next+int64(i), err)
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
		_, err := r.cl.Append(actx, t.id, session.WireEvents(batch))
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
				r.rep.fail("session %s: append of seqs %d..%d (attempt %d) reports %q and the store %s", t.id, first, last, attempt+1, err, detail)
				return false
			}
		}
		if time.Now().After(deadline) {
			r.rep.fail("session %s: batch seqs %d..%d not acknowledged within %v after %d attempts: %v",
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
