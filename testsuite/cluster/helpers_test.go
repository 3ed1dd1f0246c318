package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// opTimeout bounds one call to the cluster.
const opTimeout = 2 * time.Minute

// tickType is the type of the events the appenders write; not built in, so
// the events are ignorable.
const tickType = "cluster/tick"

// sessionOptions are the workflow options of the tests' sessions: a store
// activity lost with a killed worker is retried after 2 s.
func sessionOptions() *wire.Options {
	return &wire.Options{HeartbeatTimeoutMs: 2000}
}

// newClient returns a sessionflow client of the cluster whose sessions hand a
// workflow task a dead worker had started to another after 3 s.
func newClient() *client.Client {
	return client.New(lc.Client(), client.Options{
		TaskQueue:           lc.TaskQueue(),
		Namespace:           lc.Namespace(),
		WorkflowTaskTimeout: 3 * time.Second,
	})
}

// sessionID returns a session id unique to this run.
func sessionID(name string) string { return fmt.Sprintf("%s-%s", name, runTag) }

// ctxT returns a context bounded by opTimeout and the test.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// store opens the cluster's store root for reading, as another process.
func store(t *testing.T) *jsonl.Store {
	s, err := jsonl.NewStore(jsonl.Options{Root: lc.Root(), Compression: lc.Compression()})
	require.NoError(t, err)
	return s
}

// storedEvents reads every event of a session through a read handle.
func storedEvents(t *testing.T, id string) []session.Event {
	t.Helper()
	ctx := context.Background()
	h, err := store(t).Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	defer h.Close(ctx)
	evs, err := h.Read(ctx, 0, -1)
	require.NoError(t, err)
	return evs
}

// canonical is an event's canonical encoding.
func canonical(t *testing.T, e session.Event) string {
	t.Helper()
	b, err := e.MarshalJSON()
	require.NoError(t, err)
	c, err := session.CanonicalJSON(b)
	require.NoError(t, err)
	return string(c)
}

// requireHolds asserts that the stored log has seqs 0..n-1, each once, and
// holds every acknowledged event unchanged at its seq.
func requireHolds(t *testing.T, id string, acked []session.Event) []session.Event {
	t.Helper()
	evs := storedEvents(t, id)
	seen := map[int64]bool{}
	for i, e := range evs {
		require.False(t, seen[e.Seq], "session %s: seq %d stored twice", id, e.Seq)
		seen[e.Seq] = true
		require.Equal(t, int64(i), e.Seq, "session %s: seq at index %d", id, i)
	}
	for _, a := range acked {
		require.Less(t, a.Seq, int64(len(evs)), "session %s: acknowledged seq %d is not stored (log ends at %d)", id, a.Seq, len(evs))
		require.JSONEq(t, canonical(t, a), canonical(t, evs[a.Seq]), "session %s: seq %d", id, a.Seq)
	}
	return evs
}

// ack is one acknowledged batch.
type ack struct {
	sent        time.Time // when the acknowledged attempt was sent
	at          time.Time // when the acknowledgement arrived
	first, last int64
	attempts    int
}

// appender appends batches of ticks to a live session, each retried until
// acknowledged, and records what was acknowledged.
type appender struct {
	t   *testing.T
	cl  *client.Client
	id  string
	rng *rand.Rand

	mu    sync.Mutex
	next  int64
	acked []session.Event
	acks  []ack
	err   error

	stop chan struct{}
	done chan struct{}
}

