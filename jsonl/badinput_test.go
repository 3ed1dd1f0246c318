package jsonl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Bad input: every case gets a clear typed error and leaves the root exactly
// as it was (names, modes, sizes and contents).

// populated returns a store root holding a closed session "keep" (cwd /w,
// with a summary) and a pending session "pending" (whose handle is
// returned), so that "nothing modified" compares a non-trivial tree.
func populated(t *testing.T, comp jsonl.Compression, fsys jsonl.FS) (*env, *jsonl.Handle) {
	t.Helper()
	e := newEnv(t, comp, fsys)
	persist(t, e.store, header("keep", "/w"), completedTurn(t, 0, 1)...)
	require.NoError(t, e.store.UpdateSummary(bg, "keep", jsonl.SummaryUpdate{Title: strp("kept")}))
	return e, create(t, e.store, header("pending", ""))
}

// unchanged runs fn and asserts that the tree under root did not change.
func unchanged(t *testing.T, root string, fn func()) {
	t.Helper()
	before := treeSnapshot(t, root)
	fn()
	require.Equal(t, before, treeSnapshot(t, root))
}

func TestBadInput_PathTraversalIDsStayUnderRoot(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		base := filepath.Dir(e.root)
		// Valid logs planted where a naive path join of the ids would land.
		decoys := map[string]string{
			"../../etc/pwn": filepath.Join(base, "etc", "pwn", generationName(comp)),
			"..":            filepath.Join(e.root, generationName(comp)),
			"/etc/passwd":   filepath.Join(e.root, "_no-cwd", "etc", "passwd", generationName(comp)),
		}
		for id, path := range decoys {
			writeFile(t, path, encodeLog(t, comp, headerLine(header(id, "")), lines(t, turnStart(t, 0, 1))))
		}
		for id, decoy := range decoys {
			t.Run(id, func(t *testing.T) {
				unchanged(t, base, func() {
					_, err := e.store.Open(bg, id, jsonl.AccessRead, jsonl.OpenOptions{})
					requireCode(t, err, wire.ErrNotFound)
					require.EqualError(t, err, fmt.Sprintf("session %q not found", id))
					_, err = e.store.Open(bg, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
					requireCode(t, err, wire.ErrNotFound)
					snap, err := e.store.Stat(bg, id)
					require.NoError(t, err)
					require.Nil(t, snap)
					has, err := e.store.Has(bg, id)
					require.NoError(t, err)
					require.False(t, has)
					require.NoError(t, e.store.Delete(bg, id))
				})
				require.FileExists(t, decoy)

				// Creating the id writes only inside its encoded directory.
				persist(t, e.store, header(id, ""), turnStart(t, 0, 7))
				seg, err := jsonl.EncodeSegment(id)
				require.NoError(t, err)
				require.FileExists(t, filepath.Join(e.root, "_no-cwd", seg, generationName(comp)))
				require.Equal(t, `{"turn":7}`, string(readAll(t, e.store, id)[0].Data))
			})
		}
		for _, rel := range filesUnder(t, base) {
			if rel == filepath.Join("etc", "pwn", generationName(comp)) {
				continue // the decoy itself
			}
			require.True(t, strings.HasPrefix(rel, "root"+string(filepath.Separator)), "file outside the root: %s", rel)
		}
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_InvalidUTF8Refused(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		bad := "bad\xff\xfeid"
		requireInvalid := func(t *testing.T, err error) {
			t.Helper()
			requireCode(t, err, wire.ErrInvalidArgument)
			require.ErrorIs(t, err, wire.ErrInvalidUTF8ID)
		}
		unchanged(t, e.root, func() {
			_, err := e.store.Create(bg, header(bad, ""), jsonl.CreateOptions{HandleID: newHandleID()})
			requireInvalid(t, err)
			for _, access := range []jsonl.Access{jsonl.AccessRead, jsonl.AccessWrite} {
				_, err = e.store.Open(bg, bad, access, jsonl.OpenOptions{HandleID: newHandleID()})
				requireInvalid(t, err)
			}
			_, err = e.store.Stat(bg, bad)
			requireInvalid(t, err)
			_, err = e.store.Has(bg, bad)
			requireInvalid(t, err)
			requireInvalid(t, e.store.Delete(bg, bad))
			_, err = e.store.LeaseOf(bg, bad)
			requireInvalid(t, err)
			_, err = e.store.ForceUnlock(bg, bad)
			requireInvalid(t, err)
			_, _, err = e.store.ReadSummary(bg, bad)
			requireInvalid(t, err)
			requireInvalid(t, e.store.UpdateSummary(bg, bad, jsonl.SummaryUpdate{Title: strp("x")}))
			requireInvalid(t, e.store.CloseHandle(bg, jsonl.HandleRef{SessionID: bad, HandleID: "h", Access: jsonl.AccessWrite}))
			att := e.store.Attach(jsonl.HandleRef{SessionID: bad, HandleID: "h", Access: jsonl.AccessWrite})
			_, err = att.Read(bg, 0, -1)
			requireInvalid(t, err)
			requireInvalid(t, att.Append(bg, []session.Event{turnStart(t, 0, 1)}))
			_, err = jsonl.EncodeSegment(bad)
			require.ErrorIs(t, err, wire.ErrInvalidUTF8ID)

			// Other header strings and the handle id must be valid UTF-8 too.
			for _, h := range []wire.Header{
				{Version: 3, ID: "u1", CreatedAt: 1, Cwd: "/w\xff"},
				{Version: 3, ID: "u2", CreatedAt: 1, ParentSession: "p\xff"},
				{Version: 3, ID: "u3", CreatedAt: 1, AgentPreset: "a\xff"},
			} {
				_, err = e.store.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
				requireCode(t, err, wire.ErrInvalidArgument)
				require.ErrorContains(t, err, "valid UTF-8")
			}
			_, err = e.store.Create(bg, header("u4", ""), jsonl.CreateOptions{HandleID: "h\xff"})
			requireCode(t, err, wire.ErrInvalidArgument)
			_, err = e.store.Open(bg, "keep", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "h\xff"})
			requireCode(t, err, wire.ErrInvalidArgument)
		})
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_InvalidHeaderAndOptions(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		unchanged(t, e.root, func() {
			for h, want := range map[wire.Header]string{
				{Version: 3, ID: "h1", CreatedAt: 1, Cwd: "relative/path"}:             `session header cwd must be an absolute path, got "relative/path"`,
				{Version: 3, ID: "h2", CreatedAt: -1}:                                  "session metadata createdAt must be a non-negative safe integer",
				{Version: 3, ID: "h3", CreatedAt: wire.MaxSafeInteger + 1}:             "session metadata createdAt must be a non-negative safe integer",
				{Version: 3, ID: "h4", CreatedAt: 1, Origin: "robot"}:                  `session header origin must be "subagent", got "robot"`,
				{Version: 3, ID: "h5", CreatedAt: 1, DelegationDepth: -1}:              "session header delegationDepth must be a non-negative safe integer",
				{Version: 3, ID: "h6", CreatedAt: 1, IsSeeded: true}:                   "seeded session header requires an inherited event count",
				{Version: 4, ID: "h7", CreatedAt: 1}:                                   "session header version must be 3",
				{Version: 3, ID: "", CreatedAt: 1}:                                     "cannot encode an empty path segment",
				{Version: 3, ID: "h8", CreatedAt: 1, Cwd: "/w", ParentSession: "\xff"}: "session header parentSession must be valid UTF-8",
			} {
				_, err := e.store.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
				requireCode(t, err, wire.ErrInvalidArgument)
				require.EqualError(t, err, want)
			}
			for _, handle := range []string{"", strings.Repeat("h", 513)} {
				_, err := e.store.Create(bg, header("h9", ""), jsonl.CreateOptions{HandleID: handle})
				requireCode(t, err, wire.ErrInvalidArgument)
				require.ErrorContains(t, err, "handle id")
				_, err = e.store.Open(bg, "keep", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: handle})
				requireCode(t, err, wire.ErrInvalidArgument)
			}
			_, err := e.store.Open(bg, "keep", jsonl.Access("admin"), jsonl.OpenOptions{HandleID: newHandleID()})
			requireCode(t, err, wire.ErrInvalidArgument)
			require.EqualError(t, err, `access must be "read" or "write", got "admin"`)
		})
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_NonLosslessDataRefused(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		w := openWrite(t, e.store, "keep")
		rd, err := e.store.Open(bg, "keep", jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		unchanged(t, e.root, func() {
			for _, data := range []string{`not json`, `{"x":-0}`, `{"x":1e400}`, `{"x":-0.0e5}`, `{"x":[1,}`, `{"x":"\ud800"}x`, ``} {
				for _, hd := range []*jsonl.Handle{w, pending, rd} {
					bad := session.Event{Type: wire.TypeTurnStart, Seq: hd.NextSeq(), Time: 1, Data: json.RawMessage(data)}
					err := hd.Append(bg, []session.Event{bad})
					requireCode(t, err, wire.ErrInvalidArgument)
					if data == `` {
						require.ErrorIs(t, err, session.ErrInvalidEvent)
						require.ErrorContains(t, err, "event data is missing")
						continue
					}
					// Validation comes first, even on a read handle.
					require.ErrorIs(t, err, session.ErrBatchNotLossless, "%q", data)
					require.EqualError(t, err, notLosslessText)
				}
			}
		})
		require.Equal(t, int64(6), w.NextSeq())
		require.NoError(t, w.Close(bg))
		require.NoError(t, rd.Close(bg))
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_InvalidEnvelopeRefused(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		tr := toolResult(t, 1, 1, 1, "c", 0)
		am := assistantMessage(t, 0, 1, 1, "x")
		cases := map[string]session.Event{
			"negative seq":                  {Type: wire.TypeTurnStart, Seq: -1, Time: 1, Data: json.RawMessage(`{"turn":1}`)},
			"empty type":                    {Type: "", Seq: 0, Time: 1, Data: json.RawMessage(`{}`)},
			"data not an object":            {Type: wire.TypeTurnStart, Seq: 0, Time: 1, Data: json.RawMessage(`"x"`)},
			"surfaceOp on a log-only type":  {Type: wire.TypeTurnStart, Seq: 0, Time: 1, Data: json.RawMessage(`{"turn":1}`), SurfaceOp: session.AppendOp()},
			"ignorable surface type":        func() session.Event { x := am.Clone(); x.Ignorable = true; return x }(),
			"sourceEventSeqs citing itself": func() session.Event { x := am.Clone(); x.SourceEventSeqs = []int64{0}; return x }(),
			"empty sourceEventSeqs":         func() session.Event { x := tr.Clone(); x.SourceEventSeqs = []int64{}; return x }(),
			"replace range not before the event": func() session.Event {
				x := tr.Clone()
				x.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: 0, EndSeq: 1}
				return x
			}(),
		}
		unchanged(t, e.root, func() {
			for name, bad := range cases {
				err := pending.Append(bg, []session.Event{bad})
				requireCode(t, err, wire.ErrInvalidArgument)
				require.ErrorIs(t, err, session.ErrInvalidEvent, name)
				require.NotErrorIs(t, err, session.ErrBatchNotLossless, name)
			}
		})
		require.False(t, pending.Materialized())
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_UnknownEventTypes(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("vocab", "/w")
		unknown := `{"type":"future/thing","seq":1,"time":1001,"data":{"x":1}}`
		path := e.writeLog(h, []string{line(t, turnStart(t, 0, 1)), unknown, line(t, turnEnd(t, 2, 1))})
		want := fmt.Sprintf(`session "vocab" contains event type "future/thing" (seq 1) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness (raw log: %s)`, path)
		unchanged(t, e.root, func() {
			readErr, writeErr := openBoth(t, e, h.ID)
			for _, err := range []error{readErr, writeErr} {
				requireCode(t, err, wire.ErrFormatUnsupported)
				require.EqualError(t, err, want)
			}
		})

		// The same record marked ignorable loads, verbatim.
		h2 := header("vocab-ok", "/w")
		e.writeLog(h2, []string{line(t, turnStart(t, 0, 1)), strings.TrimSuffix(unknown, "}") + `,"ignorable":true}`, line(t, turnEnd(t, 2, 1))})
		got := readAll(t, e.newStore(nil), h2.ID)
		require.Equal(t, []string{wire.TypeTurnStart, "future/thing", wire.TypeTurnEnd}, types(got))
		require.True(t, got[1].Ignorable)
		require.Equal(t, `{"x":1}`, string(got[1].Data))

		// An append refuses what a read would refuse: an unknown type not
		// marked ignorable is an invalid argument, and nothing is stored.
		h3 := header("vocab-append", "/w")
		hd := create(t, e.store, h3)
		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}))
		unchanged(t, e.root, func() {
			err := hd.Append(bg, []session.Event{ev(t, "future/other", 1, `{}`)})
			requireCode(t, err, wire.ErrInvalidArgument)
			require.ErrorIs(t, err, session.ErrInvalidEvent)
			require.EqualError(t, err, `invalid session event at index 0 (seq 1, type "future/other"): event type "future/other" is unknown to this build and not marked ignorable; a reader would refuse the log as an unsupported format`)
		})
		// Marked ignorable, it is stored and reads back.
		other := ev(t, "future/other", 1, `{}`)
		other.Ignorable = true
		require.NoError(t, hd.Append(bg, []session.Event{other}))
		require.NoError(t, hd.Close(bg))
		got = readAll(t, e.newStore(nil), h3.ID)
		require.Equal(t, []string{wire.TypeTurnStart, "future/other"}, types(got))
	})
}

