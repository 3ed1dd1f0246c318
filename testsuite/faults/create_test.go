package faults

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// materializeSync is ENOSPC on the fsync of the temp file a log is
// published through. Installed from the setup hook, after CreateHandle
// published the lease (through a temp file of the same name pattern), it
// hits only the commit point's first materialization.
func materializeSync(times int) faultfs.Rule {
	return faultfs.Rule{Index: -1, Op: faultfs.OpSync, PathContains: ".tmp", Err: syscall.ENOSPC, Times: times}
}

// seededCreate is a create whose seed is stored at the commit point, after
// the setup hook.
func seededCreate(t *testing.T, id string, hook bool) wire.CreateSessionRequest {
	req := wire.CreateSessionRequest{SessionID: id, Seed: session.WireEvents(turn(t, 0, 1)), Options: options(2)}
	if hook {
		req.SetupActivity = setupHookName
	}
	return req
}

// TestCreateENOSPCOnMaterializationPersistent: the first materialization
// fails on every attempt. CreateSession returns the activity's IOError
// unchanged, the rollback closes the handle (no lease, no log, nothing
// listed) and the id is created again once the fault is gone.
func TestCreateENOSPCOnMaterializationPersistent(t *testing.T) {
	e := newEnv(t, jsonl.CompressionZstd)
	ffs := faultfs.New(nil)
	e.startWorker(ffs)
	id := e.id("create-enospc")
	e.setOnSetup(func() { ffs.Add(materializeSync(0)) })

	_, err := e.c.Create(e.ctx, seededCreate(t, id, true))
	msg := clientError(t, err, "IOError", "no space left on device")
	t.Logf("client-visible error: %s", msg)
	require.Contains(t, ffs.String(), ".tmp -> sync ", "the materialization's fsync failed")
	e.requireRolledBack(id, "IOError")
	e.requireNothingStored(id)

	ffs.Reset()
	e.setOnSetup(nil)
	s, err := e.c.Create(e.ctx, seededCreate(t, id, false))
	require.NoError(t, err)
	stored := e.events(id)
	require.Len(t, stored, int(s.NextSeq))
	requireSameEvents(t, turn(t, 0, 1), stored[:2])
	_, err = e.c.Dispose(e.ctx, id)
	require.NoError(t, err)
	require.Nil(t, e.lease(id))
}

// TestCreateENOSPCOnMaterializationTransient: the first materialization
// fails once; the StoreSeed/AppendBatch retry publishes the log and the
// session goes live with exactly the seed and its marker stored.
func TestCreateENOSPCOnMaterializationTransient(t *testing.T) {
	e := newEnv(t, jsonl.CompressionZstd)
	ffs := faultfs.New(nil)
	e.startWorker(ffs)
	id := e.id("create-enospc-once")
	e.setOnSetup(func() { ffs.Add(materializeSync(1)) })

	s, err := e.c.Create(e.ctx, seededCreate(t, id, true))
	require.NoError(t, err)
	require.Contains(t, ffs.String(), "no space left on device", "the fault fired")
	stored := e.events(id)
	require.Len(t, stored, int(s.NextSeq))
	requireSameEvents(t, turn(t, 0, 1), stored[:2])
	_, err = e.c.Dispose(e.ctx, id)
	require.NoError(t, err)
	require.Nil(t, e.lease(id))
	requireSameEvents(t, stored, e.events(id))
}

// TestCreateEACCES: the store may not create the session: its directory
// (mkdir) or the lease's temp file (open). CreateSession fails with the
// retryable IOError saying "permission denied" once its attempts are used,
// nothing is left stored or leased, and the id is created once the
// permission is back.
func TestCreateEACCES(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule func(dir string) faultfs.Rule
	}{
		{"mkdir of the session directory", func(dir string) faultfs.Rule {
			return faultfs.Rule{Index: -1, Op: faultfs.OpMkdir, PathContains: dir, Err: syscall.EACCES}
		}},
		{"open of the lease temp file", func(string) faultfs.Rule {
			return faultfs.Rule{Index: -1, Op: faultfs.OpOpen, PathContains: ".tmp", Err: syscall.EACCES}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, jsonl.CompressionZstd)
			ffs := faultfs.New(nil)
			e.startWorker(ffs)
			id := e.id("create-eacces")
			seg, err := jsonl.EncodeSegment(id)
			require.NoError(t, err)
			ffs.Add(tc.rule(seg))

			_, err = e.c.Create(e.ctx, seededCreate(t, id, false))
			msg := clientError(t, err, "IOError", "permission denied")
			t.Logf("client-visible error: %s", msg)
			e.requireRolledBack(id, "IOError")
			e.requireNothingStored(id)
			// No residue: the session directory is gone (a failed lease
			// publication removes the directory it made).
			_, err = os.Stat(filepath.Join(e.root, "_no-cwd", seg))
			require.ErrorIs(t, err, fs.ErrNotExist, "the session directory is left behind")

			ffs.Reset()
			s, err := e.c.Create(e.ctx, seededCreate(t, id, false))
			require.NoError(t, err)
			require.Len(t, e.events(id), int(s.NextSeq))
			_, err = e.c.Dispose(e.ctx, id)
			require.NoError(t, err)
			require.Nil(t, e.lease(id))
		})
	}
}
