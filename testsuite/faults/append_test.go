package faults

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// logSync is ENOSPC on every fsync of the session's log file (the append's
// own and the one of its rollback truncation).
func logSync(times int) faultfs.Rule {
	return faultfs.Rule{Index: -1, Op: faultfs.OpSync, PathContains: "session.v3", Err: syscall.ENOSPC, Times: times}
}

// TestAppendENOSPCTransient: the fsync of a live append fails once; the
// AppendBatch activity's retry stores the batch and the Append succeeds
// with exactly the acknowledged events on disk.
func TestAppendENOSPCTransient(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone)
	ffs := faultfs.New(nil)
	e.startWorker(ffs)
	id := e.id("append-enospc-once")
	s, acked := e.create(id, 3)

	ffs.Add(logSync(1))
	batch := turn(t, s.NextSeq, s.LastTurn+1)
	res, err := e.c.Append(e.ctx, id, session.WireEvents(batch))
	require.NoError(t, err)
	require.Equal(t, s.NextSeq+2, res.NextSeq)
	require.Contains(t, ffs.String(), "no space left on device", "the fault fired")
	acked = append(acked, batch...)
	requireSameEvents(t, acked, e.events(id))

	_, err = e.c.Dispose(e.ctx, id)
	require.NoError(t, err)
	require.Nil(t, e.lease(id))
	requireSameEvents(t, acked, e.events(id))
}

// TestAppendENOSPCPersistent: every fsync of the log fails until the
// AppendBatch activity has used its attempts. The documented end state
// (docs/API.md, "a failed store fails every pending batch"; workflows
// flushOnce): the Append fails with the activity's retryable IOError, the
// session stays live with its cursor rewound to the stored events, the
// log is cut back to its previous size, and once the disk has room the
// same batch appends and the session disposes.
func TestAppendENOSPCPersistent(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone)
	ffs := faultfs.New(nil)
	e.startWorker(ffs)
	id := e.id("append-enospc")
	s, acked := e.create(id, 2)
	before := e.logBytes(id)

	ffs.Add(logSync(0))
	batch := turn(t, s.NextSeq, s.LastTurn+1)
	_, err := e.c.Append(e.ctx, id, session.WireEvents(batch))
	msg := clientError(t, err, "IOError", "no space left on device")
	t.Logf("client-visible error: %s", msg)

	// Nothing of the batch is on disk; the session is live and owned.
	require.Equal(t, before, e.logBytes(id), "the log is cut back to the acknowledged events")
	requireSameEvents(t, acked, e.events(id))
	d, err := e.c.Describe(e.ctx, id)
	require.NoError(t, err)
	require.Equal(t, wire.PhaseLive, d.Phase)
	require.True(t, d.HandleOpen)
	require.Equal(t, s.NextSeq, d.NextSeq, "the cursor is not advanced")
	require.Zero(t, d.PendingEvents)
	l := e.lease(id)
	require.NotNil(t, l)
	require.Equal(t, s.Handle.HandleID, l.HandleID)

	// The fault is gone: the same seqs append, and disposal works.
	ffs.Reset()
	res, err := e.c.Append(e.ctx, id, session.WireEvents(batch))
	require.NoError(t, err)
	require.Equal(t, s.NextSeq+2, res.NextSeq)
	acked = append(acked, batch...)
	requireSameEvents(t, acked, e.events(id))
	dr, err := e.c.Dispose(e.ctx, id)
	require.NoError(t, err)
	require.Equal(t, res.NextSeq, dr.NextSeq)
	require.Nil(t, e.lease(id))
	requireSameEvents(t, acked, e.events(id))
}