func TestBadInput_RootIsNotADirectory(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		base := t.TempDir()
		file := filepath.Join(base, "file")
		writeFile(t, file, []byte("x"))
		for _, root := range []string{file, filepath.Join(file, "sub")} {
			unchanged(t, base, func() {
				_, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: comp})
				require.ErrorIs(t, err, syscall.ENOTDIR, root)
			})
		}
		_, err := jsonl.NewStore(jsonl.Options{Root: filepath.Join(base, "absent", "deeper"), Compression: comp})
		require.NoError(t, err)
		noSuchFile(t, filepath.Join(base, "absent"))
		_, err = jsonl.NewStore(jsonl.Options{Root: base, Compression: "lz4"})
		require.EqualError(t, err, `unknown compression "lz4" (want "none" or "zstd")`)
	})
}

func TestBadInput_SessionDirectoryIsAFile(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		dir := sessionDir(t, e.root, "/w", "filedir")
		writeFile(t, dir, []byte("not a directory"))
		requireNotADir := func(t *testing.T, err error) {
			t.Helper()
			requireCode(t, err, wire.ErrLayout)
			require.ErrorIs(t, err, syscall.ENOTDIR)
			require.NotErrorIs(t, err, wire.ErrNotFound)
			require.EqualError(t, err, fmt.Sprintf("session directory %q is not a directory", dir))
		}
		unchanged(t, e.root, func() {
			for _, access := range []jsonl.Access{jsonl.AccessRead, jsonl.AccessWrite} {
				_, err := e.store.Open(bg, "filedir", access, jsonl.OpenOptions{HandleID: newHandleID()})
				requireNotADir(t, err)
			}
			_, err := e.store.Stat(bg, "filedir")
			requireNotADir(t, err)
			_, err = e.store.Has(bg, "filedir")
			requireNotADir(t, err)
			_, err = e.store.Create(bg, header("filedir", "/w"), jsonl.CreateOptions{HandleID: newHandleID()})
			requireNotADir(t, err)
			requireNotADir(t, e.store.Delete(bg, "filedir"))
		})

		// A symlinked session directory is not followed either.
		link := sessionDir(t, e.root, "/w", "linked")
		require.NoError(t, os.Symlink(sessionDir(t, e.root, "/w", "keep"), link))
		unchanged(t, e.root, func() {
			_, err := e.store.Open(bg, "linked", jsonl.AccessRead, jsonl.OpenOptions{})
			requireCode(t, err, wire.ErrLayout)
		})
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_SymlinkedLogRefused(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		h := header("linked", "/w")
		outside := filepath.Join(filepath.Dir(e.root), "outside.log")
		writeFile(t, outside, encodeLog(t, comp, headerLine(h), lines(t, turnStart(t, 0, 1))))
		path := e.logPath(h.Cwd, h.ID)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
		require.NoError(t, os.Symlink(outside, path))
		want := fmt.Sprintf("session artifact %q is a symbolic link; refusing to follow it", path)
		unchanged(t, filepath.Dir(e.root), func() {
			readErr, writeErr := openBoth(t, e, h.ID)
			for _, err := range []error{readErr, writeErr} {
				requireCode(t, err, wire.ErrLayout)
				require.EqualError(t, err, want)
			}
			_, err := e.store.Stat(bg, h.ID)
			requireCode(t, err, wire.ErrLayout)
		})
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_OtherEncodingInRoot(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		other := jsonl.CompressionZstd
		if comp == jsonl.CompressionZstd {
			other = jsonl.CompressionNone
		}
		e, pending := populated(t, comp, nil)
		require.NoError(t, pending.Close(bg))
		h := header("foreign", "/w")
		path := filepath.Join(sessionDir(t, e.root, h.Cwd, h.ID), generationName(other))
		writeFile(t, path, encodeLog(t, other, headerLine(h), lines(t, turnStart(t, 0, 1))))
		suffix := ".jsonl"
		if other == jsonl.CompressionZstd {
			suffix = ".jsonl.zstd"
		}
		want := fmt.Sprintf(`session artifact %q uses %s, but this backend is configured for compression %q; use a separate root or select the matching compression mode`, path, suffix, string(comp))
		unchanged(t, e.root, func() {
			// A marked root is checked against its marker, not scanned: the
			// foreign artifact concerns its session, and List, which scans.
			fresh := e.newStore(nil)
			h, err := fresh.Open(bg, "keep", jsonl.AccessRead, jsonl.OpenOptions{})
			require.NoError(t, err)
			require.NoError(t, h.Close(bg))
			_, err = fresh.Open(bg, "foreign", jsonl.AccessRead, jsonl.OpenOptions{})
			requireCode(t, err, wire.ErrLayout)
			require.EqualError(t, err, want)
			_, err = fresh.List(bg)
			require.EqualError(t, err, want)
			// A store whose root check already passed meets it at lookup.
			_, err = e.store.Open(bg, "foreign", jsonl.AccessRead, jsonl.OpenOptions{})
			requireCode(t, err, wire.ErrLayout)
			require.EqualError(t, err, want)
		})
		// A root of an earlier version (no marker) is scanned by the first
		// operation, which refuses every first operation, whatever session
		// it is about, and leaves the root unmarked.
		require.NoError(t, os.Remove(filepath.Join(e.root, ".sessionflow-root")))
		unchanged(t, e.root, func() {
			fresh := e.newStore(nil)
			_, err := fresh.Open(bg, "keep", jsonl.AccessRead, jsonl.OpenOptions{})
			requireCode(t, err, wire.ErrLayout)
			require.EqualError(t, err, want)
			_, err = fresh.Create(bg, header("new", "/w"), jsonl.CreateOptions{HandleID: newHandleID()})
			require.EqualError(t, err, want)
		})
		require.NoFileExists(t, filepath.Join(e.root, ".sessionflow-root"))
	})
}

