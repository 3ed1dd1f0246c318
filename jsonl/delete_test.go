package jsonl_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/wire"
)

// requireGone asserts that every operation agrees that session id does not
// exist, and that it can be created again.
func requireGone(t *testing.T, e *env, st *jsonl.Store, id, cwd string) {
	t.Helper()
	_, err := st.Inspect(bg, id)
	requireCode(t, err, wire.ErrNotFound)
	_, err = st.Open(bg, id, jsonl.AccessRead, jsonl.OpenOptions{})
	requireCode(t, err, wire.ErrNotFound)
	has, err := st.Has(bg, id)
	require.NoError(t, err)
	require.False(t, has)
	l, err := st.LeaseOf(bg, id)
	require.NoError(t, err)
	require.Nil(t, l)
	list, err := st.List(bg)
	require.NoError(t, err)
	for _, row := range list {
		require.NotEqual(t, id, row.Header.ID, "a deleted session is not listed")
	}
	noSuchFile(t, sessionDir(t, e.root, cwd, id))
	h := create(t, st, header(id, cwd))
	require.NoError(t, h.Close(bg))
}

// deletedEntries lists what deletes left in <root>/.deleted.
func deletedEntries(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, ".deleted"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestDeleteWithSubdirectory: a session directory holding a subdirectory is
// deleted whole; nothing of it is left, no lease in particular.
func TestDeleteWithSubdirectory(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		dir := sessionDir(t, e.root, "/w", "keep")
		writeFile(t, filepath.Join(dir, "notes", "deeper", "a.txt"), []byte("x"))
		// A link in the subdirectory is removed, never its target.
		outside := filepath.Join(filepath.Dir(e.root), "outside.txt")
		writeFile(t, outside, []byte("outside"))
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, "notes", "link")))

		require.NoError(t, e.store.Delete(bg, "keep"))
		requireGone(t, e, e.store, "keep", "/w")
		require.Empty(t, deletedEntries(t, e.root))
		require.Equal(t, []byte("outside"), readFile(t, outside))
		require.NoError(t, pending.Close(bg))
	})
}

// TestDeleteFailingBeforeTheSessionMovesLeavesItWhole: a delete whose move
// of the session directory fails leaves the whole session, without the
// delete's lease; a re-run completes.
func TestDeleteFailingBeforeTheSessionMovesLeavesItWhole(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ffs := faultfs.New(nil)
		e, pending := populated(t, comp, ffs)
		before := readAll(t, e.store, "keep")
		ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpRename, PathContains: ".deleted", Err: syscall.EXDEV, Times: 1})
		err := e.store.Delete(bg, "keep")
		require.ErrorIs(t, err, syscall.EXDEV)
		require.ErrorContains(t, err, `session "keep": delete failed; the session is unchanged: `)

		for _, st := range []*jsonl.Store{e.store, e.newStore(nil)} {
			insp, err := st.Inspect(bg, "keep")
			require.NoError(t, err)
			require.Nil(t, insp.Lease, "the delete's lease is withdrawn")
			require.Equal(t, before, insp.Events)
			_, err = st.Create(bg, header("keep", "/w"), jsonl.CreateOptions{HandleID: newHandleID()})
			requireCode(t, err, wire.ErrAlreadyExists)
		}
		w := openWrite(t, e.store, "keep")
		require.NoError(t, w.Close(bg))

		require.NoError(t, e.store.Delete(bg, "keep"))
		requireGone(t, e, e.newStore(nil), "keep", "/w")
		require.NoError(t, pending.Close(bg))
	})
}

// TestDeleteFailingAfterTheSessionMovedIsComplete: a file that cannot be
// removed (an immutable file) no longer leaves a half-deleted session that
// inspect calls absent and create calls existing: the session is gone for
// every operation, the failure is reported, and the next delete removes the
// leftovers.
func TestDeleteFailingAfterTheSessionMovedIsComplete(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ffs := faultfs.New(nil)
		e, pending := populated(t, comp, ffs)
		ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpRemove, PathContains: generationName(comp), Err: syscall.EPERM, Times: 1})
		err := e.store.Delete(bg, "keep")
		require.ErrorIs(t, err, syscall.EPERM)
		// Every operation agrees that the session is gone; create works.
		requireGone(t, e, e.newStore(nil), "keep", "/w")
		require.ErrorContains(t, err, `session "keep": deleted, but removing its files from "`+filepath.Join(e.root, ".deleted"))
		require.Len(t, deletedEntries(t, e.root), 1, "the leftovers wait in .deleted")
		// A re-run (of any delete) removes the leftovers.
		require.NoError(t, e.store.Delete(bg, "keep"))
		require.Empty(t, deletedEntries(t, e.root))
		requireGone(t, e, e.store, "keep", "/w")
		require.NoError(t, pending.Close(bg))
	})
}
