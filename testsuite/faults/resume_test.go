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

// TestResumeEIOOnLogRead: every read of the stored log fails with EIO.
// ResumeSession fails with the activity's retryable IOError once its
// attempts are used; the rollback closes the handle (no lease), the log is
// byte-identical, and a resume without the fault goes live with the log
// as it was plus the resume's end-seed marker.
func TestResumeEIOOnLogRead(t *testing.T) {
	e := newEnv(t, jsonl.CompressionZstd)
	ffs := faultfs.New(nil)
	e.startWorker(ffs)
	id := e.id("resume-eio")
	s, acked := e.create(id, 2)
	batch := turn(t, s.NextSeq, s.LastTurn+1)
	_, err := e.c.Append(e.ctx, id, session.WireEvents(batch))
	require.NoError(t, err)
	acked = append(acked, batch...)
	_, err = e.c.Dispose(e.ctx, id)
	require.NoError(t, err)
	before := e.logBytes(id)

	ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpRead, PathContains: "session.v3", Err: syscall.EIO})
	_, err = e.c.Resume(e.ctx, id, wire.ResumeSessionRequest{Options: options(2)})
	msg := clientError(t, err, "IOError", "input/output error")
	t.Logf("client-visible error: %s", msg)
	e.requireRolledBack(id, "IOError")
	require.Nil(t, e.lease(id), "the resume's handle is closed")
	require.Equal(t, before, e.logBytes(id), "the log is untouched")

	ffs.Reset()
	r, err := e.c.Resume(e.ctx, id, wire.ResumeSessionRequest{Options: options(2)})
	require.NoError(t, err)
	stored := e.events(id)
	require.Len(t, stored, len(acked)+1, "the log plus the end-seed marker")
	requireSameEvents(t, acked, stored[:len(acked)])
	require.Equal(t, wire.TypeEndSeed, stored[len(acked)].Type)
	require.Equal(t, int64(len(stored)), r.NextSeq)
	_, err = e.c.Dispose(e.ctx, id)
	require.NoError(t, err)
	require.Nil(t, e.lease(id))
}