func TestBadInput_FlatLegacyFileRefused(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		for _, rel := range []string{filepath.Join("_no-cwd", "legacy.jsonl"), filepath.Join("--w--", "legacy.jsonl.zstd")} {
			e, pending := populated(t, comp, nil)
			require.NoError(t, pending.Close(bg))
			path := filepath.Join(e.root, rel)
			writeFile(t, path, []byte(headerLine(header("legacy", ""))+"\n"))
			want := fmt.Sprintf(`session artifact %q uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading`, path)
			unchanged(t, e.root, func() {
				// A marked root: the lookup finds no session directory; List
				// scans and refuses the flat file.
				fresh := e.newStore(nil)
				_, err := fresh.Open(bg, "legacy", jsonl.AccessRead, jsonl.OpenOptions{})
				requireCode(t, err, wire.ErrNotFound)
				_, err = fresh.List(bg)
				require.EqualError(t, err, want)
			})
			// An unmarked root: the first operation scans and refuses it.
			require.NoError(t, os.Remove(filepath.Join(e.root, ".sessionflow-root")))
			unchanged(t, e.root, func() {
				fresh := e.newStore(nil)
				_, err := fresh.Open(bg, "legacy", jsonl.AccessRead, jsonl.OpenOptions{})
				requireCode(t, err, wire.ErrLayout)
				require.EqualError(t, err, want)
			})
		}
	})
}

