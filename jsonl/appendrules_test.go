package jsonl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// What Append accepts, every later operation accepts: each batch below was
// once stored and left the session unreadable, unrepairable or
// unresumable. It is refused as InvalidArgument naming the event and the
// rule, nothing is written, and the session stays usable.
func TestAppendRefusesWhatReadRepairOrResumeRefuse(t *testing.T) {
	toolCallNoID := `{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","name":"read_file","arguments":{}}]},"stream":[]}`
	custom := ev(t, "custom/x", 1, `{}`)
	for name, tc := range map[string]struct {
		seeded bool
		batch  func(t *testing.T) []session.Event
		want   string
	}{
		"inherited end-seed in an unseeded session": {
			batch: func(t *testing.T) []session.Event {
				return []session.Event{ev(t, wire.TypeEndSeed, 0, `{"inherited":true}`)}
			},
			want: `invalid session event at index 0 (seq 0, type "session/end-seed"): unseeded Session contains an inherited end-seed marker`,
		},
		"end-seed inherited not a boolean": {
			batch: func(t *testing.T) []session.Event {
				return []session.Event{ev(t, wire.TypeEndSeed, 0, `{"inherited":"yes"}`)}
			},
			want: `invalid session event at index 0 (seq 0, type "session/end-seed"): session/end-seed event (seq 0): malformed data: json: cannot unmarshal string into Go struct field EndSeed.inherited of type bool`,
		},
		"turn/start without turn": {
			batch: func(t *testing.T) []session.Event { return []session.Event{ev(t, wire.TypeTurnStart, 0, `{}`)} },
			want:  `invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data lacks "turn"`,
		},
		"turn/start turn as a string": {
			batch: func(t *testing.T) []session.Event {
				return []session.Event{ev(t, wire.TypeTurnStart, 0, `{"turn":"1"}`)}
			},
			want: `invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): malformed data: must be a safe integer, got "1"`,
		},
		"turn/start turn 0": {
			batch: func(t *testing.T) []session.Event {
				return []session.Event{ev(t, wire.TypeTurnStart, 0, `{"turn":0}`)}
			},
			want: `invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data.turn must be a safe integer >= 1, got 0`,
		},
		"tool-call block without id": {
			batch: func(t *testing.T) []session.Event {
				return []session.Event{turnStart(t, 0, 1), stepStart(t, 1, 1, 1), surface(t, wire.TypeAssistantMessage, 2, toolCallNoID)}
			},
			want: `invalid session event at index 2 (seq 2, type "assistant/message"): crash repair could not read it: assistant/message event (seq 2): tool-call block 0 lacks "id"`,
		},
		"custom type not marked ignorable": {
			batch: func(t *testing.T) []session.Event { return []session.Event{turnStart(t, 0, 1), custom} },
			want:  `invalid session event at index 1 (seq 1, type "custom/x"): event type "custom/x" is unknown to this build and not marked ignorable; a reader would refuse the log as an unsupported format`,
		},
		"seeded session whose first batch lacks its marker": {
			seeded: true,
			batch:  func(t *testing.T) []session.Event { return completedTurn(t, 0, 1) },
			want:   `invalid session event at index 5 (seq 5, type "turn/end"): seeded Session lacks an inherited end-seed marker: the first events stored in a seeded session must include its {"inherited":true} session/end-seed`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
				e := newEnv(t, comp, nil)
				h := header("bad", "/w")
				count := int64(0)
				if tc.seeded {
					h.IsSeeded, h.ParentSession, count = true, "parent", 6
				}
				hd, err := e.store.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID(), InheritedEventCount: count})
				require.NoError(t, err)
				unchanged(t, e.root, func() {
					err := hd.Append(bg, tc.batch(t))
					requireCode(t, err, wire.ErrInvalidArgument)
					require.ErrorIs(t, err, session.ErrInvalidEvent)
					require.EqualError(t, err, tc.want)
				})
				// The session stays usable: a valid batch goes in and reads back,
				// and a write open (what repair and resume start with) succeeds.
				good := completedTurn(t, 0, 1)
				if tc.seeded {
					good = append(good, ev(t, wire.TypeEndSeed, 6, `{"inherited":true}`))
				}
				require.NoError(t, hd.Append(bg, good))
				require.NoError(t, hd.Close(bg))
				require.Equal(t, types(good), types(readAll(t, e.newStore(nil), "bad")))
				require.NoError(t, openWrite(t, e.newStore(nil), "bad").Close(bg))
			})
		})
	}
}

