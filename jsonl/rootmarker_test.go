package jsonl_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/wire"
)

// markerPath is the root marker of a root.
func markerPath(root string) string { return filepath.Join(root, ".sessionflow-root") }

// opsOn lists the recorded operations of kind op whose path satisfies keep.
func opsOn(ffs *faultfs.FS, op faultfs.Op, keep func(string) bool) []faultfs.Record {
	var out []faultfs.Record
	for _, r := range ffs.Records() {
		if r.Op == op && keep(r.Path) {
			out = append(out, r)
		}
	}
	return out
}

// TestRootMarkerWrittenOnceAndFsynced: the first create on a new root
// publishes the marker through a fsynced temp file, a no-overwrite link and
// a fsync of the root; later operations and stores only read it.
func TestRootMarkerWrittenOnceAndFsynced(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ffs := faultfs.New(nil)
		e := newEnv(t, comp, ffs)
		persist(t, e.store, header("a", "/w"), completedTurn(t, 0, 1)...)
		require.Equal(t, `{"store":"sessionflow","version":1,"compression":"`+string(comp)+`"}`+"\n", string(readFile(t, markerPath(e.root))))

		links := opsOn(ffs, faultfs.OpLink, func(p string) bool { return p == markerPath(e.root) })
		require.Len(t, links, 1, "the marker is linked once")
		// The temp file is fsynced before the link, the root after it.
		recs := ffs.Records()
		var tmpSync, rootSync bool
		for _, r := range recs[:links[0].Index] {
			tmpSync = tmpSync || (r.Op == faultfs.OpSync && filepath.Dir(r.Path) == e.root && strings.HasSuffix(r.Path, ".tmp"))
		}
		for _, r := range recs[links[0].Index:] {
			rootSync = rootSync || (r.Op == faultfs.OpSync && r.Path == e.root)
		}
		require.True(t, tmpSync, "marker content fsynced before the link")
		require.True(t, rootSync, "root fsynced after the link")

		// Another store, and more operations: the marker is read, never
		// written again.
		other := e.newStore(ffs)
		persist(t, other, header("b", "/v"), completedTurn(t, 0, 1)...)
		_ = readAll(t, other, "a")
		require.Len(t, opsOn(ffs, faultfs.OpLink, func(p string) bool { return p == markerPath(e.root) }), 1)
		entries, err := os.ReadDir(e.root)
		require.NoError(t, err)
		for _, de := range entries {
			require.False(t, strings.HasSuffix(de.Name(), ".tmp"), "temp file left: %s", de.Name())
		}
	})
}

// TestRootMarkerCheckIsO1: a store over a marked root opens a session
// without reading any other session's directory.
func TestRootMarkerCheckIsO1(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		for _, id := range []string{"s1", "s2", "s3"} {
			persist(t, e.store, header(id, "/w"), completedTurn(t, 0, 1)...)
		}
		ffs := faultfs.New(nil)
		fresh := e.newStore(ffs)
		require.Len(t, readAll(t, fresh, "s2"), 6)
		read := opsOn(ffs, faultfs.OpReadDir, func(p string) bool {
			return strings.HasSuffix(p, "s1") || strings.HasSuffix(p, "s3")
		})
		require.Empty(t, read, "other sessions' directories were read")
	})
}

// TestRootMarkerDisagreement: a store of the other encoding is refused at
// its first operation, whatever it is about, with a typed error.
func TestRootMarkerDisagreement(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	persist(t, e.store, header("a", "/w"), completedTurn(t, 0, 1)...)
	zst, err := jsonl.NewStore(jsonl.Options{Root: e.root, Compression: jsonl.CompressionZstd})
	require.NoError(t, err)
	want := `store root "` + e.root + `" is marked for compression "none" ("` + markerPath(e.root) +
		`"), but this backend is configured for compression "zstd"; use a separate root or select the matching compression mode`
	unchanged(t, e.root, func() {
		_, err = zst.Stat(bg, "absent")
		require.EqualError(t, err, want)
		require.ErrorIs(t, err, jsonl.ErrRootMismatch)
		require.ErrorIs(t, err, wire.ErrLayout)
		_, err = zst.Create(bg, header("new", "/w"), jsonl.CreateOptions{HandleID: newHandleID()})
		require.EqualError(t, err, want)
		for _, err := range zst.Rows(bg, "") {
			require.EqualError(t, err, want)
		}
	})
}