func TestBadInput_ForeignVersionsRefused(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		for _, tc := range []struct {
			version int
			text    string
		}{
			{2, `session "ver" uses log format v2, older than the supported v3, and this build ships no upgrade path for it`},
			{4, `session "ver" uses log format v4, but this harness reads only v3: the log was written by a newer harness — upgrade the harness to open it`},
		} {
			t.Run(fmt.Sprint(tc.version), func(t *testing.T) {
				e := newEnv(t, comp, nil)
				h := header("ver", "/w")
				h.Version = tc.version
				path := e.writeLog(h, lines(t, completedTurn(t, 0, 1)...))
				want := tc.text + " (raw log: " + path + ")"
				unchanged(t, e.root, func() {
					readErr, writeErr := openBoth(t, e, h.ID)
					for _, err := range []error{readErr, writeErr} {
						requireCode(t, err, wire.ErrFormatUnsupported)
						require.EqualError(t, err, want)
						var se *wire.StoreError
						require.ErrorAs(t, err, &se)
						require.Equal(t, path, se.Path)
					}
					_, err := e.newStore(nil).Stat(bg, h.ID)
					require.EqualError(t, err, want)
				})
			})
		}
		t.Run("checked before the shape, non-string id", func(t *testing.T) {
			e := newEnv(t, comp, nil)
			path := e.logPath("", "x")
			writeFile(t, path, encodeLog(t, comp, `{"type":"session","version":4,"id":123,"bogus":true}`))
			_, err := e.store.Open(bg, "x", jsonl.AccessRead, jsonl.OpenOptions{})
			requireCode(t, err, wire.ErrFormatUnsupported)
			require.EqualError(t, err, `session "123" uses log format v4, but this harness reads only v3: the log was written by a newer harness — upgrade the harness to open it (raw log: `+path+`)`)
		})
	})
}

