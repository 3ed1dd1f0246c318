package jsonl_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// writeLogFile writes a hand-made log file into the session directory of
// id in the _no-cwd project.
func writeLogFile(t *testing.T, root, id, name, content string) string {
	t.Helper()
	seg, err := jsonl.EncodeSegment(id)
	require.NoError(t, err)
	path := filepath.Join(root, "_no-cwd", seg, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

const turn0 = `{"type":"turn/start","seq":0,"time":1000,"data":{"turn":1}}` + "\n"

// TestListShowsWhatItCannotServe: every session directory List cannot
// serve is a row with the reason, instead of being skipped.
func TestListShowsWhatItCannotServe(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	persist(t, e.store, header("ok", ""), turnStart(t, 0, 1))
	writeLogFile(t, e.root, "v4", "session.v3.jsonl", `{"type":"session","version":4,"id":"v4","createdAt":5,"isSeeded":false,"delegationDepth":0}`+"\n")
	writeLogFile(t, e.root, "v1", "session.v1.jsonl", `{"type":"session","version":1,"id":"v1","createdAt":5}`+"\n")
	writeLogFile(t, e.root, "bad", "session.v3.jsonl", `{"type":"session","version":3}`+"\n")
	writeLogFile(t, e.root, "empty", "session.v3.jsonl", "")
	writeLogFile(t, e.root, "moved", "session.v3.jsonl", `{"type":"session","version":3,"id":"elsewhere","createdAt":5,"isSeeded":false,"delegationDepth":0}`+"\n")
	snaps, err := e.store.List(bg)
	require.NoError(t, err)
	want := map[string]struct {
		is   error
		text string
	}{
		"bad":   {wire.ErrCorrupt, "corrupt session log: first line is not a session header"},
		"empty": {wire.ErrCorrupt, "empty or header-less session log"},
		"moved": {wire.ErrCorrupt, `holds a log whose header names session "elsewhere"`},
		"v1":    {wire.ErrFormatUnsupported, `session "v1" uses log format v1, older than the supported v3`},
		"v4":    {wire.ErrFormatUnsupported, `session "v4" uses log format v4, but this harness reads only v3`},
	}
	var ids []string
	for _, s := range snaps {
		ids = append(ids, s.Header.ID)
		if s.Header.ID == "ok" {
			require.Nil(t, s.Problem)
			continue
		}
		w, ok := want[s.Header.ID]
		require.True(t, ok, "unexpected row %+v", s)
		require.NotNil(t, s.Problem, "row %q has no problem", s.Header.ID)
		require.ErrorIs(t, s.Problem, w.is, s.Problem.Reason)
		require.Contains(t, s.Problem.Reason, w.text)
	}
	require.Equal(t, []string{"bad", "empty", "moved", "ok", "v1", "v4"}, ids)
}

// TestV0HeaderRules: a v0 header is read with the published harness's
// guard, and a generation file must hold the version its name stands for.
func TestV0HeaderRules(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	writeLogFile(t, e.root, "lenient", "session.jsonl",
		`{"type":"session","version":0,"id":"lenient","createdAt":5,"delegationDepth":0,"extra":{"kept":"out"}}`+"\n"+turn0)
	h, err := e.store.Open(bg, "lenient", jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	require.Equal(t, wire.FormatVersionV0, h.Header().Version)
	require.False(t, h.Header().IsSeeded)
	require.NoError(t, h.Close(bg))

	for id, line := range map[string]string{
		"negative-seed": `{"type":"session","version":0,"id":"negative-seed","createdAt":5,"seedLength":-1,"delegationDepth":0}`,
		"no-depth":      `{"type":"session","version":0,"id":"no-depth","createdAt":5}`,
		"origin":        `{"type":"session","version":0,"id":"origin","createdAt":5,"origin":"user","delegationDepth":0}`,
	} {
		writeLogFile(t, e.root, id, "session.jsonl", line+"\n")
		_, err := e.store.Open(bg, id, jsonl.AccessRead, jsonl.OpenOptions{})
		require.ErrorIs(t, err, wire.ErrCorrupt, id)
		require.Contains(t, err.Error(), "corrupt session log: first line is not a session header", id)
	}
	writeLogFile(t, e.root, "retired", "session.jsonl", `{"type":"session","version":0,"id":"retired","createdAt":5,"delegationDepth":0,"sandboxMode":"x"}`+"\n")
	_, err = e.store.Open(bg, "retired", jsonl.AccessRead, jsonl.OpenOptions{})
	require.ErrorContains(t, err, "session header uses retired policy baseline fields")

	writeLogFile(t, e.root, "v0-in-v3", "session.v3.jsonl", `{"type":"session","version":0,"id":"v0-in-v3","createdAt":5,"delegationDepth":0}`+"\n")
	_, err = e.store.Open(bg, "v0-in-v3", jsonl.AccessRead, jsonl.OpenOptions{})
	require.ErrorIs(t, err, wire.ErrCorrupt)
	require.ErrorContains(t, err, "a format v0 header in the generation file of format v3")
	writeLogFile(t, e.root, "v3-in-v0", "session.jsonl", `{"type":"session","version":3,"id":"v3-in-v0","createdAt":5,"isSeeded":false,"delegationDepth":0}`+"\n")
	_, err = e.store.Open(bg, "v3-in-v0", jsonl.AccessRead, jsonl.OpenOptions{})
	require.ErrorContains(t, err, "a format v3 header in the generation file of format v0")
}

// TestMigrateNeedsTheForkMarker: a seeded v0 log without an end-seed at
// seq seedLength or seedLength-1 can be read, but not migrated (D24).
func TestMigrateNeedsTheForkMarker(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	path := writeLogFile(t, e.root, "child", "session.jsonl",
		`{"type":"session","version":0,"id":"child","createdAt":5,"parentSession":"p","seedLength":1,"delegationDepth":1}`+"\n"+turn0+
			`{"type":"turn/end","seq":1,"time":1001,"data":{"turn":1,"reason":{"kind":"completed"}}}`+"\n")
	h, err := e.store.Open(bg, "child", jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	require.True(t, h.Header().IsSeeded)
	require.Equal(t, int64(1), h.InheritedEventCount())
	require.NoError(t, h.Close(bg))
	_, err = e.store.Migrate(bg, "child", jsonl.MigrateOptions{})
	require.ErrorIs(t, err, wire.ErrFormatUnsupported)
	require.ErrorContains(t, err, `session "child" (format v0) inherits 1 events but has no session/end-seed at seq 1 or 0`)
	_, err = os.Stat(filepath.Join(filepath.Dir(path), "session.v3.jsonl"))
	require.True(t, os.IsNotExist(err))
	_, err = e.store.Open(bg, "child", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
	require.ErrorIs(t, err, wire.ErrFormatUnsupported, "a resume refuses what it cannot migrate")
	lease, err := e.store.LeaseOf(bg, "child")
	require.NoError(t, err)
	require.Nil(t, lease, "the refused write open left its lease")
}

// TestStaleMigrationRecordIsReplaced: a migration record left by a
// migration that never published its generation does not stop the next
// one, and an unrelated lower generation is a conflict even with a record.
func TestStaleMigrationRecordIsReplaced(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	old := writeLogFile(t, e.root, "s", "session.jsonl", `{"type":"session","version":0,"id":"s","createdAt":5,"delegationDepth":0}`+"\n"+turn0)
	dir := filepath.Dir(old)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "session.migration.json"), []byte(`{"from":"session.jsonl","to":"session.v3.jsonl","sourceSize":1}`), 0o600))
	res, err := e.store.Migrate(bg, "s", jsonl.MigrateOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Events)
	rec, err := os.ReadFile(filepath.Join(dir, "session.migration.json"))
	require.NoError(t, err)
	require.Contains(t, string(rec), `"sourceSize":`+itoa(len(`{"type":"session","version":0,"id":"s","createdAt":5,"delegationDepth":0}`+"\n"+turn0)))
	require.Equal(t, []int64{0}, seqs(readAll(t, e.store, "s")))

	// A second lower generation that no record names.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "session.v2.jsonl"), []byte("{}\n"), 0o600))
	_, err = e.store.Open(bg, "s", jsonl.AccessRead, jsonl.OpenOptions{})
	require.ErrorIs(t, err, jsonl.ErrGenerationConflict)
	require.True(t, strings.Contains(err.Error(), "session.v2.jsonl") && errors.Is(err, jsonl.ErrGenerationConflict))
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// TestPendingSessionRefusesAForeignLog: a log another writer (one that
// ignores the lease, like the published harness) put where a pending
// session is to be materialized is refused, not adopted; a log with the
// pending session's own header (an earlier attempt of the same handle) is
// adopted as before.
func TestPendingSessionRefusesAForeignLog(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		mine := header("p", "/w")
		hd := create(t, e.store, mine)
		other := mine
		other.CreatedAt = 6
		path := e.logPath("/w", "p")
		writeFile(t, path, encodeLog(t, comp, headerLine(other), lines(t, turnStart(t, 0, 1))))
		before := treeSnapshot(t, e.root)
		err := hd.Flush(bg)
		requireCode(t, err, wire.ErrAlreadyExists)
		require.EqualError(t, err, `refusing to materialize "p": a log already exists on disk (open it instead)`)
		require.ErrorIs(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}), wire.ErrAlreadyExists)
		require.Equal(t, before, treeSnapshot(t, e.root))
		require.NoError(t, hd.Close(bg))

		// The same header: an earlier attempt of this handle wrote it.
		hd2 := create(t, e.store, header("q", "/w"))
		writeFile(t, e.logPath("/w", "q"), encodeLog(t, comp, headerLine(header("q", "/w")), lines(t, turnStart(t, 0, 1))))
		require.NoError(t, hd2.Flush(bg))
		require.NoError(t, hd2.Append(bg, []session.Event{turnEnd(t, 1, 1)}))
		require.NoError(t, hd2.Close(bg))
		require.Equal(t, []int64{0, 1}, seqs(readAll(t, e.store, "q")))
	})
}
