package integration

// Two shards: two store roots, each served by the workers of its own task
// queue, and the client's router between them (docs/SCALING.md). Like the
// rest of the package it runs on the server TEMPORAL_ADDRESS names, else on
// a local dev server.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// requireStoredIn asserts that id's log is in home's root and in no other.
func requireStoredIn(t *testing.T, id string, home *world, others ...*world) {
	t.Helper()
	snap, err := home.store.Stat(context.Background(), id)
	require.NoError(t, err)
	require.NotNil(t, snap, "session %q is not in the root of its shard (%s)", id, home.taskQueue)
	for _, o := range others {
		snap, err := o.store.Stat(context.Background(), id)
		require.NoError(t, err)
		require.Nil(t, snap, "session %q is in the root of task queue %s", id, o.taskQueue)
	}
}

func TestShardRouterTwoShards(t *testing.T) {
	t.Parallel()
	wa := newWorld(t, shared, jsonl.CompressionNone)
	wb := newWorld(t, shared, jsonl.CompressionNone)
	wa.taskQueue += "-a"
	wb.taskQueue += "-b"
	wa.startWorker()
	rb := wb.startWorker()

	router, err := client.NewRouter(client.Shard{Name: "a", TaskQueue: wa.taskQueue}, client.Shard{Name: "b", TaskQueue: wb.taskQueue})
	require.NoError(t, err)
	sf := client.New(shared.client, client.Options{Router: router})
	worlds := map[string]*world{"a": wa, "b": wb}
	other := map[string]*world{"a": wb, "b": wa}

	// Three ids per shard, as the router places them; the ids carry the
	// run's tag, so which ones land where varies between runs.
	byShard := map[string][]string{}
	for i := 0; len(byShard["a"]) < 3 || len(byShard["b"]) < 3; i++ {
		id := wa.id(fmt.Sprintf("shard-%d", i))
		name := router.Route(id).Name
		if len(byShard[name]) < 3 {
			byShard[name] = append(byShard[name], id)
		}
	}
	// One id the router gives to a, placed on b explicitly.
	var pinned string
	for i := 0; pinned == ""; i++ {
		if id := wa.id(fmt.Sprintf("pinned-%d", i)); router.Route(id).Name == "a" {
			pinned = id
		}
	}

	next := map[string]int64{}
	create := func(id string, opts ...client.CallOption) {
		t.Helper()
		wa.track(wire.WorkflowID(id))
		s, err := sf.Create(wa.ctx(), wire.CreateSessionRequest{SessionID: id}, opts...)
		require.NoError(t, err, id)
		next[id] = s.NextSeq
	}
	for _, name := range []string{"a", "b"} {
		for _, id := range byShard[name] {
			create(id)
			requireStoredIn(t, id, worlds[name], other[name])
		}
	}
	create(pinned, client.OnShard("b"))
	requireStoredIn(t, pinned, wb, wa)
	onB := append(append([]string(nil), byShard["b"]...), pinned)

	batch := func(id string, turn int64) []session.Event {
		n := next[id]
		return []session.Event{turnStart(t, n, turn), assistantText(t, n+1, turn, fmt.Sprintf("turn %d of %s", turn, id)), turnEnd(t, n+2, turn)}
	}
	appendOK := func(id string, evs []session.Event) {
		t.Helper()
		res, err := sf.Append(wa.ctx(), id, session.WireEvents(evs))
		require.NoError(t, err, id)
		require.Equal(t, evs[len(evs)-1].Seq+1, res.NextSeq, id)
		next[id] = res.NextSeq
	}
	stored := func(w *world, id string) int64 {
		evs := w.storedEvents(id)
		return evs[len(evs)-1].Seq + 1
	}
	for _, id := range append(append([]string(nil), byShard["a"]...), onB...) {
		appendOK(id, batch(id, 1))
	}
	for _, id := range byShard["a"] {
		require.Equal(t, next[id], stored(wa, id), id)
	}
	for _, id := range onB {
		require.Equal(t, next[id], stored(wb, id), id)
	}

	// Shard b's worker stops: b's sessions stop, a's go on.
	require.NoError(t, rb.Stop())
	pending := map[string][]session.Event{}
	for _, id := range onB {
		evs := batch(id, 2)
		ctx, cancel := context.WithTimeout(wa.ctx(), 3*time.Second)
		_, err := sf.Append(ctx, id, session.WireEvents(evs))
		cancel()
		require.ErrorIs(t, err, client.ErrOutcomeUnknown, "an append to %s on the stopped shard", id)
		pending[id] = evs
	}
	for round := int64(2); round <= 3; round++ {
		for _, id := range byShard["a"] {
			appendOK(id, batch(id, round))
			require.Equal(t, next[id], stored(wa, id), id)
		}
	}
	for _, id := range onB {
		require.Equal(t, next[id], stored(wb, id), "nothing reached the root of the stopped shard for %s", id)
	}

	// Shard b's worker returns: the same batches go through, once.
	wb.startWorker()
	for _, id := range onB {
		appendOK(id, pending[id])
		require.Equal(t, next[id], stored(wb, id), id)
		requireContiguous(t, wb.storedEvents(id))
	}
	for name, ids := range map[string][]string{"a": byShard["a"], "b": onB} {
		for _, id := range ids {
			_, err := sf.Dispose(wa.ctx(), id)
			require.NoError(t, err, id)
			requireStoredIn(t, id, worlds[name], other[name])
			requireContiguous(t, worlds[name].storedEvents(id))
		}
	}
}