func TestBadInput_RetiredPolicyFieldsRefused(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		for _, field := range []string{"sandboxMode", "approvalPolicy"} {
			e := newEnv(t, comp, nil)
			hl := strings.TrimSuffix(headerLine(header("retired", "")), "}") + `,"` + field + `":"x"}`
			path := e.logPath("", "retired")
			writeFile(t, path, encodeLog(t, comp, hl, lines(t, turnStart(t, 0, 1))))
			unchanged(t, e.root, func() {
				readErr, writeErr := openBoth(t, e, "retired")
				for _, err := range []error{readErr, writeErr} {
					requireCode(t, err, wire.ErrCorrupt)
					require.EqualError(t, err, `session "retired": stored log is corrupt: session header uses retired policy baseline fields (raw log: `+path+`)`)
				}
				_, err := e.store.Stat(bg, "retired")
				require.ErrorContains(t, err, "session header uses retired policy baseline fields")
			})
		}
	})
}

func TestBadInput_HeaderIdentityMismatch(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		require.NoError(t, pending.Close(bg))
		src := e.logPath("/w", "keep")

		// A log copied into another session's directory.
		copied := e.logPath("/w", "copy")
		writeFile(t, copied, readFile(t, src))
		// A log moved to another project directory under the same id.
		moved := e.logPath("/other", "keep2")
		h := header("keep2", "/w")
		writeFile(t, moved, encodeLog(t, comp, headerLine(h), lines(t, turnStart(t, 0, 1))))
		unchanged(t, e.root, func() {
			readErr, writeErr := openBoth(t, e, "copy")
			for _, err := range []error{readErr, writeErr} {
				requireCode(t, err, wire.ErrCorrupt)
				require.EqualError(t, err, fmt.Sprintf(`corrupt session log %q: requested id "copy" does not match header id "keep"`, copied))
			}
			readErr, writeErr = openBoth(t, e, "keep2")
			for _, err := range []error{readErr, writeErr} {
				requireCode(t, err, wire.ErrCorrupt)
				require.EqualError(t, err, fmt.Sprintf(`corrupt session log %q: header id "keep2" and cwd identify %q`, moved, e.logPath("/w", "keep2")))
			}
			snap, err := e.store.Stat(bg, "copy")
			require.NoError(t, err)
			require.Nil(t, snap, "a header naming another id does not describe this session")
		})
	})
}