// midTailLog writes a raw log of one completed turn and an open one, whose
// record at index bad (in the open turn) is replaced by damaged; it returns
// the path, the file offset of the damaged line and of the line after it.
func midTailLog(t *testing.T, e *env, id string, damaged string) (path string, off, next int) {
	t.Helper()
	events := append(completedTurn(t, 0, 1), turnStart(t, 6, 2), stepStart(t, 7, 2, 1), assistantMessage(t, 8, 2, 1, "partial"))
	ls := lines(t, events...)
	ls[7] = damaged
	path = e.writeLog(header(id, "/w"), ls)
	off = len(headerLine(header(id, "/w"))) + 1
	for _, l := range ls[:7] {
		off += len(l) + 1
	}
	return path, off, off + len(damaged) + 1
}

// Damage after the last turn/end that is followed by complete valid records
// is not a torn write: reads, write opens and inspect refuse it naming the
// byte offsets, and nothing is cut.
func TestRawMidTailDamageIsCorruptNotTorn(t *testing.T) {
	for name, damaged := range map[string]string{
		"garbage line":         `garbage`,
		"extra envelope field": `{"type":"step/start","seq":7,"time":1007,"data":{"turn":2,"step":1},"extra":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, jsonl.CompressionNone, nil)
			path, off, next := midTailLog(t, e, "mid", damaged)
			issue := `corrupt session log: unparsable committed event at line 8`
			if name == "extra envelope field" {
				issue = `corrupt session log: invalid committed event at line 8: unexpected event field "extra"`
			}
			requireCorrupt(t, e, "mid", path, fmt.Sprintf(
				"%s; the damage at byte %d is followed by a complete valid record at line 9 (byte %d), so it is not a torn write", issue, off, next))
			unchanged(t, e.root, func() {
				_, err := e.store.Inspect(bg, "mid")
				requireCode(t, err, wire.ErrCorrupt)
				require.ErrorIs(t, err, jsonl.ErrDamageNotTorn)
			})
		})
	}
}

// A forced repair cuts at the first damage; what it removes, the valid
// records after the damage included, is saved first.
func TestForcedCutQuarantinesTheDamagedSuffix(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	path, off, _ := midTailLog(t, e, "mid", `garbage`)
	original := readFile(t, path)
	st := e.newStore(nil)
	hd, err := st.Open(bg, "mid", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID(), Cut: jsonl.CutOptions{Force: true}})
	require.NoError(t, err)
	require.Equal(t, upTo(7), seqs(readHandle(t, hd)), "the forced handle serves the records before the damage")
	require.Equal(t, original, readFile(t, path), "opening cuts nothing")
	cut, err := hd.CutTail(bg)
	require.NoError(t, err)
	q := path + ".broken-" + fmt.Sprint(off)
	require.Equal(t, &jsonl.TailCut{Offset: int64(off), Bytes: int64(len(original) - off), Quarantine: q, Forced: true}, cut)
	require.Equal(t, original[off:], readFile(t, q), "the quarantine holds exactly the removed bytes")
	require.Equal(t, original[:off], readFile(t, path))
	again, err := hd.CutTail(bg)
	require.NoError(t, err)
	require.Nil(t, again, "nothing left to cut")
	require.NoError(t, hd.Append(bg, []session.Event{stepEnd(t, 7, 2, 1)}))
	require.NoError(t, hd.Close(bg))
	require.Equal(t, upTo(8), seqs(readAll(t, e.newStore(nil), "mid")))

	// The quarantine file is no generation: listing ignores it, delete
	// removes it with the session.
	list, err := e.newStore(nil).List(bg)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, path, list[0].Path)
	require.NoError(t, e.newStore(nil).Delete(bg, "mid"))
	noSuchFile(t, q)
	noSuchFile(t, filepath.Dir(path))
}

// Force changes nothing for a healthy log, and a torn tail cut through a
// forced handle is not reported as forced.
func TestForceOnATornTailIsAnOrdinaryCut(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	path := e.writeLog(header("torn", "/w"), lines(t, completedTurn(t, 0, 1)...))
	size := fileSize(t, path)
	appendFile(t, path, []byte(`{"type":"turn/st`))
	hd, err := e.store.Open(bg, "torn", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID(), Cut: jsonl.CutOptions{Force: true}})
	require.NoError(t, err)
	cut, err := hd.CutTail(bg)
	require.NoError(t, err)
	require.Equal(t, &jsonl.TailCut{Offset: size, Bytes: int64(len(`{"type":"turn/st`)), Quarantine: fmt.Sprintf("%s.broken-%d", path, size)}, cut)
	require.NoError(t, hd.Close(bg))
}

// The ordinary torn-tail cut of a write handle's first append keeps its
// behaviour and now first saves the fragment beside the log.
func TestTornTailCutIsQuarantined(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		path := e.writeLog(header("torn", "/w"), lines(t, completedTurn(t, 0, 1)...))
		size := fileSize(t, path)
		fragment := tornTail(t, comp, `{"type":"turn/start","seq":6,"ti`, turnStart(t, 6, 2))
		appendFile(t, path, fragment)
		hd := openWrite(t, e.store, "torn")
		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 6, 2)}))
		require.NoError(t, hd.Close(bg))
		q := fmt.Sprintf("%s.broken-%d", path, size)
		require.Equal(t, fragment, readFile(t, q))
		require.Equal(t, upTo(7), seqs(readAll(t, e.newStore(nil), "torn")))
	})
}

