package cluster

// The Temporal server and PostgreSQL restarted while sessions append: the
// sessions go on once they are back, and nothing acknowledged is lost.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// restartUnderLoad creates sessions with an appender each, stops a part of
// the cluster with down, waits outage, starts it with up, and checks that
// every session appends again and stores exactly what was acknowledged.
func restartUnderLoad(t *testing.T, name string, down func(), up func(context.Context) error) {
	const sessions = 3
	const outage = 3 * time.Second
	ctx := ctxT(t)
	cl := newClient()
	var apps []*appender
	for i := range sessions {
		id := sessionID(fmt.Sprintf("%s-%d", name, i))
		s, err := cl.Create(ctx, wire.CreateSessionRequest{SessionID: id, Options: sessionOptions()})
		require.NoError(t, err)
		apps = append(apps, startAppender(t, cl, id, s.NextSeq, int64(i+1)))
	}
	for _, a := range apps {
		a.awaitAcks(0, 10, time.Minute)
	}

	// The counts are taken at the stop: the acknowledgements awaited below
	// come after it, and at most one of them (each appender has one batch
	// in flight) was sent before it.
	before := make([]int, sessions)
	for i, a := range apps {
		before[i] = a.count()
	}
	stopped := time.Now()
	down()
	time.Sleep(outage)
	restarted := time.Now()
	require.NoError(t, up(ctx))
	t.Logf("%s down for %v, serving again %v after its start", name, restarted.Sub(stopped).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))

	for i, a := range apps {
		a.awaitAcks(before[i], 10, 3*time.Minute)
		first, ok := a.firstSentAfter(stopped)
		require.True(t, ok)
		t.Logf("session %s: appends acknowledged again %v after the stop, %v after the restart began; longest wait between acknowledgements %v",
			a.id, first.at.Sub(stopped).Round(time.Millisecond), first.at.Sub(restarted).Round(time.Millisecond), a.longestWait(stopped).Round(time.Millisecond))
	}
	for _, a := range apps {
		acked, next := a.finish()
		_, err := cl.Dispose(ctx, a.id)
		require.NoError(t, err)
		evs := requireHolds(t, a.id, acked)
		require.Equal(t, next, int64(len(evs)))
	}
}

func TestTemporalServerRestartedUnderLoad(t *testing.T) {
	restartUnderLoad(t, "server-restart", lc.KillServer, lc.StartServer)
}

func TestPostgresRestartedUnderLoad(t *testing.T) {
	restartUnderLoad(t, "postgres-restart", lc.CrashPostgres, lc.StartPostgres)
}
