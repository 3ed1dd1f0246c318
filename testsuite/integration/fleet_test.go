package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// startLimitedWorker runs a worker like startWorker whose store keeps at
// most limit descriptors open, and returns it with that store.
func (w *world) startLimitedWorker(limit int) (*workerapp.Running, *jsonl.Store) {
	w.t.Helper()
	cfg := workerapp.DefaultConfig()
	cfg.Client = w.c
	cfg.TaskQueue = w.taskQueue
	cfg.StoreRoot = w.root
	cfg.Compression = w.comp
	cfg.MetricsAddress = ""
	cfg.StopTimeout = 10 * time.Second
	cfg.Identity = clientIdentity
	cfg.Register = w.hooks.register
	cfg.MaxStoreDescriptors = limit
	stores := make(chan *jsonl.Store, 1)
	cfg.OnStarted = func(s workerapp.Started) { stores <- s.Store }
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r, err := workerapp.Start(ctx, cfg, discardLogger())
	if err != nil {
		w.t.Fatalf("the worker did not start: %v", err)
	}
	w.t.Cleanup(func() { _ = r.Stop() })
	return r, <-stores
}

// TestManyLiveSessionsWithFewDescriptors runs 20 live sessions on a worker
// whose store keeps at most 4 descriptors open, appends to them in random
// order, restarts the worker half way and goes on: every append stores
// its event at the seq the session's own count predicts, the store never
// keeps more than 4 descriptors between appends, and every log holds
// exactly what was appended to it.
func TestManyLiveSessionsWithFewDescriptors(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	worker, store := w.startLimitedWorker(4)
	const sessions, appends = 20, 60
	ids := make([]string, sessions)
	next := make([]int64, sessions)
	for n := range sessions {
		ids[n] = w.id(fmt.Sprintf("fleet-%02d", n))
		w.create(wire.CreateSessionRequest{SessionID: ids[n]})
		next[n] = w.waitReady(ids[n]).NextSeq
	}
	rng := rand.New(rand.NewPCG(3, 4))
	appended := make([][]session.Event, sessions)
	for k := range appends {
		if k == appends/2 {
			require.NoError(t, worker.Stop())
			_, store = w.startLimitedWorker(4)
		}
		n := rng.IntN(sessions)
		e := ev(t, wire.TypeSystemMessage, next[n], map[string]any{"text": fmt.Sprintf("append %d to session %d", k, n)})
		require.Equal(t, next[n]+1, w.appendEvents(ids[n], []session.Event{e}).NextSeq, "append %d to session %d", k, n)
		next[n]++
		appended[n] = append(appended[n], e)
		kept, limit := store.OpenDescriptors()
		require.Equal(t, 4, limit)
		require.LessOrEqual(t, kept, 4, "descriptors kept after append %d", k)
	}
	for n := range sessions {
		stored := w.storedEvents(ids[n])
		require.Len(t, stored, int(next[n]), "session %d", n)
		tail := stored[len(stored)-len(appended[n]):]
		for i, e := range appended[n] {
			require.Equal(t, e.Seq, tail[i].Seq)
			require.JSONEq(t, string(mustJSON(t, e)), string(mustJSON(t, tail[i])), "session %d", n)
		}
		require.Equal(t, next[n], w.dispose(ids[n]).NextSeq)
	}
}

func mustJSON(t *testing.T, e session.Event) []byte {
	t.Helper()
	b, err := e.MarshalJSON()
	require.NoError(t, err)
	return b
}