func TestBadInput_InheritedMarkerMismatch(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		seeded := header("seeded", "")
		seeded.IsSeeded = true
		seededPath := e.writeLog(seeded, lines(t, turnStart(t, 0, 1), turnEnd(t, 1, 1)))
		unseeded := header("unseeded", "")
		unseededPath := e.writeLog(unseeded, lines(t, turnStart(t, 0, 1), ev(t, wire.TypeEndSeed, 1, `{"inherited":true}`)))
		unchanged(t, e.root, func() {
			for id, want := range map[string]string{
				"seeded":   `stored session "seeded" failed validation: seeded Session lacks an inherited end-seed marker`,
				"unseeded": `stored session "unseeded" failed validation: unseeded Session contains an inherited end-seed marker`,
			} {
				readErr, writeErr := openBoth(t, e, id)
				for _, err := range []error{readErr, writeErr} {
					requireCode(t, err, wire.ErrCorrupt)
					require.EqualError(t, err, want)
				}
			}
		})
		require.FileExists(t, seededPath)
		require.FileExists(t, unseededPath)
	})
}

// rawOr returns raw for a raw root and zstd for a zstd root.
func rawOr(comp jsonl.Compression, zstd, raw string) string {
	if comp == jsonl.CompressionNone {
		return raw
	}
	return zstd
}

// damaged is the detail of a raw log refused because the damage described by
// issue, at byte off, is followed by the valid record at line (byte valid).
func damaged(issue string, off, line, valid int) string {
	return fmt.Sprintf("%s; the damage at byte %d is followed by a complete valid record at line %d (byte %d), so it is not a torn write", issue, off, line, valid)
}

