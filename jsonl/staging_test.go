package jsonl_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/crashfs"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestStageReadUnstage: a staged payload reads back from this and from
// another process, an identical retry is accepted, other bytes are a
// conflict that keeps the first payload, and Unstage removes it.
func TestStageReadUnstage(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		hd := create(t, e.store, header("stg", "/w"))
		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}))

		_, ok, err := hd.Staged(bg, "1/1/call-1")
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, hd.Unstage(bg, "1/1/call-1"), "unstaging nothing is a no-op")

		require.NoError(t, hd.Stage(bg, "1/1/call-1", []byte(`{"a":1}`)))
		require.NoError(t, hd.Stage(bg, "1/1/call-1", []byte(`{"a":1}`)), "a retry with the same bytes")
		err = hd.Stage(bg, "1/1/call-1", []byte(`{"a":2}`))
		require.ErrorIs(t, err, jsonl.ErrStagedConflict)
		require.ErrorContains(t, err, "a different payload is already staged under this key")

		other := e.newStore(nil).Attach(hd.Ref())
		body, ok, err := other.Staged(bg, "1/1/call-1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, `{"a":1}`, string(body))
		_, ok, err = other.Staged(bg, "1/1/call-2")
		require.NoError(t, err)
		require.False(t, ok)

		require.NoError(t, other.Unstage(bg, "1/1/call-1"))
		_, ok, err = hd.Staged(bg, "1/1/call-1")
		require.NoError(t, err)
		require.False(t, ok)
		// The log is untouched by staging.
		require.Equal(t, []int64{0}, seqs(readAll(t, e.newStore(nil), "stg")))
	})
}

// TestStageRefusals: empty keys, read handles, closed handles, sessions
// without a log and handles that lost the lease cannot stage.
func TestStageRefusals(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	hd := create(t, e.store, header("ref", ""))
	requireCode(t, hd.Stage(bg, "k", []byte("x")), wire.ErrInvalidArgument) // no log yet
	require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}))
	requireCode(t, hd.Stage(bg, "", []byte("x")), wire.ErrInvalidArgument)

	rd, err := e.store.Open(bg, "ref", jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	requireCode(t, rd.Stage(bg, "k", []byte("x")), wire.ErrReadOnly)

	ref := hd.Ref()
	require.NoError(t, hd.Close(bg))
	requireCode(t, hd.Stage(bg, "k", []byte("x")), wire.ErrHandleClosed)
	// A zombie attempt in another process after the session was reopened.
	nh := openWrite(t, e.store, "ref")
	err = e.newStore(nil).Attach(ref).Stage(bg, "k", []byte("x"))
	require.Error(t, err)
	require.True(t, jsonl.ErrorCode(err) == jsonl.CodeHandleClosed || jsonl.ErrorCode(err) == jsonl.CodeOwnershipLost, "got %v", err)
	_, ok, err := nh.Staged(bg, "k")
	require.NoError(t, err)
	require.False(t, ok)
}

// TestStageDurability: a failed directory fsync withdraws the staged name,
// so the failed Stage leaves nothing and a retry starts afresh.
func TestStageDurability(t *testing.T) {
	ffs := faultfs.New(nil)
	e := newEnv(t, jsonl.CompressionNone, ffs)
	hd := create(t, e.store, header("dur", ""))
	require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}))
	require.NoError(t, hd.Stage(bg, "first", []byte("1"))) // creates the staging directory
	ffs.Reset()
	require.NoError(t, hd.Stage(bg, "second", []byte("2")))
	var synced, linked bool
	for _, r := range ffs.Records() {
		if r.Op == faultfs.OpLink {
			linked = true
		}
		if linked && r.Op == faultfs.OpSync && strings.HasSuffix(r.Path, "staged") {
			synced = true
		}
	}
	require.True(t, linked && synced, "stage must link and then fsync the staging directory:\n%s", ffs)

	// Fail each operation of a stage in turn.
	n := 0
	for range 50 {
		ffs.Reset()
		ffs.InjectAt(n, syscall.EIO)
		err := hd.Stage(bg, "third", []byte("3"))
		if err == nil {
			break
		}
		require.ErrorIs(t, err, syscall.EIO)
		body, ok, rerr := hd.Staged(bg, "third")
		require.NoError(t, rerr)
		if ok {
			require.Equal(t, "3", string(body), "a failed stage may leave only the complete payload")
		}
		n++
	}
	ffs.Reset()
	body, ok, err := hd.Staged(bg, "third")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "3", string(body))
	require.Greater(t, n, 3, "the sweep must have failed several operations")
	// Besides temp files a best-effort cleanup could not remove, the
	// staging directory holds the three payloads.
	entries, err := os.ReadDir(filepath.Join(sessionDir(t, e.root, "", "dur"), "staged"))
	require.NoError(t, err)
	var names []string
	for _, en := range entries {
		if !strings.HasSuffix(en.Name(), ".tmp") {
			names = append(names, en.Name())
		}
	}
	require.Len(t, names, 3)
}