// TestRootMarkerDamagedOrNewer: a marker that cannot be read as one, or of
// a newer version, is refused with a typed error and never rewritten.
func TestRootMarkerDamagedOrNewer(t *testing.T) {
	e := newEnv(t, jsonl.CompressionZstd, nil)
	persist(t, e.store, header("a", "/w"), completedTurn(t, 0, 1)...)
	m := markerPath(e.root)

	require.NoError(t, os.WriteFile(m, []byte(`{"store":"other","version":1}`), 0o600))
	_, err := e.newStore(nil).Stat(bg, "a")
	requireCode(t, err, wire.ErrCorrupt)
	require.EqualError(t, err, `store root marker "`+m+`" is damaged: not a sessionflow root marker (want "store": "sessionflow" and a version >= 1); restore it or remove it to have the root scanned again`)

	require.NoError(t, os.WriteFile(m, []byte(`{"store":"sessionflow","version":2,"compression":"zstd"}`), 0o600))
	_, err = e.newStore(nil).Stat(bg, "a")
	requireCode(t, err, wire.ErrFormatUnsupported)
	require.ErrorIs(t, err, jsonl.ErrRootMismatch)
	require.EqualError(t, err, `store root marker "`+m+`" has version 2, newer than the version 1 this build reads; use a newer build`)
	require.Equal(t, `{"store":"sessionflow","version":2,"compression":"zstd"}`, string(readFile(t, m)))

	// A marker that is a symbolic link is refused, not followed.
	require.NoError(t, os.Remove(m))
	require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), m))
	_, err = e.newStore(nil).Stat(bg, "a")
	requireCode(t, err, wire.ErrLayout)
	require.Contains(t, err.Error(), "is a symbolic link; refusing to follow it")
}

// TestRootMarkerMigration: a root written before the marker existed is
// scanned by the first operation of a store, which then marks it; a root
// of the other encoding is refused by that scan and stays unmarked.
func TestRootMarkerMigration(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		for _, id := range []string{"s1", "s2"} {
			persist(t, e.store, header(id, "/w"), completedTurn(t, 0, 1)...)
		}
		require.NoError(t, os.Remove(markerPath(e.root)))

		ffs := faultfs.New(nil)
		old := e.newStore(ffs)
		require.Len(t, readAll(t, old, "s1"), 6)
		scanned := opsOn(ffs, faultfs.OpReadDir, func(p string) bool { return strings.HasSuffix(p, "s2") })
		require.NotEmpty(t, scanned, "the unmarked root was not scanned")
		require.FileExists(t, markerPath(e.root))
		require.Len(t, opsOn(ffs, faultfs.OpLink, func(p string) bool { return p == markerPath(e.root) }), 1)

		// The next store reads the marker and scans nothing.
		ffs.Reset()
		next := e.newStore(ffs)
		require.Len(t, readAll(t, next, "s1"), 6)
		require.Empty(t, opsOn(ffs, faultfs.OpReadDir, func(p string) bool { return strings.HasSuffix(p, "s2") }))
	})
}

// TestRootMarkerWriteFailures: a failed publication of the marker fails the
// operation, leaves no marker (a failed root fsync withdraws the link) and
// the retry marks the root.
func TestRootMarkerWriteFailures(t *testing.T) {
	for _, rule := range []faultfs.Rule{
		{Index: -1, Op: faultfs.OpLink, PathContains: ".sessionflow-root", Err: syscall.ENOSPC, Times: 1},
		{Index: -1, Op: faultfs.OpSync, PathContains: ".tmp", Err: syscall.EIO, Times: 1},
	} {
		t.Run(string(rule.Op), func(t *testing.T) {
			ffs := faultfs.New(nil)
			e := newEnv(t, jsonl.CompressionNone, ffs)
			require.NoError(t, os.MkdirAll(e.root, 0o700))
			ffs.Add(rule)
			_, err := e.store.Create(bg, header("a", "/w"), jsonl.CreateOptions{HandleID: newHandleID()})
			require.ErrorIs(t, err, rule.Err)
			noSuchFile(t, markerPath(e.root))
			require.Empty(t, filesUnder(t, e.root))
			persist(t, e.store, header("a", "/w"), completedTurn(t, 0, 1)...)
			require.FileExists(t, markerPath(e.root))
		})
	}
	t.Run("root sync", func(t *testing.T) {
		// A dry run finds the fsync of the root that follows the link.
		dry := faultfs.New(nil)
		d := newEnv(t, jsonl.CompressionNone, dry)
		require.NoError(t, os.MkdirAll(d.root, 0o700))
		_, err := d.store.Stat(bg, "a")
		require.NoError(t, err)
		idx := -1
		for _, r := range dry.Records() {
			if r.Op == faultfs.OpSync && r.Path == d.root {
				idx = r.Index
			}
		}
		require.GreaterOrEqual(t, idx, 0, "no fsync of the root:\n%s", dry)

		ffs := faultfs.New(nil)
		e := newEnv(t, jsonl.CompressionNone, ffs)
		require.NoError(t, os.MkdirAll(e.root, 0o700))
		ffs.InjectAt(idx, syscall.EIO)
		_, err = e.store.Stat(bg, "a")
		require.ErrorIs(t, err, syscall.EIO)
		require.Equal(t, e.root, ffs.Records()[idx].Path)
		noSuchFile(t, markerPath(e.root))
		_, err = e.store.Stat(bg, "a")
		require.NoError(t, err)
		require.FileExists(t, markerPath(e.root))
	})
}