func TestBadInput_CorruptLinesBeforeTurnEnd(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ts := line(t, turnStart(t, 0, 1))
		hl := len(headerLine(header("corrupt", "/w"))) + 1 // with its newline
		for name, tc := range map[string]struct {
			lines  []string
			detail string
		}{
			"unparsable": {[]string{ts, `{"type":"step/start","seq":1,`, line(t, turnEnd(t, 2, 1))},
				"corrupt session log: unparsable committed event at line 2"},
			// A raw log names the damage and the valid record after it by
			// their byte offsets; zstd refuses the first bad record.
			"unparsable then valid": {[]string{ts, `{not json`, line(t, stepStart(t, 1, 1, 1)), line(t, turnEnd(t, 2, 1))},
				rawOr(comp, "corrupt session log: unparsable committed event at line 2",
					damaged("corrupt session log: unparsable committed event at line 2", hl+len(ts)+1, 3, hl+len(ts)+1+len(`{not json`)+1))},
			"unparsable then valid, no turn end": {[]string{ts, `{not json`, line(t, stepStart(t, 1, 1, 1))},
				rawOr(comp, "corrupt session log: unparsable committed event at line 2",
					damaged("corrupt session log: unparsable committed event at line 2", hl+len(ts)+1, 3, hl+len(ts)+1+len(`{not json`)+1))},
			"seq gap": {[]string{ts, line(t, stepStart(t, 2, 1, 1)), line(t, turnEnd(t, 3, 1))},
				"corrupt session log: invalid committed event at line 2: seq gap (expected 1, got 2)"},
			"duplicate seq": {[]string{ts, line(t, stepStart(t, 0, 1, 1)), line(t, turnEnd(t, 1, 1))},
				"corrupt session log: invalid committed event at line 2: seq gap (expected 1, got 0)"},
			"gap on the turn/end itself": {[]string{ts, line(t, turnEnd(t, 5, 1))},
				"corrupt session log: invalid committed event at line 2: seq gap (expected 1, got 5)"},
		} {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, comp, nil)
				path := e.writeLog(header("corrupt", "/w"), tc.lines)
				requireCorrupt(t, e, "corrupt", path, tc.detail)
			})
		}
		for name, bad := range map[string]string{
			"null":                        `null`,
			"data missing":                `{"type":"step/start","seq":1,"time":1}`,
			"malformed assistant/message": `{"type":"assistant/message","seq":1,"time":1,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[]},"stream":[]},"sourceEventSeqs":[5]}`,
			"unknown envelope key":        `{"type":"step/start","seq":1,"time":1,"data":{},"extra":1}`,
			"negative zero seq":           `{"type":"step/start","seq":-0,"time":1,"data":{}}`,
			"ignorable false":             `{"type":"step/start","seq":1,"time":1,"data":{},"ignorable":false}`,
		} {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, comp, nil)
				path := e.writeLog(header("corrupt", "/w"), []string{ts, bad, line(t, turnEnd(t, 2, 1))})
				readErr, writeErr := openBoth(t, e, "corrupt")
				for _, err := range []error{readErr, writeErr} {
					requireCode(t, err, wire.ErrCorrupt)
					require.ErrorContains(t, err, `session "corrupt": stored log is corrupt: corrupt session log: invalid committed event at line 2: `)
					require.True(t, strings.HasSuffix(err.Error(), " (raw log: "+path+")"), err.Error())
				}
			})
		}
	})
}

