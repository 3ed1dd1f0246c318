package faults

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestCrashDuringLiveAppend: the worker's filesystem "crashes" in the
// middle of a live append (every operation from a chosen one on fails
// without being performed), that worker is stopped, and a fresh worker
// with a healthy filesystem takes over the task queue. The AppendBatch
// activity's retry runs on the new worker, attaches to the session's
// handle by reference and stores the batch (or finds it stored), so the
// Append is acknowledged; later appends and disposal work, and the log
// holds exactly the acknowledged events.
func TestCrashDuringLiveAppend(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(*faultfs.FS)
		// written reports whether the batch is on disk after the crash.
		written bool
	}{
		// Nothing of the append reaches the filesystem.
		{"at the next operation", func(f *faultfs.FS) { f.CrashAt(f.Count()) }, false},
		// The batch is written but not fsynced, and not cut back.
		{"at the log fsync", func(f *faultfs.FS) {
			f.Add(faultfs.Rule{Index: -1, Op: faultfs.OpSync, PathContains: "session.v3", Crash: true})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, jsonl.CompressionNone)
			ffs := faultfs.New(nil)
			first := e.startWorker(ffs)
			id := e.id("crash")
			s, acked := e.create(id, 0)
			b1 := turn(t, s.NextSeq, s.LastTurn+1)
			_, err := e.c.Append(e.ctx, id, session.WireEvents(b1))
			require.NoError(t, err)
			acked = append(acked, b1...)

			tc.arm(ffs)
			b2 := turn(t, s.NextSeq+2, s.LastTurn+2)
			type result struct {
				res wire.AppendResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := e.c.Append(e.ctx, id, session.WireEvents(b2))
				done <- result{res, err}
			}()
			deadline := time.Now().Add(opTimeout)
			for !ffs.Crashed() {
				require.True(t, time.Now().Before(deadline), "the crash never fired:\n%s", ffs)
				time.Sleep(20 * time.Millisecond)
			}
			require.NoError(t, first.Stop())
			if tc.written {
				requireSameEvents(t, append(append([]session.Event(nil), acked...), b2...), e.events(id))
			} else {
				requireSameEvents(t, acked, e.events(id))
			}
			e.startWorker(nil)

			r := <-done
			require.NoError(t, r.err, "the append in flight at the crash is stored by the new worker")
			require.Equal(t, s.NextSeq+4, r.res.NextSeq)
			acked = append(acked, b2...)
			requireSameEvents(t, acked, e.events(id))

			b3 := turn(t, s.NextSeq+4, s.LastTurn+3)
			res, err := e.c.Append(e.ctx, id, session.WireEvents(b3))
			require.NoError(t, err)
			require.Equal(t, s.NextSeq+6, res.NextSeq)
			acked = append(acked, b3...)
			dr, err := e.c.Dispose(e.ctx, id)
			require.NoError(t, err)
			require.Equal(t, res.NextSeq, dr.NextSeq)
			require.Nil(t, e.lease(id))
			requireSameEvents(t, acked, e.events(id))
		})
	}
}
