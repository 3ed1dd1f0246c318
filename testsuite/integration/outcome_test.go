package integration

// An Append whose call ends while no worker runs the session: the outcome is
// unknown, and retrying the same batch succeeds and stores it once.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func TestAppendWithoutWorkerThenRetry(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	first := w.startWorker()
	id := w.id("nowork")
	w.create(wire.CreateSessionRequest{SessionID: id})
	next := w.waitReady(id).NextSeq
	require.NoError(t, first.Stop())

	c := sfclient.New(w.c, sfclient.Options{TaskQueue: w.taskQueue})
	batch := []session.Event{turnStart(t, next, 1), turnEnd(t, next+1, 1)}
	ctx, cancel := context.WithTimeout(w.ctx(), 2*time.Second)
	_, err := c.Append(ctx, id, session.WireEvents(batch))
	cancel()
	require.ErrorIs(t, err, sfclient.ErrOutcomeUnknown)
	require.Equal(t, `append to session "`+id+`": outcome unknown: no answer before the call ended (is a worker running?); `+
		`the batch may still be stored once a worker runs the session. Retrying the same batch is safe: `+
		`a batch already stored or already accepted is not stored twice`, err.Error())

	// The retry is sent while the worker is still down: the session then
	// receives both requests of the same batch.
	type outcome struct {
		res sfclient.AppendResult
		err error
	}
	retried := make(chan outcome, 1)
	go func() {
		res, err := c.Append(w.ctx(), id, session.WireEvents(batch))
		retried <- outcome{res, err}
	}()
	time.Sleep(time.Second)
	w.startWorker()
	got := <-retried
	require.NoError(t, got.err)
	require.Equal(t, next+2, got.res.NextSeq)
	require.Len(t, w.storedEvents(id), int(next+2), "the batch is stored once")
	w.dispose(id)
}