func TestBadInput_PermissionErrorsSurface(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ffs := faultfs.New(nil)
		e, pending := populated(t, comp, ffs)
		dir := sessionDir(t, e.root, "/w", "keep")
		requirePerm := func(t *testing.T, err error) {
			t.Helper()
			require.ErrorIs(t, err, fs.ErrPermission)
			require.ErrorIs(t, err, syscall.EACCES)
			require.NotErrorIs(t, err, wire.ErrNotFound)
		}
		// The session directory cannot be listed (a chmod 000 directory).
		t.Run("session directory", func(t *testing.T) {
			ffs.Reset()
			ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpReadDir, PathContains: dir, Err: syscall.EACCES})
			unchanged(t, e.root, func() {
				for _, access := range []jsonl.Access{jsonl.AccessRead, jsonl.AccessWrite} {
					_, err := e.store.Open(bg, "keep", access, jsonl.OpenOptions{HandleID: newHandleID()})
					requirePerm(t, err)
				}
				_, err := e.store.Stat(bg, "keep")
				requirePerm(t, err)
				_, err = e.store.Has(bg, "keep")
				requirePerm(t, err)
				// List reports the unreadable session in its row and goes on.
				list, err := e.store.List(bg)
				require.NoError(t, err)
				var problem *jsonl.Problem
				for _, row := range list {
					if row.Header.ID == "keep" {
						require.NotNil(t, row.Problem)
						problem = row.Problem
					} else {
						require.Nil(t, row.Problem, "row %q", row.Header.ID)
					}
				}
				require.NotNil(t, problem, "the unreadable session is listed")
				requirePerm(t, problem)
				require.Equal(t, dir, list[slices.IndexFunc(list, func(r jsonl.Snapshot) bool { return r.Problem != nil })].Path)
				requirePerm(t, e.store.Delete(bg, "keep"))
			})
		})
		// The log file cannot be opened.
		t.Run("log file", func(t *testing.T) {
			ffs.Reset()
			ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpOpen, PathContains: generationName(comp), Err: syscall.EACCES})
			unchanged(t, e.root, func() {
				for _, access := range []jsonl.Access{jsonl.AccessRead, jsonl.AccessWrite} {
					_, err := e.store.Open(bg, "keep", access, jsonl.OpenOptions{HandleID: newHandleID()})
					requirePerm(t, err)
				}
				_, err := e.store.Stat(bg, "keep")
				requirePerm(t, err)
			})
			// The failed write open released its lease: once readable, a
			// write open succeeds.
			ffs.Reset()
			w := openWrite(t, e.store, "keep")
			require.NoError(t, w.Close(bg))
		})
		// The root cannot be listed.
		t.Run("root", func(t *testing.T) {
			ffs.Reset()
			ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpReadDir, PathContains: e.root, Err: syscall.EACCES})
			unchanged(t, e.root, func() {
				_, err := e.newStore(ffs).List(bg)
				requirePerm(t, err)
				_, err = e.store.Open(bg, "keep", jsonl.AccessRead, jsonl.OpenOptions{})
				requirePerm(t, err)
			})
		})
		ffs.Reset()
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_ReadRangeValidation(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		rd, err := e.store.Open(bg, "keep", jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		w := openWrite(t, e.store, "keep")
		unchanged(t, e.root, func() {
			for _, hd := range []*jsonl.Handle{rd, w} {
				for offset, want := range map[int64]string{
					-1:                      "read offset must be a non-negative safe integer, got -1",
					wire.MaxSafeInteger + 1: "read offset must be a non-negative safe integer, got 9007199254740992",
				} {
					_, err := hd.Read(bg, offset, -1)
					requireCode(t, err, wire.ErrInvalidArgument)
					require.EqualError(t, err, want)
				}
				_, err := hd.Read(bg, 0, wire.MaxSafeInteger+1)
				requireCode(t, err, wire.ErrInvalidArgument)
				require.EqualError(t, err, "read length must be a non-negative safe integer, got 9007199254740992")

				for _, r := range []struct{ offset, length, want int64 }{
					{0, -1, 6}, {2, 3, 3}, {4, 100, 2}, {6, -1, 0}, {1000, 5, 0}, {0, 0, 0},
				} {
					got, err := hd.Read(bg, r.offset, r.length)
					require.NoError(t, err)
					require.NotNil(t, got)
					require.Len(t, got, int(r.want), "Read(%d, %d)", r.offset, r.length)
					if r.want > 0 {
						require.Equal(t, r.offset, got[0].Seq)
					}
				}
			}
			got, err := pending.Read(bg, 0, -1)
			require.NoError(t, err)
			require.Empty(t, got)
		})
		require.NoError(t, rd.Close(bg))
		require.NoError(t, w.Close(bg))
		// A closed handle reports that before looking at its arguments.
		_, err = rd.Read(bg, -1, -1)
		requireCode(t, err, wire.ErrHandleClosed)
		require.EqualError(t, err, `session "keep": read on a closed handle`)
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_ReadHandleCannotWrite(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		rd, err := e.store.Open(bg, "keep", jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		unchanged(t, e.root, func() {
			err := rd.Append(bg, []session.Event{turnStart(t, 6, 2)})
			requireCode(t, err, wire.ErrReadOnly)
			require.EqualError(t, err, `session "keep": append is not available on a read handle`)
			err = rd.Append(bg, nil)
			requireCode(t, err, wire.ErrReadOnly)
			err = rd.Flush(bg)
			requireCode(t, err, wire.ErrReadOnly)
			require.EqualError(t, err, `session "keep": flush is not available on a read handle`)
		})
		require.NoError(t, rd.Close(bg))
		require.NoError(t, pending.Close(bg))
	})
}

func TestBadInput_DoneContextReturnsItsCause(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		cause := errors.New("caller gave up")
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		unchanged(t, e.root, func() {
			_, err := e.store.Create(ctx, header("new", ""), jsonl.CreateOptions{HandleID: newHandleID()})
			require.Same(t, cause, err)
			_, err = e.store.Open(ctx, "keep", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
			require.Same(t, cause, err)
			_, err = e.store.Stat(ctx, "keep")
			require.Same(t, cause, err)
			_, err = e.store.List(ctx)
			require.Same(t, cause, err)
			require.Same(t, cause, pending.Append(ctx, []session.Event{turnStart(t, 0, 1)}))
			require.Same(t, cause, pending.Flush(ctx))
			_, err = pending.Read(ctx, 0, -1)
			require.Same(t, cause, err)
		})
		// Close is not cancellable.
		require.NoError(t, pending.Close(ctx))
		noSuchFile(t, sessionDir(t, e.root, "", "pending"))
	})
}

func TestBadInput_LogShrankBelowObservedPrefix(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		rd, err := e.store.Open(bg, "keep", jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		require.Len(t, readHandle(t, rd), 6)

		// Someone rewrites the log behind the store's back with fewer events.
		path := e.logPath("/w", "keep")
		writeFile(t, path, encodeLog(t, comp, headerLine(header("keep", "/w")), lines(t, completedTurn(t, 0, 1)[:3]...)))
		unchanged(t, e.root, func() {
			_, err := rd.Read(bg, 0, -1)
			requireCode(t, err, wire.ErrCorrupt)
			require.EqualError(t, err, `session "keep": stored log shrank below a previously observed prefix (3 < 6)`)
		})
		require.NoError(t, rd.Close(bg))
		require.NoError(t, pending.Close(bg))
	})
}