// TestRootMarkerReadErrors: only ENOENT means absent. A marker the store may
// not read is an error, not a reason to scan and rewrite; a root that
// became a file is ENOTDIR; an absent root is neither created nor marked
// by a read.
func TestRootMarkerReadErrors(t *testing.T) {
	ffs := faultfs.New(nil)
	e := newEnv(t, jsonl.CompressionZstd, ffs)
	persist(t, e.store, header("a", "/w"), completedTurn(t, 0, 1)...)
	fresh := e.newStore(ffs)
	ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpOpen, PathContains: ".sessionflow-root", Err: syscall.EACCES, Times: 1})
	_, err := fresh.Stat(bg, "a")
	require.ErrorIs(t, err, fs.ErrPermission)
	snap, err := fresh.Stat(bg, "a")
	require.NoError(t, err)
	require.NotNil(t, snap)

	file := filepath.Join(t.TempDir(), "root")
	st, err := jsonl.NewStore(jsonl.Options{Root: file})
	require.NoError(t, err)
	writeFile(t, file, []byte("not a directory"))
	_, err = st.Stat(bg, "a")
	require.ErrorIs(t, err, syscall.ENOTDIR)

	missing := filepath.Join(t.TempDir(), "absent")
	st, err = jsonl.NewStore(jsonl.Options{Root: missing})
	require.NoError(t, err)
	snap, err = st.Stat(bg, "a")
	require.NoError(t, err)
	require.Nil(t, snap)
	for _, err := range st.Rows(bg, "") {
		require.NoError(t, err)
	}
	noSuchFile(t, missing)
}

// TestRootMarkerReadOnlyRoot: an unmarked root the store may not write is
// scanned and served, with a warning, and stays unmarked.
func TestRootMarkerReadOnlyRoot(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	persist(t, e.store, header("a", "/w"), completedTurn(t, 0, 1)...)
	require.NoError(t, os.Remove(markerPath(e.root)))
	ffs := faultfs.New(nil)
	ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpOpen, PathContains: ".tmp", Err: syscall.EROFS})
	ro := e.newStore(ffs)
	require.Len(t, readAll(t, ro, "a"), 6)
	noSuchFile(t, markerPath(e.root))
	require.Contains(t, strings.Join(e.logs.warnings(), "\n"), "cannot mark the store root")
}

// RootCompression reads the marker's encoding: none for an absent root or
// marker, the recorded one for a marked root, errors for a damaged or newer
// marker.
func TestRootCompression(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		c, found, err := jsonl.RootCompression(e.root)
		require.NoError(t, err)
		require.False(t, found, "an absent root has no marker")
		require.Equal(t, jsonl.Compression(""), c)

		persist(t, e.store, header("a", "/w"), completedTurn(t, 0, 1)...)
		c, found, err = jsonl.RootCompression(e.root)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, comp, c)
	})
	root := t.TempDir()
	_, found, err := jsonl.RootCompression(root)
	require.NoError(t, err)
	require.False(t, found, "an unmarked root")
	for body, want := range map[string]error{
		`{"store":"sessionflow","version":1,"compression":"gzip"}`: wire.ErrCorrupt,
		`not json`: wire.ErrCorrupt,
		`{"store":"sessionflow","version":2,"compression":"none"}`: jsonl.ErrRootMismatch,
	} {
		require.NoError(t, os.WriteFile(markerPath(root), []byte(body+"\n"), 0o600))
		_, found, err := jsonl.RootCompression(root)
		require.ErrorIs(t, err, want, "marker %s", body)
		require.False(t, found)
	}
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, _, err = jsonl.RootCompression(file)
	require.ErrorIs(t, err, syscall.ENOTDIR)
}
