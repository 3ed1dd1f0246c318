package cluster

// Failover: two workers on one task queue and one store root; the worker
// that runs a live session's workflow tasks (its sticky queue) is killed
// with SIGKILL while a client appends, and the other carries on.

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/internal/app/cluster"
	"github.com/sessionflow/sessionflow/wire"
)

func TestFailoverToTheOtherWorker(t *testing.T) {
	ctx := ctxT(t)
	cl := newClient()
	id := sessionID("failover")
	s, err := cl.Create(ctx, wire.CreateSessionRequest{SessionID: id, Options: sessionOptions()})
	require.NoError(t, err)

	a := startAppender(t, cl, id, s.NextSeq, 1)
	a.awaitAcks(0, 20, time.Minute)

	// The owner is the worker that started the session's latest workflow
	// task: it holds the workflow in its cache and polls its sticky queue.
	ids, _ := taskWorkers(history(t, id))
	require.NotEmpty(t, ids)
	owner := ids[len(ids)-1]
	slot, survivor := -1, ""
	for _, w := range lc.Workers() {
		if w.Identity == owner {
			slot = w.Index
		} else {
			survivor = w.Identity
		}
	}
	require.NotEqual(t, -1, slot, "the session's workflow tasks ran on %s, not a worker of the cluster", owner)
	require.NotEmpty(t, survivor)

	before := a.count()
	killed := time.Now()
	lc.KillWorker(slot)
	t.Logf("killed %s (the owner of %s) after %d acknowledged batches", owner, id, before)

	a.awaitAcks(before, 30, 3*time.Minute)
	first, ok := a.firstSentAfter(killed)
	require.True(t, ok)
	t.Logf("failover: the first append sent after the kill was acknowledged %v after it (batch %d..%d, %d attempts); longest wait between acknowledgements %v",
		first.at.Sub(killed).Round(time.Millisecond), first.first, first.last, first.attempts, a.longestWait(killed).Round(time.Millisecond))

	acked, next := a.finish()
	// The workflow tasks after the kill ran on the surviving worker.
	ids, at := taskWorkers(history(t, id))
	var after []string
	for i := range ids {
		if at[i].After(killed) {
			after = append(after, ids[i])
		}
	}
	require.NotEmpty(t, after)
	require.False(t, slices.Contains(after, owner), "the killed worker ran no task after its death")
	require.Contains(t, after, survivor)

	_, err = cl.Dispose(ctx, id)
	require.NoError(t, err)
	evs := requireHolds(t, id, acked)
	require.Equal(t, next, int64(len(evs)), "the log ends with the last acknowledged batch")

	// Both workers again for the tests that follow.
	_, err = lc.StartWorker(ctx, slot, cluster.WorkerOptions{})
	require.NoError(t, err)
}