// TestStagedFilesAreNotDamage: staged payloads (and a temp file of an
// unfinished staging) beside a session's log neither break nor show up in
// List, Stat, reads, a new store's root check, a reopen, or Delete, which
// removes them with the session.
func TestStagedFilesAreNotDamage(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		hd := create(t, e.store, header("dmg", "/proj"))
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		require.NoError(t, hd.Stage(bg, "1/1/call-1", []byte(`{"content":[]}`)))
		require.NoError(t, hd.Stage(bg, "1/1/call-2", []byte(`{"content":[]}`)))
		stagedPath := filepath.Join(sessionDir(t, e.root, "/proj", "dmg"), "staged")
		writeFile(t, filepath.Join(stagedPath, "session.0123456789ab.tmp"), []byte("partial"))
		persist(t, e.store, header("other", "/proj"), completedTurn(t, 0, 1)...)
		require.NoError(t, hd.Close(bg))

		fresh := e.newStore(nil)
		rows, err := fresh.List(bg)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		for _, r := range rows {
			require.Nil(t, r.Problem, "row %s: %v", r.Header.ID, r.Problem)
		}
		require.Equal(t, "dmg", rows[0].Header.ID)
		snap, err := fresh.Stat(bg, "dmg")
		require.NoError(t, err)
		require.NotNil(t, snap)
		require.Equal(t, "dmg", snap.Header.ID)
		require.Equal(t, e.logPath("/proj", "dmg"), snap.Path)
		require.Equal(t, upTo(6), seqs(readAll(t, fresh, "dmg")))
		re := openWrite(t, fresh, "dmg")
		body, ok, err := re.Staged(bg, "1/1/call-1")
		require.NoError(t, err)
		require.True(t, ok, "a staged payload survives a close and reopen")
		require.Equal(t, `{"content":[]}`, string(body))
		require.NoError(t, re.Close(bg))

		require.NoError(t, fresh.Delete(bg, "dmg"))
		has, err := fresh.Has(bg, "dmg")
		require.NoError(t, err)
		require.False(t, has)
		noSuchFile(t, sessionDir(t, e.root, "/proj", "dmg"))
		for _, f := range filesUnder(t, e.root) {
			require.NotContains(t, f, "staged", "delete must remove staged payloads")
		}
		rows, err = fresh.List(bg)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Nil(t, rows[0].Problem)
		_, err = os.Stat(e.root)
		require.NoError(t, err)
	})
}

// TestStagedFilesSurviveMigration: a staging directory beside a v0 log
// neither stops its migration nor the write open that migrates it, and
// stays readable under its documented name (FORMAT.md §6.7).
func TestStagedFilesSurviveMigration(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	old := writeLogFile(t, e.root, "s", "session.jsonl", `{"type":"session","version":0,"id":"s","createdAt":5,"delegationDepth":0}`+"\n"+turn0)
	staged := filepath.Join(filepath.Dir(old), "staged")
	writeFile(t, filepath.Join(staged, sha256Hex("1/1/call-1")[:32]), []byte("payload"))
	writeFile(t, filepath.Join(staged, "session.0123456789ab.tmp"), []byte("partial"))
	res, err := e.store.Migrate(bg, "s", jsonl.MigrateOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Events)
	hd := openWrite(t, e.newStore(nil), "s")
	body, ok, err := hd.Staged(bg, "1/1/call-1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "payload", string(body))
	require.NoError(t, hd.Append(bg, []session.Event{turnEnd(t, 1, 1)}))
	require.NoError(t, hd.Close(bg))
	rows, err := e.newStore(nil).List(bg)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Nil(t, rows[0].Problem)
}

// TestStagePowerLoss: a power loss at any operation of a Stage leaves the
// payload absent or whole, never partial; once Stage returned nil it
// survives any power loss, as does the payload staged before it.
func TestStagePowerLoss(t *testing.T) {
	body := []byte(strings.Repeat(`{"result":"staged payload"}`, 50))
	policies := []crashfs.Policy{{Mode: crashfs.LoseVolatile}, {Mode: crashfs.KeepVolatile}, {Mode: crashfs.Mixed, Seed: 1}, {Mode: crashfs.Mixed, Seed: 2}}
	for i := 0; ; i++ {
		finished := false
		for _, pol := range policies {
			dir := t.TempDir()
			fsys, err := crashfs.New(dir)
			require.NoError(t, err)
			root := filepath.Join(dir, "store")
			st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, FS: fsys, Logger: durQuiet})
			require.NoError(t, err)
			hd := create(t, st, header("pl", "/w"))
			require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}))
			require.NoError(t, hd.Stage(bg, "first", []byte("one")))
			fsys.CrashAt(fsys.Count() + i)
			err = hd.Stage(bg, "second", body)
			acked := err == nil
			finished = acked && !fsys.Crashed()
			_, err = fsys.PowerLoss(pol)
			require.NoError(t, err)

			after, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, Logger: durQuiet})
			require.NoError(t, err)
			h := after.Attach(hd.Ref())
			got, ok, err := h.Staged(bg, "first")
			require.NoError(t, err, "crash at %d, %s", i, pol)
			require.True(t, ok, "crash at %d, %s: an acknowledged staging was lost", i, pol)
			require.Equal(t, "one", string(got))
			got, ok, err = h.Staged(bg, "second")
			require.NoError(t, err, "crash at %d, %s", i, pol)
			if acked {
				require.True(t, ok, "crash at %d, %s: an acknowledged staging was lost", i, pol)
			}
			if ok {
				require.Equal(t, string(body), string(got), "crash at %d, %s: a partial payload under its name", i, pol)
			}
			// A retry after the crash stages it.
			require.NoError(t, h.Stage(bg, "second", body), "crash at %d, %s", i, pol)
		}
		if finished {
			require.Greater(t, i, 5, "the sweep must have crashed inside Stage")
			return
		}
	}
}