// startAppender starts appending to id from seq next until stop.
func startAppender(t *testing.T, cl *client.Client, id string, next int64, seed int64) *appender {
	a := &appender{t: t, cl: cl, id: id, next: next, rng: rand.New(rand.NewSource(seed)), stop: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a
}

func (a *appender) loop() {
	defer close(a.done)
	for {
		select {
		case <-a.stop:
			return
		default:
		}
		if err := a.appendOne(); err != nil {
			a.mu.Lock()
			a.err = err
			a.mu.Unlock()
			return
		}
	}
}

// appendOne appends one batch of 1..4 ticks until it is acknowledged: an
// Append that returns nil, or after a seq mismatch (an earlier attempt was
// stored, its answer lost) a store that holds exactly the batch.
func (a *appender) appendOne() error {
	a.mu.Lock()
	next := a.next
	a.mu.Unlock()
	batch := make([]session.Event, 1+a.rng.Intn(4))
	for i := range batch {
		seq := next + int64(i)
		e, err := session.NewEvent(tickType, seq, time.Now().UnixMilli(), map[string]any{"session": a.id, "seq": seq, "nonce": a.rng.Int63()})
		if err != nil {
			return err
		}
		e.Ignorable = true
		batch[i] = e
	}
	deadline := time.Now().Add(3 * time.Minute)
	for attempt := 1; ; attempt++ {
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := a.cl.Append(ctx, a.id, session.WireEvents(batch))
		cancel()
		if err == nil || (errors.Is(err, client.ErrSeqMismatch) && a.storeHolds(batch)) {
			a.mu.Lock()
			a.acked = append(a.acked, batch...)
			a.acks = append(a.acks, ack{sent: sent, at: time.Now(), first: batch[0].Seq, last: batch[len(batch)-1].Seq, attempts: attempt})
			a.next = batch[len(batch)-1].Seq + 1
			a.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %s: batch %d..%d not acknowledged after %d attempts: %w", a.id, batch[0].Seq, batch[len(batch)-1].Seq, attempt, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// storeHolds reports whether the store holds exactly batch at its seqs.
func (a *appender) storeHolds(batch []session.Event) bool {
	ctx := context.Background()
	s, err := jsonl.NewStore(jsonl.Options{Root: lc.Root(), Compression: lc.Compression()})
	if err != nil {
		return false
	}
	h, err := s.Open(ctx, a.id, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return false
	}
	defer h.Close(ctx)
	evs, err := h.Read(ctx, 0, -1)
	if err != nil || int64(len(evs)) <= batch[len(batch)-1].Seq {
		return false
	}
	for _, want := range batch {
		wb, err1 := want.MarshalJSON()
		gb, err2 := evs[want.Seq].MarshalJSON()
		if err1 != nil || err2 != nil {
			return false
		}
		wc, err1 := session.CanonicalJSON(wb)
		gc, err2 := session.CanonicalJSON(gb)
		if err1 != nil || err2 != nil || string(wc) != string(gc) {
			return false
		}
	}
	return true
}

// count is the number of acknowledged batches.
func (a *appender) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acks)
}

// firstSentAfter returns the first acknowledgement of an attempt sent
// after t0: how long after t0 the session took appends again.
func (a *appender) firstSentAfter(t0 time.Time) (ack, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range a.acks {
		if k.sent.After(t0) {
			return k, true
		}
	}
	return ack{}, false
}

// longestWait returns the longest time between two acknowledgements (or
// between t0 and the first) among those that arrived after t0.
func (a *appender) longestWait(t0 time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var longest time.Duration
	prev := t0
	for _, k := range a.acks {
		if !k.at.After(t0) {
			continue
		}
		longest = max(longest, k.at.Sub(prev))
		prev = k.at
	}
	return longest
}

// awaitAcks waits until n more batches than before are acknowledged.
func (a *appender) awaitAcks(before, n int, timeout time.Duration) {
	a.t.Helper()
	deadline := time.Now().Add(timeout)
	for a.count() < before+n {
		a.mu.Lock()
		err := a.err
		a.mu.Unlock()
		require.NoError(a.t, err)
		require.True(a.t, time.Now().Before(deadline), "session %s: %d batches acknowledged within %v, want %d", a.id, a.count()-before, timeout, n)
		time.Sleep(50 * time.Millisecond)
	}
}

// finish stops the appender and returns what was acknowledged and the
// next seq.
func (a *appender) finish() ([]session.Event, int64) {
	a.t.Helper()
	close(a.stop)
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	require.NoError(a.t, a.err)
	return a.acked, a.next
}

// history returns the history of a session's current run.
func history(t *testing.T, id string) *historypb.History {
	t.Helper()
	ctx := ctxT(t)
	it := lc.Client().GetWorkflowHistory(ctx, wire.WorkflowID(id), "", false, 0)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, e)
	}
	return h
}

// taskWorkers returns the identities of the workers that started the
// workflow tasks of hist, in order, with the times they started them.
func taskWorkers(hist *historypb.History) (ids []string, at []time.Time) {
	for _, e := range hist.GetEvents() {
		if a := e.GetWorkflowTaskStartedEventAttributes(); a != nil {
			ids = append(ids, a.GetIdentity())
			at = append(at, e.GetEventTime().AsTime())
		}
	}
	return ids, at
}