// A quarantine that cannot be written stops the cut: the append fails and
// the log keeps every byte.
func TestFailedQuarantineCutsNothing(t *testing.T) {
	ffs := faultfs.New(nil)
	e := newEnv(t, jsonl.CompressionNone, ffs)
	path := e.writeLog(header("torn", "/w"), lines(t, completedTurn(t, 0, 1)...))
	appendFile(t, path, []byte(`{"type":"turn/st`))
	original := readFile(t, path)
	hd := openWrite(t, e.store, "torn")
	ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpLink, PathContains: ".broken-", Err: syscall.EIO})
	err := hd.Append(bg, []session.Event{turnStart(t, 6, 2)})
	require.ErrorIs(t, err, syscall.EIO)
	require.Equal(t, original, readFile(t, path))
	ffs.Reset()
	require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 6, 2)}))
	require.NoError(t, hd.Close(bg))
	require.Equal(t, upTo(7), seqs(readAll(t, e.newStore(nil), "torn")))
}

// A cut retried after its quarantine was published (a crash before the
// truncation) reuses the identical copy; other bytes under that name are
// never replaced.
func TestQuarantineNamesNeverReplace(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	path := e.writeLog(header("torn", "/w"), lines(t, completedTurn(t, 0, 1)...))
	size := fileSize(t, path)
	appendFile(t, path, []byte(`{"type":"turn/st`))
	q := fmt.Sprintf("%s.broken-%d", path, size)
	writeFile(t, q, []byte(`{"type":"turn/st`))
	hd := openWrite(t, e.store, "torn")
	cut, err := hd.CutTail(bg)
	require.NoError(t, err)
	require.Equal(t, q, cut.Quarantine, "an identical copy is reused")
	appendFile(t, path, []byte(`{"other`))
	require.NoError(t, hd.Close(bg))

	writeFile(t, q, []byte(`unrelated`))
	hd = openWrite(t, e.newStore(nil), "torn")
	cut, err = hd.CutTail(bg)
	require.NoError(t, err)
	require.Equal(t, q+".2", cut.Quarantine)
	require.Equal(t, []byte(`unrelated`), readFile(t, q))
	require.Equal(t, []byte(`{"other`), readFile(t, q+".2"))
	require.NoError(t, hd.Close(bg))

	// A symbolic link under a quarantine name is neither followed nor read.
	outside := filepath.Join(t.TempDir(), "outside")
	writeFile(t, outside, []byte(`{"third`))
	require.NoError(t, os.Remove(q))
	require.NoError(t, os.Symlink(outside, q))
	appendFile(t, path, []byte(`{"third`))
	hd = openWrite(t, e.newStore(nil), "torn")
	cut, err = hd.CutTail(bg)
	require.NoError(t, err)
	require.Equal(t, q+".3", cut.Quarantine)
	require.Equal(t, []byte(`{"third`), readFile(t, outside))
	require.NoError(t, hd.Close(bg))
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	for _, de := range entries {
		require.False(t, strings.HasSuffix(de.Name(), ".tmp"), "no temp file is left: %s", de.Name())
	}
}

// Damage before a turn/end keeps its reference text (FORMAT.md §4.3) and is, like
// any damage followed by a complete record, cut only by a forced repair.
func TestDamageBeforeTurnEndIsCutOnlyWhenForced(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	h := header("committed", "/w")
	path := e.writeLog(h, []string{line(t, turnStart(t, 0, 1)), `{not json`, line(t, turnEnd(t, 1, 1))})
	original := readFile(t, path)
	readErr, writeErr := openBoth(t, e, "committed")
	for _, err := range []error{readErr, writeErr} {
		requireCode(t, err, wire.ErrCorrupt)
		require.ErrorIs(t, err, jsonl.ErrDamageNotTorn)
		require.ErrorContains(t, err, "corrupt session log: unparsable committed event at line 2 (raw log: ")
	}
	hd, err := e.store.Open(bg, "committed", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID(), Cut: jsonl.CutOptions{Force: true}})
	require.NoError(t, err)
	require.Equal(t, upTo(1), seqs(readHandle(t, hd)))
	cut, err := hd.CutTail(bg)
	require.NoError(t, err)
	off := len(headerLine(h)) + 1 + len(line(t, turnStart(t, 0, 1))) + 1
	require.Equal(t, &jsonl.TailCut{Offset: int64(off), Bytes: int64(len(original) - off), Quarantine: fmt.Sprintf("%s.broken-%d", path, off), Forced: true}, cut)
	require.NoError(t, hd.Close(bg))
	require.Equal(t, original[off:], readFile(t, cut.Quarantine))
}
