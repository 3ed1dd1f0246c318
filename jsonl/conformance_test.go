package jsonl_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The tests of this file are the format v3 forms of the S1 cases (S1-nn)
// and the store-level S0 cases (S0-nn). docs/CONFORMANCE.md maps
// every case to its test.

const notLosslessText = "session event batch is not losslessly JSON-serializable because it contains non-JSON-serializable data"

// ---------------------------------------------------------------------------
// Shared contract (S1-01..S1-08)

func TestS1_01_CreateAppendRead(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-01", "/w")
		events := completedTurn(t, 0, 1)
		persist(t, e.store, h, events...)

		fresh := e.newStore(nil)
		hd, err := fresh.Open(bg, h.ID, jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		require.Equal(t, wire.Header{Version: 3, ID: "s1-01", CreatedAt: 5, Cwd: "/w"}, hd.Header())
		require.Equal(t, events, readHandle(t, hd))
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_02_CreatedNeverAppendedIsPendingOnly(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-02", "/w")
		hd := create(t, e.store, h)

		// No log on disk: Has is false; List shows the created session as
		// pending (C5), with the header it will publish.
		has, err := e.store.Has(bg, h.ID)
		require.NoError(t, err)
		require.False(t, has)
		require.Empty(t, logFilesUnder(t, e.root))
		list, err := e.newStore(nil).List(bg)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.True(t, list[0].Pending)
		require.Equal(t, int64(0), list[0].SizeBytes)
		require.Equal(t, h.ID, list[0].Header.ID)

		// The creator closes without materializing: the session never existed.
		require.NoError(t, hd.Close(bg))
		list, err = e.store.List(bg)
		require.NoError(t, err)
		require.Empty(t, list)
		snap, err := e.store.Stat(bg, h.ID)
		require.NoError(t, err)
		require.Nil(t, snap)
		noSuchFile(t, sessionDir(t, e.root, h.Cwd, h.ID))
	})
}

func TestS1_03_AppendMakesItVisible(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-03", "/w")
		hd := create(t, e.store, h)
		// A read handle opened on the pending session serves [] and then,
		// fresh, what was appended through the write handle.
		rd, err := e.newStore(nil).Open(bg, h.ID, jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		require.Empty(t, readHandle(t, rd))
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		require.True(t, hd.Materialized())
		require.Equal(t, completedTurn(t, 0, 1), readHandle(t, rd))
		require.NoError(t, rd.Close(bg))

		has, err := e.store.Has(bg, h.ID)
		require.NoError(t, err)
		require.True(t, has)
		list, err := e.newStore(nil).List(bg)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, h.ID, list[0].Header.ID)
		require.False(t, list[0].Pending)
		require.Equal(t, e.logPath(h.Cwd, h.ID), list[0].Path)
		require.Equal(t, fileSize(t, list[0].Path), list[0].SizeBytes)
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_04_ReappendOfStoredSeqsWithOtherContentRejected(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-04", "")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		err := hd.Append(bg, []session.Event{turnStart(t, 0, 7), turnEnd(t, 1, 7)})
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "s1-04": expected 6 at index 0, got 0`)
		var sm *session.SeqMismatchError
		require.ErrorAs(t, err, &sm)
		require.Equal(t, int64(6), sm.Expected)
		require.Equal(t, before, readFile(t, path))
		require.Equal(t, int64(6), hd.NextSeq())
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_05_MidBatchGapRejected(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-05", "")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		err := hd.Append(bg, []session.Event{turnStart(t, 6, 2), stepStart(t, 8, 2, 1)})
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "s1-05": expected 7 at index 1, got 8`)
		require.Equal(t, before, readFile(t, path))
		require.Equal(t, upTo(6), seqs(readAll(t, e.newStore(nil), h.ID)))

		// A gap before any write of a created session stores nothing either.
		h2 := header("s1-05-new", "")
		hd2 := create(t, e.store, h2)
		err = hd2.Append(bg, []session.Event{turnStart(t, 0, 1), turnEnd(t, 2, 1)})
		requireCode(t, err, wire.ErrSeqMismatch)
		require.False(t, hd2.Materialized())
		noSuchFile(t, e.logPath(h2.Cwd, h2.ID))
		require.NoError(t, hd.Close(bg))
		require.NoError(t, hd2.Close(bg))
	})
}

// losslessViolations are event data texts that break the lossless-JSON rule
// of FORMAT.md §1.4, with the JavaScript value each stands for.
var losslessViolations = []struct{ name, data string }{
	{"Infinity", `{"extra":1e400}`},
	{"-Infinity", `{"extra":-1e400}`},
	{"NaN", `{"extra":NaN}`},
	{"undefined", `{"extra":undefined}`},
	{"negative zero", `{"extra":-0}`},
	{"negative zero fraction", `{"extra":-0.0}`},
	{"negative zero underflow", `{"extra":-1e-400}`},
	{"BigInt", `{"extra":10n}`},
	{"function", `{"extra":function () {}}`},
	{"symbol", `{"extra":Symbol(x)}`},
	{"Map (duplicate keys)", `{"extra":{"k":1,"k":2}}`},
	{"cycle (unbounded nesting)", `{"extra":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`},
	{"invalid UTF-8 string", "{\"extra\":\"\xff\"}"},
	{"trailing garbage", `{"extra":1} {}`},
}

func TestS1_06_NonLosslessDataRejectedWithBatchText(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-06", "/w")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		before := treeSnapshot(t, e.root)
		for _, v := range losslessViolations {
			t.Run(v.name, func(t *testing.T) {
				bad := session.Event{Type: wire.TypeUserMessage, Seq: 7, Time: 7, Data: json.RawMessage(v.data), SurfaceOp: session.AppendOp()}
				err := hd.Append(bg, []session.Event{turnStart(t, 6, 2), bad})
				requireCode(t, err, wire.ErrInvalidArgument)
				require.ErrorIs(t, err, session.ErrBatchNotLossless)
				require.EqualError(t, err, notLosslessText)
				var be *session.BatchNotLosslessError
				require.ErrorAs(t, err, &be)
				require.Equal(t, 1, be.Index)
				require.Equal(t, int64(7), be.Seq)
				require.Equal(t, before, treeSnapshot(t, e.root))
			})
		}
		require.Equal(t, int64(6), hd.NextSeq())
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_07_DeleteMakesHasFalse(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-07", "/w")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))

		// Delete refuses while a lease is held.
		err := e.store.Delete(bg, h.ID)
		requireCode(t, err, wire.ErrAlreadyOwned)
		require.EqualError(t, err, `session "s1-07" is already owned by an active write handle`)
		require.FileExists(t, e.logPath(h.Cwd, h.ID))

		require.NoError(t, hd.Close(bg))
		require.NoError(t, e.store.Delete(bg, h.ID))
		has, err := e.store.Has(bg, h.ID)
		require.NoError(t, err)
		require.False(t, has)
		noSuchFile(t, sessionDir(t, e.root, h.Cwd, h.ID))
		_, err = e.store.Open(bg, h.ID, jsonl.AccessRead, jsonl.OpenOptions{})
		requireCode(t, err, wire.ErrNotFound)
	})
}

func TestS1_08_UpdateSummaryVisibleEventsUnchanged(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-08", "/w")
		events := completedTurn(t, 0, 1)
		persist(t, e.store, h, events...)
		logBefore := readFile(t, e.logPath(h.Cwd, h.ID))

		require.NoError(t, e.store.UpdateSummary(bg, h.ID, jsonl.SummaryUpdate{Title: strp("A title"), FirstPrompt: strp("question 1")}))
		sum, ok, err := e.newStore(nil).ReadSummary(bg, h.ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "A title", sum.Title)
		require.Equal(t, "question 1", sum.FirstPrompt)
		require.Positive(t, sum.UpdatedAt)
		require.Equal(t, events, readAll(t, e.store, h.ID))
		require.Equal(t, logBefore, readFile(t, e.logPath(h.Cwd, h.ID)))
	})
}

// ---------------------------------------------------------------------------
// Format helpers (S1-09..S1-11)

func TestS1_09_EncodeSegmentExamples(t *testing.T) {
	for in, want := range map[string]string{
		"..":           "~002E~002E",
		".":            "~002E",
		"a/b":          "a~002Fb",
		"/etc/passwd":  "~002Fetc~002Fpasswd",
		"a\x00b":       "a~0000b",
		"plain-ID_1.2": "plain-ID_1.2",
		"a~b":          "a~007Eb",
		"...":          "...",
		"é":            "~00E9",
		"\U0001F600":   "~D83D~DE00", // one character outside the BMP: two UTF-16 code units
	} {
		got, err := jsonl.EncodeSegment(in)
		require.NoError(t, err, "%q", in)
		require.Equal(t, want, got, "EncodeSegment(%q)", in)
	}

	// The encoded name is the session directory.
	e := newEnv(t, jsonl.CompressionNone, nil)
	persist(t, e.store, header("a/b", ""), turnStart(t, 0, 1))
	require.FileExists(t, filepath.Join(e.root, "_no-cwd", "a~002Fb", "session.v3.jsonl"))
}

func TestS1_10_EncodingIsInjective(t *testing.T) {
	literal, err := jsonl.EncodeSegment("~002F")
	require.NoError(t, err)
	slash, err := jsonl.EncodeSegment("/")
	require.NoError(t, err)
	require.Equal(t, "~007E002F", literal)
	require.Equal(t, "~002F", slash)
	require.NotEqual(t, literal, slash)

	// Go strings cannot hold a lone UTF-16 surrogate; its nearest Go form is
	// invalid UTF-8 (the CESU bytes of U+D800 or U+DC00), which decodes to
	// U+FFFD. Such ids are refused, so they can never collide with the
	// valid id made of U+FFFD characters.
	replacement, err := jsonl.EncodeSegment("\uFFFD")
	require.NoError(t, err)
	require.Equal(t, "~FFFD", replacement)
	for _, lone := range []string{"\xed\xa0\x80", "\xed\xb0\x80"} {
		_, err := jsonl.EncodeSegment(lone)
		require.Error(t, err, "%q", lone)
		e := newEnv(t, jsonl.CompressionNone, nil)
		_, err = e.store.Create(bg, header(lone, ""), jsonl.CreateOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrInvalidArgument)
		require.ErrorIs(t, err, wire.ErrInvalidUTF8ID)
		noSuchFile(t, e.root)
	}

	// Distinct ids that differ only in escaping land in distinct directories.
	e := newEnv(t, jsonl.CompressionNone, nil)
	persist(t, e.store, header("~002F", ""), turnStart(t, 0, 1))
	persist(t, e.store, header("/", ""), turnStart(t, 0, 2))
	require.Equal(t, `{"turn":1}`, string(readAll(t, e.store, "~002F")[0].Data))
	require.Equal(t, `{"turn":2}`, string(readAll(t, e.store, "/")[0].Data))
}

func TestS1_11_EmptyIDRejected(t *testing.T) {
	_, err := jsonl.EncodeSegment("")
	require.EqualError(t, err, "cannot encode an empty path segment")

	e := newEnv(t, jsonl.CompressionNone, nil)
	_, err = e.store.Create(bg, header("", ""), jsonl.CreateOptions{HandleID: newHandleID()})
	requireCode(t, err, wire.ErrInvalidArgument)
	require.ErrorContains(t, err, "empty")
	_, err = e.store.Open(bg, "", jsonl.AccessRead, jsonl.OpenOptions{})
	requireCode(t, err, wire.ErrInvalidArgument)
	require.ErrorContains(t, err, "empty")
	noSuchFile(t, e.root)
}

// ---------------------------------------------------------------------------
// Durability and crash semantics (S1-12..S1-22)

func TestS1_12_CreateWritesNoLogFirstAppendMaterializes(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-12", "/w")
		hd := create(t, e.store, h)

		// sessionflow's create takes the lease at once (FORMAT.md §7.2); no log.
		require.Equal(t, []string{filepath.Join("--w--", "s1-12", "session.lock")}, filesUnder(t, e.root))
		has, err := e.store.Has(bg, h.ID)
		require.NoError(t, err)
		require.False(t, has)

		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		require.Equal(t, filepath.Join(e.root, "--w--", "s1-12", generationName(comp)), e.logPath(h.Cwd, h.ID))
		require.FileExists(t, e.logPath(h.Cwd, h.ID))
		has, err = e.newStore(nil).Has(bg, h.ID)
		require.NoError(t, err)
		require.True(t, has)
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_13_RoundTripIsByteIdentical(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-13", "/w")
		h.ParentSession = "p"
		h.AgentPreset = "coder"
		// Format v3 has no top-level assistant/chunk events: the raw stream is
		// embedded in assistant/message.stream, so the stream records carry
		// the chunks instead.
		streamed := surface(t, wire.TypeAssistantMessage, 3, `{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"héllo <b> & \u2028 😀"}]},"stream":[{"type":"chunk","time":1003,"chunk":{"type":"text-delta","text":"hé"}},{"type":"text-chunks","time0":1003,"index":0,"dt":[0,1,2],"texts":["l","lo"," <b>"]}]}`)
		batch1 := []session.Event{
			turnStart(t, 0, 1),
			userMessage(t, 1, "tab\there \"quoted\" \\ \x01 control"),
			stepStart(t, 2, 1, 1),
			streamed,
		}
		batch2 := []session.Event{
			stepEnd(t, 4, 1, 1),
			turnEnd(t, 5, 1),
			{Type: "x-plugin/note", Seq: 6, Time: 1006, Data: json.RawMessage(`{"n":1.5e3,"s":"x"}`), Ignorable: true},
		}
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, batch1))
		require.NoError(t, hd.Append(bg, batch2))
		require.NoError(t, hd.Close(bg))

		data := readFile(t, e.logPath(h.Cwd, h.ID))
		want := []string{headerLine(h) + "\n", strings.Join(lines(t, batch1...), "\n") + "\n", strings.Join(lines(t, batch2...), "\n") + "\n"}
		if comp == jsonl.CompressionZstd {
			require.Equal(t, want, logRecords(t, comp, data))
		} else {
			require.Equal(t, strings.Join(want, ""), string(data))
		}
		all := append(append([]session.Event{}, batch1...), batch2...)
		require.Equal(t, all, readAll(t, e.newStore(nil), h.ID))
	})
}

// crashTailLog writes the log of S1-14: turn 1 (0..5) committed, then turn
// 2's turn/start@6 and step/start@7, then a torn record for seq 8. It
// returns the log path and the bytes before the torn tail.
func crashTailLog(t *testing.T, e *env, h wire.Header) (string, []byte) {
	path := e.writeLog(h, lines(t, completedTurn(t, 0, 1)...), lines(t, turnStart(t, 6, 2), stepStart(t, 7, 2, 1)))
	committed := readFile(t, path)
	appendFile(t, path, tornTail(t, e.comp, `{"type":"assistant/message","seq":8,"ti`, assistantMessage(t, 8, 2, 1, "lost")))
	return path, committed
}

func TestS1_14_CrashTailKeptOnlyTornFragmentCut(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-14", "/w")
		path, committed := crashTailLog(t, e, h)
		damaged := readFile(t, path)

		// Format v3 keeps the valid records of the unfinished turn (C1); reads
		// never repair.
		require.Equal(t, upTo(8), seqs(readAll(t, e.store, h.ID)))
		require.Equal(t, damaged, readFile(t, path))

		hd := openWrite(t, e.newStore(nil), h.ID)
		require.Equal(t, int64(8), hd.NextSeq())
		require.Equal(t, upTo(8), seqs(readHandle(t, hd)))

		// The path-based store's "append 6,7 again" now overlaps stored records: refused
		// before any repair, so the file is untouched (C16).
		err := hd.Append(bg, []session.Event{turnStart(t, 6, 9), stepStart(t, 7, 9, 1)})
		requireCode(t, err, wire.ErrSeqMismatch)
		require.Equal(t, damaged, readFile(t, path))

		closers, err := session.InterruptedTurnClosers(readHandle(t, hd))
		require.NoError(t, err)
		require.Equal(t, []int64{8, 9}, seqs(closers))
		require.NoError(t, hd.Append(bg, closers))
		require.NoError(t, hd.Close(bg))

		got := readAll(t, e.newStore(nil), h.ID)
		require.Equal(t, upTo(10), seqs(got))
		require.Equal(t, []string{wire.TypeStepEnd, wire.TypeTurnEnd}, types(got[8:]))
		after := readFile(t, path)
		require.True(t, bytes.HasPrefix(after, committed))
		require.NotContains(t, logText(t, comp, after), `"lost"`)
		require.NotContains(t, logText(t, comp, after), `"ti`+"\n")
	})
}

func TestS1_14_ZstdTornFrameRecordsRecovered(t *testing.T) {
	// The zstd form of the kept crash tail: the final frame lost its
	// checksum in the crash, but its records are complete; they are served
	// and, at the first mutation, rewritten as a frame of their own.
	e := newEnv(t, jsonl.CompressionZstd, nil)
	h := header("s1-14-zstd", "/w")
	path := e.writeLog(h, lines(t, completedTurn(t, 0, 1)...))
	committed := readFile(t, path)
	tail := []session.Event{turnStart(t, 6, 2), stepStart(t, 7, 2, 1)}
	frame := zstdFrame(t, []byte(strings.Join(lines(t, tail...), "\n")+"\n"))
	appendFile(t, path, frame[:len(frame)-4])
	damaged := readFile(t, path)

	require.Equal(t, append(completedTurn(t, 0, 1), tail...), readAll(t, e.store, h.ID))
	require.Equal(t, damaged, readFile(t, path), "reads never repair")

	hd := openWrite(t, e.newStore(nil), h.ID)
	require.Equal(t, int64(8), hd.NextSeq())
	closers, err := session.InterruptedTurnClosers(readHandle(t, hd))
	require.NoError(t, err)
	require.NoError(t, hd.Append(bg, closers))
	require.NoError(t, hd.Close(bg))

	after := readFile(t, path)
	require.True(t, bytes.HasPrefix(after, committed))
	require.Equal(t, []string{
		strings.Join(lines(t, tail...), "\n") + "\n",
		strings.Join(lines(t, closers...), "\n") + "\n",
	}, logRecords(t, jsonl.CompressionZstd, after[len(committed):]))
	require.Equal(t, upTo(10), seqs(readAll(t, e.store, h.ID)))
}

func TestS1_15_CommittedBytesArePrefixAfterRepair(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-15", "/proj")
		path := e.writeLog(h, lines(t, completedTurn(t, 0, 1)...))
		committed := readFile(t, path)
		appendFile(t, path, tornTail(t, comp, `{"type":"turn/start","seq":6,"ti`, turnStart(t, 6, 2)))

		hd := openWrite(t, e.store, h.ID)
		next := completedTurn(t, 6, 2)[:2]
		require.NoError(t, hd.Append(bg, next))
		require.NoError(t, hd.Close(bg))

		after := readFile(t, path)
		require.True(t, bytes.HasPrefix(after, committed), "committed bytes must be the head of the repaired file")
		rest := after[len(committed):]
		want := strings.Join(lines(t, next...), "\n") + "\n"
		if comp == jsonl.CompressionZstd {
			require.Equal(t, []string{want}, logRecords(t, comp, rest))
		} else {
			require.Equal(t, want, string(rest))
		}
	})
}

func TestS1_16_FsyncFailureRollsBackAndRetrySucceeds(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ffs := faultfs.New(nil)
		e := newEnv(t, comp, ffs)
		h := header("s1-16", "/w")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpSync, PathContains: generationName(comp), Err: syscall.ENOSPC, Times: 1})
		batch := []session.Event{turnStart(t, 6, 2), stepStart(t, 7, 2, 1)}
		err := hd.Append(bg, batch)
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.ErrorContains(t, err, "no space left on device")
		require.Equal(t, before, readFile(t, path), "the failed append is rolled back to the previous size")
		require.Equal(t, int64(6), hd.NextSeq())

		require.NoError(t, hd.Append(bg, batch))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, upTo(8), seqs(readAll(t, e.newStore(nil), h.ID)))
	})
}

func TestS1_17_CallerSliceMutationHasNoEffect(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-17", "")
		hd := create(t, e.store, h)
		events := completedTurn(t, 0, 1)
		batch := make([]session.Event, len(events), len(events)+1)
		copy(batch, events)
		require.NoError(t, hd.Append(bg, batch))

		batch = append(batch, turnStart(t, 6, 2)) // same backing array
		batch[0] = turnStart(t, 0, 99)
		_ = batch

		require.Equal(t, events, readHandle(t, hd))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, events, readAll(t, e.store, h.ID))
	})
}

func TestS1_18_EventDataMutationHasNoEffect(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-18", "")
		hd := create(t, e.store, h)
		msg := userMessage(t, 0, "original text")
		want := msg.Clone()
		require.NoError(t, hd.Append(bg, []session.Event{msg}))

		i := bytes.Index(msg.Data, []byte("original"))
		require.GreaterOrEqual(t, i, 0)
		copy(msg.Data[i:], "mutated!")

		require.Equal(t, []session.Event{want}, readHandle(t, hd))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, []session.Event{want}, readAll(t, e.store, h.ID))
		require.Contains(t, logText(t, comp, readFile(t, e.logPath("", h.ID))), "original text")
	})
}

func TestS1_19_ReturnedHeaderMutationDoesNotRedirect(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-19", "/proj")
		persist(t, e.store, h, completedTurn(t, 0, 1)...)

		snap, err := e.store.Stat(bg, h.ID)
		require.NoError(t, err)
		snap.Header.Cwd = "/elsewhere"
		hd := openWrite(t, e.store, h.ID)
		got := hd.Header()
		got.Cwd = "/elsewhere"
		require.NoError(t, hd.Append(bg, completedTurn(t, 6, 2)))
		require.Equal(t, "/proj", hd.Header().Cwd)
		require.NoError(t, hd.Close(bg))

		require.Equal(t, []string{filepath.Join("--proj--", "s1-19", generationName(comp))}, logFilesUnder(t, e.root))
		snap, err = e.store.Stat(bg, h.ID)
		require.NoError(t, err)
		require.Equal(t, "/proj", snap.Header.Cwd)
		require.Equal(t, upTo(12), seqs(readAll(t, e.store, h.ID)))
	})
}

func TestS1_20_OlderVersionRefused(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-20", "/w")
		h.Version = 2
		path := e.writeLog(h, lines(t, completedTurn(t, 0, 1)...))
		want := fmt.Sprintf(`session "s1-20" uses log format v2, older than the supported v3, and this build ships no upgrade path for it (raw log: %s)`, path)
		before := treeSnapshot(t, e.root)

		fresh := e.newStore(nil)
		for _, access := range []jsonl.Access{jsonl.AccessRead, jsonl.AccessWrite} {
			_, err := fresh.Open(bg, h.ID, access, jsonl.OpenOptions{HandleID: newHandleID()})
			requireCode(t, err, wire.ErrFormatUnsupported)
			require.EqualError(t, err, want)
		}
		_, err := fresh.Stat(bg, h.ID)
		requireCode(t, err, wire.ErrFormatUnsupported)
		require.EqualError(t, err, want)
		// List shows the session as a row it cannot serve, with the refusal
		// (the reference skips it; sessionflow reports it instead, D23).
		list, err := fresh.List(bg)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, h.ID, list[0].Header.ID)
		require.NotNil(t, list[0].Problem)
		require.ErrorIs(t, list[0].Problem, wire.ErrFormatUnsupported)
		require.Equal(t, want, list[0].Problem.Reason)
		require.Equal(t, before, treeSnapshot(t, e.root))
	})
}

func TestS1_21_IdenticalReappendIsIdempotentOtherwiseSeqMismatch(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-21", "")
		hd := create(t, e.store, h)
		events := completedTurn(t, 0, 1)
		require.NoError(t, hd.Append(bg, events))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		// sessionflow: a retried append of the identical stored batch
		// succeeds without writing.
		require.NoError(t, hd.Append(bg, events))
		require.Equal(t, before, readFile(t, path))
		require.Equal(t, int64(6), hd.NextSeq())

		changed := completedTurn(t, 0, 1)
		changed[5] = ev(t, wire.TypeTurnEnd, 5, `{"turn":1,"reason":{"kind":"aborted"}}`)
		err := hd.Append(bg, changed)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "s1-21": expected 6 at index 0, got 0`)

		// A batch overlapping the end of the log is a mismatch too.
		err = hd.Append(bg, append(events[4:], turnStart(t, 6, 2)))
		requireCode(t, err, wire.ErrSeqMismatch)
		require.ErrorContains(t, err, "seq mismatch")
		require.Equal(t, before, readFile(t, path))
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_22_TraversalIDsStayUnderRoot(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		parent := filepath.Dir(e.root)
		ids := []string{"../../etc/pwn", "..", ".", "/etc/passwd", "a/../../b", `..\..\win`}
		for i, id := range ids {
			cwd := ""
			if i%2 == 1 {
				cwd = "/../../etc"
			}
			persist(t, e.store, header(id, cwd), turnStart(t, 0, int64(i+1)))
		}
		entries, err := os.ReadDir(parent)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.Equal(t, "root", entries[0].Name())
		logs := logFilesUnder(t, e.root)
		require.Len(t, logs, len(ids))
		for _, rel := range logs {
			require.False(t, strings.HasPrefix(rel, ".."), rel)
			require.Len(t, strings.Split(rel, string(filepath.Separator)), 3, rel)
		}
		for i, id := range ids {
			got := readAll(t, e.newStore(nil), id)
			require.Equal(t, fmt.Sprintf(`{"turn":%d}`, i+1), string(got[0].Data))
		}
	})
}

// ---------------------------------------------------------------------------
// Write path (S1-23..S1-30): the path-based store's buffered live writes are
// the workflow's Append calls on a write handle; "flush" is the handle's
// Flush (which materializes a header-only log) and every Append is already
// durable.

func TestS1_23_LiveSessionDrivenThroughHandle(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-23", "/w")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Flush(bg))
		events := completedTurn(t, 0, 1)
		for _, batch := range [][]session.Event{events[:1], events[1:4], events[4:]} {
			require.NoError(t, hd.Append(bg, batch))
		}
		require.NoError(t, hd.Close(bg))

		fresh := e.newStore(nil)
		rd, err := fresh.Open(bg, h.ID, jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		require.Equal(t, "/w", rd.Header().Cwd)
		require.Equal(t, events, readHandle(t, rd))
		require.NoError(t, rd.Close(bg))
		if comp == jsonl.CompressionZstd {
			// One header frame (the flush), then one frame per append.
			require.Len(t, logRecords(t, comp, readFile(t, e.logPath(h.Cwd, h.ID))), 4)
		}
	})
}

func TestS1_24_NestedEventMutationHasNoEffect(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-24", "/w")
		hd := create(t, e.store, h)
		batch := []session.Event{
			turnStart(t, 0, 1),
			stepStart(t, 1, 1, 1),
			assistantToolCall(t, 2, 1, 1, "call-1"),
			toolCall(t, 3, 1, 1, "call-1"),
			toolResult(t, 4, 1, 1, "call-1", 3),
		}
		want := session.CloneEvents(batch)
		require.NoError(t, hd.Append(bg, batch))

		batch[2].SurfaceOp.Op = session.SurfaceReplace
		batch[4].SourceEventSeqs[0] = 0
		batch[4].Data[0] = '['
		batch[3].Type = "tool/other"

		require.Equal(t, want, readHandle(t, hd))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, want, readAll(t, e.newStore(nil), h.ID))
	})
}

func TestS1_25_SeedPersistedOnceFlushDoesNotDuplicate(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-25", "/w")
		hd := create(t, e.store, h)
		seed := completedTurn(t, 0, 1)
		require.NoError(t, hd.Append(bg, seed))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		require.NoError(t, hd.Flush(bg))
		require.NoError(t, hd.Append(bg, nil))
		// A retried seed append (the activity ran twice) stores nothing new.
		require.NoError(t, e.newStore(nil).Attach(hd.Ref()).Append(bg, seed))
		require.NoError(t, hd.Flush(bg))
		require.Equal(t, before, readFile(t, path))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, seed, readAll(t, e.store, h.ID))
	})
}

func TestS1_26_ConcurrentSessionsNeverMix(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		ids := []string{"s1-26-a", "s1-26-b", "s1-26-c"}
		want := map[string][]session.Event{}
		var wg sync.WaitGroup
		errs := make(chan error, len(ids))
		for i, id := range ids {
			var events []session.Event
			for turn := int64(1); turn <= 3; turn++ {
				events = append(events, completedTurn(t, (turn-1)*6, turn)...)
			}
			for k := range events {
				if events[k].Type == wire.TypeUserMessage {
					events[k] = userMessage(t, events[k].Seq, fmt.Sprintf("%s says %d", id, k))
				}
			}
			want[id] = events
			hd := create(t, e.store, header(id, fmt.Sprintf("/w%d", i%2)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for start := 0; start < len(events); start += 2 {
					if err := hd.Append(bg, events[start:start+2]); err != nil {
						errs <- err
						return
					}
				}
				errs <- hd.Close(bg)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		fresh := e.newStore(nil)
		for _, id := range ids {
			require.Equal(t, want[id], readAll(t, fresh, id))
		}
	})
}

func TestS1_27_HandleCreatedElsewhereIsUsableByAnotherProcess(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-27", "/w")
		owner := jsonl.Owner{WorkflowID: "session/s1-27", RunID: "run-a"}
		hd, err := e.store.Create(bg, h, jsonl.CreateOptions{HandleID: "h-s1-27", Owner: owner})
		require.NoError(t, err)

		// Another worker, which never saw the create, attaches by reference.
		other := e.newStore(nil)
		lease, err := other.LeaseOf(bg, h.ID)
		require.NoError(t, err)
		require.Equal(t, "h-s1-27", lease.HandleID)
		require.Equal(t, owner, lease.Owner)
		att := other.Attach(hd.Ref())
		require.NoError(t, att.Flush(bg))
		require.NoError(t, att.Append(bg, completedTurn(t, 0, 1)))
		require.Equal(t, h, att.Header())
		require.NoError(t, other.CloseHandle(bg, hd.Ref()))

		require.Equal(t, upTo(6), seqs(readAll(t, e.newStore(nil), h.ID)))
		lease, err = e.store.LeaseOf(bg, h.ID)
		require.NoError(t, err)
		require.Nil(t, lease)
	})
}

func TestS1_28_AppendedEventsSurviveWithoutFlushOrClose(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-28", "/w")
		hd := create(t, e.store, h)
		events := completedTurn(t, 0, 1)
		require.NoError(t, hd.Append(bg, events[:3]))
		require.NoError(t, hd.Append(bg, events[3:]))
		// The owner vanishes without closing (a crashed worker).

		fresh := e.newStore(nil)
		require.Equal(t, events, readAll(t, fresh, h.ID))
		_, err := fresh.Open(bg, h.ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrAlreadyOwned)
		lease, err := fresh.ForceUnlock(bg, h.ID)
		require.NoError(t, err)
		require.Equal(t, hd.Ref().HandleID, lease.HandleID)
		w := openWrite(t, fresh, h.ID)
		require.Equal(t, int64(6), w.NextSeq())
		require.NoError(t, w.Close(bg))

		// The forfeited handle cannot write any more: its own process finds
		// the lease gone, any other process finds the handle id revoked.
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)
		err = hd.Append(bg, completedTurn(t, 6, 2))
		requireCode(t, err, wire.ErrOwnershipLost)
		require.EqualError(t, err, `session "s1-28": write ownership was lost; close this handle and reopen`)
		requireCode(t, e.newStore(nil).Attach(hd.Ref()).Append(bg, completedTurn(t, 6, 2)), wire.ErrHandleClosed)
		require.Equal(t, before, readFile(t, path))
	})
}

func TestS1_29_SecondStoreAdoptsMaterializedHandle(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-29", "/w")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))

		reloaded := e.newStore(nil).Attach(hd.Ref())
		require.NoError(t, reloaded.Append(bg, completedTurn(t, 6, 2)))
		require.Equal(t, int64(12), reloaded.NextSeq())
		// The first process sees the other's appends before its next one.
		require.NoError(t, hd.Append(bg, completedTurn(t, 12, 3)))
		require.NoError(t, hd.Close(bg))

		got := readAll(t, e.store, h.ID)
		require.Equal(t, upTo(18), seqs(got))
		var starts []int64
		for _, ev := range got {
			if ev.Type == wire.TypeTurnStart {
				ts, err := ev.TurnStart()
				require.NoError(t, err)
				starts = append(starts, ts.Turn)
			}
		}
		require.Equal(t, []int64{1, 2, 3}, starts)
	})
}

func TestS1_30_NewProcessPersistsTheMissingSuffix(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-30", "/w")
		hd := create(t, e.store, h)
		live := []session.Event{turnStart(t, 0, 1), userMessage(t, 1, "hi"), stepStart(t, 2, 1, 1), assistantMessage(t, 3, 1, 1, "hello")}
		require.NoError(t, hd.Append(bg, live[:2]))

		// The live state (0..3) is ahead of disk (0..1); a new process holding
		// the same handle persists what disk lacks, from its NextSeq.
		att := e.newStore(nil).Attach(hd.Ref())
		err := att.Append(bg, live)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "s1-30": expected 2 at index 0, got 0`)
		require.Equal(t, int64(2), att.NextSeq())
		require.NoError(t, att.Append(bg, live[att.NextSeq():]))
		require.NoError(t, att.Close(bg))
		require.Equal(t, live, readAll(t, e.store, h.ID))
	})
}

// ---------------------------------------------------------------------------
// Log scanning (S1-31..S1-38), on hand-written logs

// openBoth opens id for reading and for writing in a fresh store and
// returns both errors (a successful handle is closed).
func openBoth(t *testing.T, e *env, id string) (readErr, writeErr error) {
	t.Helper()
	st := e.newStore(nil)
	rd, readErr := st.Open(bg, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if readErr == nil {
		require.NoError(t, rd.Close(bg))
	}
	wr, writeErr := st.Open(bg, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
	if writeErr == nil {
		require.NoError(t, wr.Close(bg))
	}
	return readErr, writeErr
}

// requireCorrupt asserts that opening id (read and write) fails as corrupt
// with the classified text of FORMAT.md §4.5 around detail, leaving the tree as
// it was.
func requireCorrupt(t *testing.T, e *env, id, path, detail string) {
	t.Helper()
	before := treeSnapshot(t, e.root)
	readErr, writeErr := openBoth(t, e, id)
	want := fmt.Sprintf(`session %q: stored log is corrupt: %s (raw log: %s)`, id, detail, path)
	for _, err := range []error{readErr, writeErr} {
		requireCode(t, err, wire.ErrCorrupt)
		require.EqualError(t, err, want)
	}
	require.Equal(t, before, treeSnapshot(t, e.root))
}

func TestS1_31_EmptyLogIsHeaderless(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		path := e.logPath("", "s1-31")
		writeFile(t, path, nil)
		detail := "empty or header-less session log"
		if comp == jsonl.CompressionZstd {
			detail = "empty or header-less Zstandard session log"
		}
		requireCorrupt(t, e, "s1-31", path, detail)
		snap, err := e.store.Stat(bg, "s1-31")
		require.NoError(t, err)
		require.Nil(t, snap)
	})
	t.Run("header without newline", func(t *testing.T) {
		e := newEnv(t, jsonl.CompressionNone, nil)
		path := e.logPath("", "s1-31")
		writeFile(t, path, []byte(headerLine(header("s1-31", ""))))
		requireCorrupt(t, e, "s1-31", path, "empty or header-less session log")
	})
}

func TestS1_32_NonJSONHeaderLine(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		path := e.logPath("", "s1-32")
		writeFile(t, path, encodeLog(t, comp, "not json"))
		requireCorrupt(t, e, "s1-32", path, "corrupt session log: header line is not valid JSON")
	})
}

func TestS1_33_NonHeaderFirstLine(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		for first, detail := range map[string]string{
			`{"type":"event"}`: "corrupt session log: first line is not a session header",
			`{"type":"session","version":3,"id":"s1-33","createdAt":5,"isSeeded":false,"delegationDepth":0,"extra":1}`: "corrupt session log: first line is not a session header",
			`{"type":"session","version":3,"id":"s1-33","createdAt":-0,"isSeeded":false,"delegationDepth":0}`:          "corrupt session log: first line is not a session header",
			`null`: "corrupt session log: first line is not a JSON object",
			`[1]`:  "corrupt session log: first line is not a JSON object",
			`123`:  "corrupt session log: first line is not a JSON object",
		} {
			e := newEnv(t, comp, nil)
			path := e.logPath("", "s1-33")
			writeFile(t, path, encodeLog(t, comp, first))
			requireCorrupt(t, e, "s1-33", path, detail)
		}
	})
}

func TestS1_34_GapWithoutTurnEndKeepsPrefix(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-34", "")
		path := e.writeLog(h, lines(t, turnStart(t, 0, 1), stepStart(t, 2, 1, 1)))
		if comp == jsonl.CompressionZstd {
			// In zstd mode any bad record inside a complete frame is corruption.
			requireCorrupt(t, e, h.ID, path, "corrupt session log: invalid committed event at line 2: seq gap (expected 1, got 2)")
			return
		}
		damaged := readFile(t, path)
		require.Equal(t, []int64{0}, seqs(readAll(t, e.store, h.ID)))
		require.Equal(t, damaged, readFile(t, path), "reads never repair")
		hd := openWrite(t, e.newStore(nil), h.ID)
		require.Equal(t, int64(1), hd.NextSeq())
		require.NoError(t, hd.Append(bg, []session.Event{stepStart(t, 1, 1, 1)}))
		require.NoError(t, hd.Close(bg))
		requireSameLog(t, comp, encodeLog(t, comp, headerLine(h), lines(t, turnStart(t, 0, 1), stepStart(t, 1, 1, 1))), readFile(t, path))
	})
}

func TestS1_35_GapBeforeTurnEndIsCorrupt(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-35", "")
		path := e.writeLog(h, lines(t, turnStart(t, 0, 1), stepStart(t, 2, 1, 1), turnEnd(t, 3, 1)))
		requireCorrupt(t, e, h.ID, path, "corrupt session log: invalid committed event at line 2: seq gap (expected 1, got 2)")
	})
}

func TestS1_36_UnparsableLineBeforeTurnEndIsCorrupt(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-36", "")
		path := e.writeLog(h, []string{line(t, turnStart(t, 0, 1)), `{not json`, line(t, turnEnd(t, 1, 1))})
		requireCorrupt(t, e, h.ID, path, "corrupt session log: unparsable committed event at line 2")
	})
}

func TestS1_37_UnparsableLineWithoutTurnEndKeepsPrefix(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-37", "")
		path := e.writeLog(h, []string{line(t, turnStart(t, 0, 1)), `{not json`})
		if comp == jsonl.CompressionZstd {
			requireCorrupt(t, e, h.ID, path, "corrupt session log: unparsable committed event at line 2")
			return
		}
		require.Equal(t, []int64{0}, seqs(readAll(t, e.store, h.ID)))
		hd := openWrite(t, e.store, h.ID)
		require.Equal(t, int64(1), hd.NextSeq())
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_38_GapAfterLastTurnEndDropsOnlyTheTail(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-38", "")
		path := e.writeLog(h, lines(t, turnStart(t, 0, 1), turnEnd(t, 1, 1), stepStart(t, 9, 1, 1)))
		if comp == jsonl.CompressionZstd {
			requireCorrupt(t, e, h.ID, path, "corrupt session log: invalid committed event at line 3: seq gap (expected 2, got 9)")
			return
		}
		require.Equal(t, []int64{0, 1}, seqs(readAll(t, e.store, h.ID)))
		hd := openWrite(t, e.store, h.ID)
		require.Equal(t, int64(2), hd.NextSeq())
		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 2, 2)}))
		require.NoError(t, hd.Close(bg))
		requireSameLog(t, comp, encodeLog(t, comp, headerLine(h), lines(t, turnStart(t, 0, 1), turnEnd(t, 1, 1), turnStart(t, 2, 2))), readFile(t, path))
	})
}

// ---------------------------------------------------------------------------
// Edge cases (S1-39..S1-81)

func TestS1_39_MissingIDNotFound(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		persist(t, e.store, header("other", "/w"), turnStart(t, 0, 1))
		before := treeSnapshot(t, e.root)
		for range 2 { // a retry sees the same error, never "already owned"
			readErr, writeErr := openBoth(t, e, "nope")
			for _, err := range []error{readErr, writeErr} {
				requireCode(t, err, wire.ErrNotFound)
				require.EqualError(t, err, `session "nope" not found`)
				require.Equal(t, jsonl.Code("SessionNotFound"), jsonl.ErrorCode(err))
			}
		}
		snap, err := e.store.Stat(bg, "nope")
		require.NoError(t, err)
		require.Nil(t, snap)
		_, _, err = e.store.ReadSummary(bg, "nope")
		requireCode(t, err, wire.ErrNotFound)
		requireCode(t, e.store.UpdateSummary(bg, "nope", jsonl.SummaryUpdate{Title: strp("x")}), wire.ErrNotFound)
		require.Equal(t, before, treeSnapshot(t, e.root))
	})
}

func TestS1_40_EmptyBatchIsANoOp(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ffs := faultfs.New(nil)
		e := newEnv(t, comp, ffs)
		h := header("s1-40", "/w")
		hd := create(t, e.store, h)
		before := treeSnapshot(t, e.root)
		ops := ffs.Count()
		require.NoError(t, hd.Append(bg, nil))
		require.NoError(t, hd.Append(bg, []session.Event{}))
		require.Equal(t, ops, ffs.Count(), "an empty batch touches no file and takes no lock:\n%s", ffs)
		require.False(t, hd.Materialized())
		has, err := e.store.Has(bg, h.ID)
		require.NoError(t, err)
		require.False(t, has)
		require.Equal(t, before, treeSnapshot(t, e.root))
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_41_SidecarFailureDoesNotFailAppend(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ffs := faultfs.New(nil)
		e := newEnv(t, comp, ffs)
		h := header("s1-41", "/w")
		hd := create(t, e.store, h)
		ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpOpen, PathContains: "summary.", Err: syscall.EIO})
		events := completedTurn(t, 0, 1)
		require.NoError(t, hd.Append(bg, events[:3]))
		require.NoError(t, hd.Append(bg, events[3:]))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, events, readAll(t, e.newStore(nil), h.ID))
		noSuchFile(t, filepath.Join(sessionDir(t, e.root, h.Cwd, h.ID), "summary.json"))
	})
}

func TestS1_42_WholeDataNotJSONRejected(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		hd := create(t, e.store, header("s1-42", ""))
		for _, data := range []string{`function () {}`, `undefined`, `NaN`} {
			err := hd.Append(bg, []session.Event{{Type: wire.TypeTurnStart, Seq: 0, Time: 1, Data: json.RawMessage(data)}})
			requireCode(t, err, wire.ErrInvalidArgument)
			require.ErrorIs(t, err, session.ErrBatchNotLossless)
			require.ErrorContains(t, err, "non-JSON-serializable")
		}
		// A JSON value that is not an object is an invalid event instead.
		err := hd.Append(bg, []session.Event{{Type: wire.TypeTurnStart, Seq: 0, Time: 1, Data: json.RawMessage(`[1]`)}})
		requireCode(t, err, wire.ErrInvalidArgument)
		require.ErrorIs(t, err, session.ErrInvalidEvent)
		require.False(t, hd.Materialized())
		require.Empty(t, logFilesUnder(t, e.root))
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_43_DeleteUnknownIsNoOp(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		require.NoError(t, e.store.Delete(bg, "unknown")) // absent root
		persist(t, e.store, header("kept", "/w"), turnStart(t, 0, 1))
		before := treeSnapshot(t, e.root)
		require.NoError(t, e.store.Delete(bg, "unknown"))
		require.Equal(t, before, treeSnapshot(t, e.root))
	})
}

func TestS1_44_UpdateSummaryOnFreshStore(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-44", "/proj")
		events := completedTurn(t, 0, 1)
		persist(t, e.store, h, events...)

		require.NoError(t, e.newStore(nil).UpdateSummary(bg, h.ID, jsonl.SummaryUpdate{Title: strp("adopted")}))
		sum, ok, err := e.newStore(nil).ReadSummary(bg, h.ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "adopted", sum.Title)
		require.Equal(t, events, readAll(t, e.store, h.ID))
	})
}

func TestS1_45_FailedUpdateNeverBecomesDurable(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ffs := faultfs.New(nil)
		e := newEnv(t, comp, ffs)
		h := header("s1-45", "/w")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		require.NoError(t, e.store.UpdateSummary(bg, h.ID, jsonl.SummaryUpdate{Title: strp("old")}))

		ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpRename, PathContains: "summary.json", Err: syscall.ENOSPC, Times: 1})
		err := e.store.UpdateSummary(bg, h.ID, jsonl.SummaryUpdate{Title: strp("rejected")})
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.ErrorContains(t, err, "no space left on device")

		require.NoError(t, hd.Append(bg, completedTurn(t, 6, 2)))
		sum, ok, err := e.newStore(nil).ReadSummary(bg, h.ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "old", sum.Title)
		require.NoError(t, hd.Close(bg))
		for _, f := range filesUnder(t, e.root) {
			require.False(t, strings.HasSuffix(f, ".tmp"), "temp file left behind: %s", f)
		}
	})
}

func TestS1_46_SummaryBeforeFirstAppendThenErased(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-46", "")
		hd := create(t, e.store, h)
		require.NoError(t, e.store.UpdateSummary(bg, h.ID, jsonl.SummaryUpdate{Title: strp("early")}))
		dir := sessionDir(t, e.root, h.Cwd, h.ID)
		require.FileExists(t, filepath.Join(dir, "summary.json"))
		require.Empty(t, logFilesUnder(t, e.root))
		sum, ok, err := e.store.ReadSummary(bg, h.ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "early", sum.Title)

		// The creator closes unmaterialized: the directory, sidecar included,
		// is erased.
		require.NoError(t, hd.Close(bg))
		noSuchFile(t, dir)

		// A sidecar left alone in a session directory is removed by Delete.
		writeFile(t, filepath.Join(dir, "summary.json"), []byte(`{"updatedAt":1,"title":"orphan"}`))
		require.NoError(t, e.newStore(nil).Delete(bg, h.ID))
		noSuchFile(t, dir)
	})
}

func TestS1_47_DeleteAfterRestartFindsSidecar(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-47", "/proj")
		persist(t, e.store, h, completedTurn(t, 0, 1)...)
		require.NoError(t, e.store.UpdateSummary(bg, h.ID, jsonl.SummaryUpdate{Title: strp("t")}))
		dir := sessionDir(t, e.root, h.Cwd, h.ID)
		require.FileExists(t, filepath.Join(dir, "summary.json"))

		require.NoError(t, e.newStore(nil).Delete(bg, h.ID))
		noSuchFile(t, dir)
		snap, err := e.store.Stat(bg, h.ID)
		require.NoError(t, err)
		require.Nil(t, snap)

		orphan := sessionDir(t, e.root, "/proj", "s1-47-orphan")
		writeFile(t, filepath.Join(orphan, "summary.json"), []byte(`{"updatedAt":1}`))
		require.NoError(t, e.newStore(nil).Delete(bg, "s1-47-orphan"))
		noSuchFile(t, orphan)
	})
}

func TestS1_48_ClosedBeforeAppendLeavesNothingIDReusable(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-48", "/w")
		hd := create(t, e.store, h)
		rd, err := e.store.Open(bg, h.ID, jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		require.Empty(t, readHandle(t, rd))
		require.NoError(t, hd.Close(bg))
		noSuchFile(t, sessionDir(t, e.root, h.Cwd, h.ID))
		_, err = rd.Read(bg, 0, -1)
		requireCode(t, err, wire.ErrNotFound)
		require.NoError(t, rd.Close(bg))
		_, err = e.store.Open(bg, h.ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrNotFound)

		again := create(t, e.store, h)
		events := []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}
		require.NoError(t, again.Append(bg, events))
		require.NoError(t, again.Close(bg))
		require.Equal(t, events, readAll(t, e.newStore(nil), h.ID))
	})
}

func TestS1_49_UnclosedHandleBlocksIDReuse(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-49", "/w")
		hd := create(t, e.store, h) // never materialized, still owned

		for _, st := range []*jsonl.Store{e.store, e.newStore(nil)} {
			_, err := st.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
			requireCode(t, err, wire.ErrAlreadyExists)
			require.EqualError(t, err, `session "s1-49" already exists`)
			_, err = st.Open(bg, h.ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
			requireCode(t, err, wire.ErrAlreadyOwned)
		}
		require.NoError(t, hd.Close(bg))
		persist(t, e.store, h, turnStart(t, 0, 1))
	})
}

func TestS1_50_CreateCopiesHeader(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-50", "/w")
		hd := create(t, e.store, h)
		h.Cwd = "/elsewhere"
		h.CreatedAt = 99
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, []string{filepath.Join("--w--", "s1-50", generationName(comp))}, logFilesUnder(t, e.root))
		snap, err := e.store.Stat(bg, "s1-50")
		require.NoError(t, err)
		require.Equal(t, header("s1-50", "/w"), snap.Header)
	})
}

func TestS1_51_ListAcrossProjects(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		persist(t, e.store, header("a", "/p1"), turnStart(t, 0, 1))
		persist(t, e.store, header("b", "/p2"), turnStart(t, 0, 1))
		persist(t, e.store, header("c", ""), turnStart(t, 0, 1))
		pending := create(t, e.store, header("d", "/p1"))

		list, err := e.newStore(nil).List(bg)
		require.NoError(t, err)
		var ids []string
		for _, s := range list {
			ids = append(ids, s.Header.ID)
			if s.Header.ID == "d" {
				require.True(t, s.Pending)
				continue
			}
			require.False(t, s.Pending)
			require.Equal(t, e.logPath(s.Header.Cwd, s.Header.ID), s.Path)
			require.Equal(t, fileSize(t, s.Path), s.SizeBytes)
			require.NotEmpty(t, s.Revision)
		}
		require.Equal(t, []string{"a", "b", "c", "d"}, ids)
		require.NoError(t, pending.Close(bg))
	})
}

func TestS1_52_ListEmptyRoot(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		require.NoError(t, os.MkdirAll(e.root, 0o700))
		list, err := e.store.List(bg)
		require.NoError(t, err)
		require.Empty(t, list)
	})
}

func TestS1_53_ListReportsMalformedLogs(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		persist(t, e.store, header("good", ""), turnStart(t, 0, 1))
		writeFile(t, e.logPath("", "empty"), nil)
		writeFile(t, e.logPath("", "nonheader"), encodeLog(t, comp, `{"type":"event"}`))
		writeFile(t, e.logPath("", "badjson"), encodeLog(t, comp, `not json`))
		v4 := header("v4", "")
		v4.Version = 4
		writeFile(t, e.logPath("", "v4"), encodeLog(t, comp, headerLine(v4)))
		if comp == jsonl.CompressionNone {
			writeFile(t, e.logPath("", "noline"), []byte(headerLine(header("noline", ""))))
		} else {
			writeFile(t, e.logPath("", "noline"), zstdFrame(t, []byte(headerLine(header("noline", "")))))
		}
		// None of them is served as a session; each is a row with its
		// reason instead of being skipped (D23).
		list, err := e.newStore(nil).List(bg)
		require.NoError(t, err)
		headerless := "empty or header-less session log"
		if comp == jsonl.CompressionZstd {
			headerless = "empty or header-less Zstandard session log"
		}
		noline := headerless
		if comp == jsonl.CompressionZstd {
			noline = "corrupt Zstandard session log: first frame is not exactly one header line"
		}
		want := map[string]string{
			"badjson":   "corrupt session log: header line is not valid JSON",
			"empty":     headerless,
			"noline":    noline,
			"nonheader": "corrupt session log: first line is not a session header",
			"v4":        `session "v4" uses log format v4, but this harness reads only v3`,
		}
		var ids []string
		for _, r := range list {
			ids = append(ids, r.Header.ID)
			if r.Header.ID == "good" {
				require.Nil(t, r.Problem)
				continue
			}
			require.NotNil(t, r.Problem, r.Header.ID)
			require.Contains(t, r.Problem.Reason, want[r.Header.ID], r.Header.ID)
		}
		require.Equal(t, []string{"badjson", "empty", "good", "noline", "nonheader", "v4"}, ids)
	})
}

func TestS1_54_ListReadsLongHeader(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-54", "/w")
		var preset strings.Builder
		for i := 0; preset.Len() < 20000; i++ {
			sum := sha256Hex(fmt.Sprint(i))
			preset.WriteString(sum)
		}
		h.AgentPreset = preset.String()
		persist(t, e.store, h, turnStart(t, 0, 1))
		data := readFile(t, e.logPath(h.Cwd, h.ID))
		if comp == jsonl.CompressionZstd {
			require.Greater(t, splitZstdFrames(t, data)[0].end, 8<<10)
		} else {
			require.Greater(t, bytes.IndexByte(data, '\n'), 8<<10)
		}
		list, err := e.newStore(nil).List(bg)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, h, list[0].Header)
		snap, err := e.newStore(nil).Stat(bg, h.ID)
		require.NoError(t, err)
		require.Equal(t, h, snap.Header)
	})
}

func TestS1_55_HasFindsSessionInUnknownProject(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		persist(t, e.store, header("s1-55", "/some/unknown/project"), turnStart(t, 0, 1))
		fresh := e.newStore(nil)
		has, err := fresh.Has(bg, "s1-55")
		require.NoError(t, err)
		require.True(t, has)
		has, err = fresh.Has(bg, "absent")
		require.NoError(t, err)
		require.False(t, has)
	})
}

// resumeMarker appends what a resume stores after reading events: closers
// for an open turn, then the end-seed marker unless one is already last
// (FORMAT.md §5.5). It returns what it appended.
func resumeMarker(t *testing.T, hd *jsonl.Handle) []session.Event {
	t.Helper()
	events := readHandle(t, hd)
	closers, err := session.InterruptedTurnClosers(events)
	require.NoError(t, err)
	seed := append(append([]session.Event{}, events...), closers...)
	suffix := closers
	if marker, ok := session.EndSeedMarker(seed, false, session.EndSeedTime(seed, 42)); ok {
		suffix = append(suffix, marker)
	}
	require.NoError(t, hd.Append(bg, suffix))
	return suffix
}

func TestS1_56_ResumeAppendsAfterTheLoadedLog(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-56", "/w")
		seed := completedTurn(t, 0, 1)
		persist(t, e.store, h, seed...)

		hd := openWrite(t, e.newStore(nil), h.ID)
		require.Equal(t, seed, readHandle(t, hd))
		suffix := resumeMarker(t, hd)
		require.Equal(t, []string{wire.TypeEndSeed}, types(suffix))
		require.Equal(t, int64(6), suffix[0].Seq)
		turn := session.NextTurn(readHandle(t, hd))
		require.Equal(t, int64(2), turn)
		require.NoError(t, hd.Append(bg, completedTurn(t, hd.NextSeq(), turn)))
		require.NoError(t, hd.Close(bg))

		got := readAll(t, e.store, h.ID)
		require.Equal(t, upTo(13), seqs(got))
		require.Equal(t, seed, got[:6])
		require.Equal(t, wire.TypeEndSeed, got[6].Type)
		require.Equal(t, completedTurn(t, 7, 2), got[7:])
	})
}

func TestS1_57_CreateCollidingWithDiskLogLeavesItIntact(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-57", "/w")
		persist(t, e.store, h, completedTurn(t, 0, 1)...)
		before := treeSnapshot(t, e.root)
		_, err := e.newStore(nil).Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrAlreadyExists)
		require.EqualError(t, err, `session "s1-57" already exists`)
		require.Equal(t, before, treeSnapshot(t, e.root))
	})
}

func TestS1_58_ClosedHandleAndIDCannotBeReused(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-58", "/w")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		require.NoError(t, hd.Close(bg))
		require.NoError(t, hd.Close(bg)) // idempotent

		err := hd.Append(bg, completedTurn(t, 6, 2))
		requireCode(t, err, wire.ErrHandleClosed)
		require.EqualError(t, err, `session "s1-58": append on a closed handle`)
		err = e.newStore(nil).Attach(hd.Ref()).Append(bg, completedTurn(t, 6, 2))
		requireCode(t, err, wire.ErrHandleClosed)
		_, err = hd.Read(bg, 0, -1)
		require.EqualError(t, err, `session "s1-58": read on a closed handle`)
		require.EqualError(t, hd.Flush(bg), `session "s1-58": flush on a closed handle`)

		_, err = e.newStore(nil).Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrAlreadyExists)
		// A closed handle id is never usable again, even to open.
		_, err = e.store.Open(bg, h.ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: hd.Ref().HandleID})
		requireCode(t, err, wire.ErrHandleRevoked)
		require.Equal(t, upTo(6), seqs(readAll(t, e.store, h.ID)))
	})
}

func TestS1_59_RetriedCreateClaimsThePendingSession(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-59", "/w")
		opts := jsonl.CreateOptions{HandleID: newHandleID(), Owner: jsonl.Owner{WorkflowID: "session/s1-59", RunID: "r"}}
		_, err := e.store.Create(bg, h, opts)
		require.NoError(t, err)

		// The create activity ran again on another worker.
		hd, err := e.newStore(nil).Create(bg, h, opts)
		require.NoError(t, err)
		require.Equal(t, int64(0), hd.NextSeq())
		events := []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}
		require.NoError(t, hd.Append(bg, events))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, events, readAll(t, e.store, h.ID))
	})
}

func TestS1_60_FreshSessionCannotTakeOverAStoredLog(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-60", "/w")
		persist(t, e.store, h, completedTurn(t, 0, 1)...)
		preview, err := e.store.Open(bg, h.ID, jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		require.Len(t, readHandle(t, preview), 6)
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		_, err = e.store.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrAlreadyExists)
		// A read handle does not own the session; a writer that starts from
		// an empty log (seq 0) is refused.
		hd := openWrite(t, e.store, h.ID)
		err = hd.Append(bg, []session.Event{ev(t, wire.TypeTurnStart, 0, `{"turn":1}`), ev(t, wire.TypeTurnEnd, 1, `{"turn":1,"reason":{"kind":"aborted"}}`)})
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "s1-60": expected 6 at index 0, got 0`)
		require.NoError(t, hd.Close(bg))
		require.Equal(t, before, readFile(t, path))
		require.Len(t, readHandle(t, preview), 6)
		require.NoError(t, preview.Close(bg))
	})
}

func TestS1_61_SeedEqualToStoredPrefixIsAccepted(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-61", "/w")
		seed := completedTurn(t, 0, 1)
		persist(t, e.store, h, seed...)
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		hd := openWrite(t, e.newStore(nil), h.ID)
		require.NoError(t, hd.Append(bg, seed))
		require.NoError(t, hd.Append(bg, seed[2:4]))
		require.Equal(t, int64(6), hd.NextSeq())
		require.NoError(t, hd.Close(bg))
		require.Equal(t, before, readFile(t, path))
	})
}

func TestS1_62_OnlyTheSuffixBeyondThePrefixIsAppended(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-62", "/w")
		prefix := completedTurn(t, 0, 1)
		persist(t, e.store, h, prefix...)
		seed := append(append([]session.Event{}, prefix...), turnStart(t, 6, 2), userMessage(t, 7, "more"))

		hd := openWrite(t, e.store, h.ID)
		// The whole seed overlaps the stored prefix: the caller sends only
		// what the log lacks.
		requireCode(t, hd.Append(bg, seed), wire.ErrSeqMismatch)
		require.NoError(t, hd.Append(bg, seed[hd.NextSeq():]))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, seed, readAll(t, e.store, h.ID))
	})
}

func TestS1_63_PendingSessionPersistsTheWholeSeed(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-63", "/w")
		hd := create(t, e.store, h)
		seed := completedTurn(t, 0, 1)
		att := e.newStore(nil).Attach(hd.Ref())
		require.NoError(t, att.Append(bg, seed))
		require.NoError(t, att.Close(bg))
		require.Equal(t, seed, readAll(t, e.store, h.ID))
	})
}

func TestS1_64_SameSeqTypeTimeDifferentPayloadRejected(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-64", "/w")
		seed := completedTurn(t, 0, 1)
		persist(t, e.store, h, seed...)
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		other := completedTurn(t, 0, 1)
		other[3] = assistantMessage(t, 3, 1, 1, "a different answer")
		require.Equal(t, seed[3].Seq, other[3].Seq)
		require.Equal(t, seed[3].Type, other[3].Type)
		require.Equal(t, seed[3].Time, other[3].Time)
		hd := openWrite(t, e.store, h.ID)
		requireCode(t, hd.Append(bg, other), wire.ErrSeqMismatch)
		require.NoError(t, hd.Close(bg))
		require.Equal(t, before, readFile(t, path))
	})
}

func TestS1_65_SecondWriterRejected(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-65", "/w")
		persist(t, e.store, h, completedTurn(t, 0, 1)...)
		hd := openWrite(t, e.store, h.ID)
		for _, st := range []*jsonl.Store{e.store, e.newStore(nil)} {
			_, err := st.Open(bg, h.ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
			requireCode(t, err, wire.ErrAlreadyOwned)
			require.EqualError(t, err, `session "s1-65" is already owned by an active write handle`)
			_, err = st.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
			requireCode(t, err, wire.ErrAlreadyExists)
		}
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_66_ParentSessionRoundTrips(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-66", "/w")
		h.ParentSession = "parent-1"
		persist(t, e.store, h, turnStart(t, 0, 1))
		records := logRecords(t, comp, readFile(t, e.logPath(h.Cwd, h.ID)))
		require.Equal(t, `{"type":"session","version":3,"id":"s1-66","createdAt":5,"cwd":"/w","parentSession":"parent-1","isSeeded":false,"delegationDepth":0}`+"\n", records[0])

		fresh := e.newStore(nil)
		rd, err := fresh.Open(bg, h.ID, jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		require.Equal(t, "parent-1", rd.Header().ParentSession)
		require.NoError(t, rd.Close(bg))
		snap, err := fresh.Stat(bg, h.ID)
		require.NoError(t, err)
		require.Equal(t, h, snap.Header)
	})
}

func TestS1_67_HandWrittenLogWithoutSidecar(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-67", "/w")
		events := completedTurn(t, 0, 1)
		e.writeLog(h, lines(t, events...))
		fresh := e.newStore(nil)
		require.Equal(t, events, readAll(t, fresh, h.ID))
		sum, ok, err := fresh.ReadSummary(bg, h.ID)
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, jsonl.Summary{UpdatedAt: 5}, sum)
	})
}

func TestS1_68_AbsentRoot(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		list, err := e.store.List(bg)
		require.NoError(t, err)
		require.Empty(t, list)
		has, err := e.store.Has(bg, "x")
		require.NoError(t, err)
		require.False(t, has)
		snap, err := e.store.Stat(bg, "x")
		require.NoError(t, err)
		require.Nil(t, snap)
		_, err = e.store.Open(bg, "x", jsonl.AccessRead, jsonl.OpenOptions{})
		requireCode(t, err, wire.ErrNotFound)
		noSuchFile(t, e.root)
	})
}

func TestS1_69_RootIsARegularFile(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		root := filepath.Join(t.TempDir(), "root")
		writeFile(t, root, []byte("not a directory"))
		_, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: comp})
		require.ErrorIs(t, err, syscall.ENOTDIR)
		require.Equal(t, []byte("not a directory"), readFile(t, root))
	})
}

func TestS1_70_ProjectPathIsARegularFile(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		writeFile(t, filepath.Join(e.root, "--w--"), []byte("file"))
		before := treeSnapshot(t, e.root)
		_, err := e.store.Has(bg, "s1-70")
		require.ErrorIs(t, err, syscall.ENOTDIR)
		_, err = e.store.Create(bg, header("s1-70", "/w"), jsonl.CreateOptions{HandleID: newHandleID()})
		require.ErrorIs(t, err, syscall.ENOTDIR)
		_, err = e.store.Open(bg, "s1-70", jsonl.AccessRead, jsonl.OpenOptions{})
		require.ErrorIs(t, err, syscall.ENOTDIR)
		require.NotErrorIs(t, err, wire.ErrNotFound)
		require.Equal(t, before, treeSnapshot(t, e.root))
	})
}

func TestS1_71_FreshStoreRepairsAndContinues(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-71", "/w")
		path := e.writeLog(h, lines(t, completedTurn(t, 0, 1)...))
		appendFile(t, path, tornTail(t, comp, `{"type":"turn/start","seq":6,`, turnStart(t, 6, 2)))

		hd := openWrite(t, e.newStore(nil), h.ID)
		require.Equal(t, int64(6), hd.NextSeq())
		next := []session.Event{turnStart(t, 6, 2), userMessage(t, 7, "again")}
		require.NoError(t, hd.Append(bg, next))
		require.NoError(t, hd.Close(bg))
		require.Equal(t, append(completedTurn(t, 0, 1), next...), readAll(t, e.store, h.ID))
		requireSameLog(t, comp, encodeLog(t, comp, headerLine(h), lines(t, completedTurn(t, 0, 1)...), lines(t, next...)), readFile(t, path))
		require.Equal(t, []string{`session-persistence-jsonl: session "s1-71" recovered from a torn tail; incomplete tail bytes were discarded`}, e.logs.warnings())
	})
}

func TestS1_72_HeaderAndTurnStartOnly(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-72", "/w")
		e.writeLog(h, lines(t, turnStart(t, 0, 1)))
		require.Equal(t, []session.Event{turnStart(t, 0, 1)}, readAll(t, e.store, h.ID))
	})
}

func TestS1_73_RetriedCreateAndAppendAreIdempotent(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-73", "/w")
		opts := jsonl.CreateOptions{HandleID: newHandleID()}
		first, err := e.store.Create(bg, h, opts)
		require.NoError(t, err)
		again, err := e.store.Create(bg, h, opts)
		require.NoError(t, err)
		require.Equal(t, first.Ref(), again.Ref())

		events := []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}
		require.NoError(t, first.Append(bg, events))
		require.NoError(t, again.Append(bg, events))
		// A retried append from another process stores nothing new either.
		require.NoError(t, e.newStore(nil).Attach(first.Ref()).Append(bg, events))
		// Once materialized, a create retry in another process finds the log;
		// the workflow continues with the handle it already has.
		_, err = e.newStore(nil).Create(bg, h, opts)
		requireCode(t, err, wire.ErrAlreadyExists)
		require.NoError(t, first.Close(bg))
		require.Equal(t, events, readAll(t, e.store, h.ID))
	})
}

func TestS1_74_FlushRightAfterCreate(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-74", "/w")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Flush(bg))
		require.True(t, hd.Materialized())
		path := e.logPath(h.Cwd, h.ID)
		requireSameLog(t, comp, encodeLog(t, comp, headerLine(h)), readFile(t, path))
		require.Empty(t, readAll(t, e.newStore(nil), h.ID))

		events := []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}
		require.NoError(t, hd.Append(bg, events))
		require.NoError(t, hd.Flush(bg))
		require.NoError(t, hd.Close(bg))
		requireSameLog(t, comp, encodeLog(t, comp, headerLine(h), lines(t, events...)), readFile(t, path))
		require.Equal(t, events, readAll(t, e.store, h.ID))
	})
}

func TestS1_75_CreatePendingIDAgain(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-75", "/w")
		hd := create(t, e.store, h)
		_, err := e.store.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrAlreadyExists)
		require.EqualError(t, err, `session "s1-75" already exists`)
		require.NoError(t, hd.Close(bg))
	})
}

func TestS1_76_CreateIDOnDiskFromFreshStore(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-76", "/w")
		persist(t, e.store, h, turnStart(t, 0, 1))
		_, err := e.newStore(nil).Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrAlreadyExists)
		require.EqualError(t, err, `session "s1-76" already exists`)
	})
}

func TestS1_77_CreateIDOnDiskInAnotherProject(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		persist(t, e.store, header("s1-77", "/a"), turnStart(t, 0, 1))
		before := treeSnapshot(t, e.root)
		_, err := e.newStore(nil).Create(bg, header("s1-77", "/b"), jsonl.CreateOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrAlreadyExists)
		require.EqualError(t, err, `session "s1-77" already exists`)
		require.Equal(t, before, treeSnapshot(t, e.root))
	})
}

func TestS1_78_FailedMaterializationKeepsCursorRetryStores(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		for _, fault := range []faultfs.Rule{
			{Index: -1, Op: faultfs.OpLink, PathContains: generationName(comp), Err: syscall.ENOSPC, Times: 1},
			{Index: -1, Op: faultfs.OpWrite, PathContains: ".tmp", Err: syscall.ENOSPC, Times: 1},
		} {
			t.Run(string(fault.Op), func(t *testing.T) {
				ffs := faultfs.New(nil)
				e := newEnv(t, comp, ffs)
				h := header("s1-78", "/w")
				hd := create(t, e.store, h)
				ffs.Add(fault)
				events := []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}
				err := hd.Append(bg, events)
				require.ErrorIs(t, err, syscall.ENOSPC)
				require.False(t, hd.Materialized())
				require.Equal(t, int64(0), hd.NextSeq())
				require.Equal(t, []string{filepath.Join("--w--", "s1-78", "session.lock")}, filesUnder(t, e.root))

				require.NoError(t, hd.Append(bg, events))
				require.NoError(t, hd.Close(bg))
				require.Equal(t, events, readAll(t, e.store, h.ID))
			})
		}
		t.Run("flush", func(t *testing.T) {
			ffs := faultfs.New(nil)
			e := newEnv(t, comp, ffs)
			h := header("s1-78", "/w")
			hd := create(t, e.store, h)
			ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpLink, PathContains: generationName(comp), Err: syscall.ENOSPC, Times: 1})
			require.ErrorIs(t, hd.Flush(bg), syscall.ENOSPC)
			require.False(t, hd.Materialized())
			require.NoError(t, hd.Flush(bg))
			events := []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}
			require.NoError(t, hd.Append(bg, events))
			require.NoError(t, hd.Close(bg))
			require.Equal(t, events, readAll(t, e.store, h.ID))
		})
	})
}

func TestS1_79_NonLosslessBatchMaterializesNothing(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-79", "/w")
		hd := create(t, e.store, h)
		before := treeSnapshot(t, e.root)
		for _, v := range losslessViolations {
			bad := session.Event{Type: wire.TypeUserMessage, Seq: 0, Time: 1, Data: json.RawMessage(v.data), SurfaceOp: session.AppendOp()}
			err := hd.Append(bg, []session.Event{bad})
			require.ErrorIs(t, err, session.ErrBatchNotLossless, v.name)
			require.ErrorContains(t, err, "non-JSON-serializable", v.name)
		}
		require.False(t, hd.Materialized())
		require.Equal(t, before, treeSnapshot(t, e.root))
		require.NoError(t, hd.Close(bg))
		noSuchFile(t, sessionDir(t, e.root, h.Cwd, h.ID))
	})
}

func TestS1_80_PlainJSONValuesAccepted(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-80", "/w")
		hd := create(t, e.store, h)
		var events []session.Event
		for i, extra := range []string{
			`null`, `true`, `false`, `[[1,[2,{"a":[]}]],{}]`,
			`{"a":{"b":{"c":[null,true,"x",1.5,-2,0,1e300,"\u0000"]}}}`,
			`{"shared":[1,2],"again":[1,2]}`,
		} {
			events = append(events, surface(t, wire.TypeUserMessage, int64(i), `{"role":"user","content":[],"extra":`+extra+`}`))
		}
		require.NoError(t, hd.Append(bg, events))
		require.True(t, hd.Materialized())
		require.NoError(t, hd.Close(bg))
		got := readAll(t, e.newStore(nil), h.ID)
		require.Equal(t, events, got)
		require.Equal(t, `{"role":"user","content":[],"extra":{"a":{"b":{"c":[null,true,"x",1.5,-2,0,1e300,"\u0000"]}}}}`, string(got[4].Data))
	})
}

func TestS1_81_NonLosslessGoValueRejectedAtTheSource(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s1-81", "/w")
		hd := create(t, e.store, h)
		negZero := math.Copysign(0, -1)
		for name, v := range map[string]any{
			"Infinity":      map[string]any{"x": math.Inf(1)},
			"NaN":           map[string]any{"x": math.NaN()},
			"negative zero": map[string]any{"x": negZero},
			"function":      map[string]any{"x": func() {}},
			"channel":       map[string]any{"x": make(chan int)},
			"complex":       map[string]any{"x": complex(1, 2)},
		} {
			_, err := session.NewEvent(wire.TypeUserMessage, 0, 1, v)
			require.ErrorIs(t, err, session.ErrNotLossless, name)
			_, err = session.MarshalData(v)
			require.ErrorIs(t, err, session.ErrNotLossless, name)
		}
		require.False(t, hd.Materialized())
		require.Empty(t, logFilesUnder(t, e.root))
		require.NoError(t, hd.Close(bg))
	})
}

// ---------------------------------------------------------------------------
// Store-level cases of seed 000 (S0, docs/CONFORMANCE.md)

// fixture is the "persisted session" of the S0 cases: one completed turn.
func fixture(t *testing.T) []session.Event {
	return []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}
}

func TestS0_07_WriteOpenWhileOwnedThenAfterClose(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s0-07", "/w")
		persist(t, e.store, h, fixture(t)...)
		live := openWrite(t, e.store, h.ID)

		for _, st := range []*jsonl.Store{e.store, e.newStore(nil)} {
			_, err := st.Open(bg, h.ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
			requireCode(t, err, wire.ErrAlreadyOwned)
			require.EqualError(t, err, `session "s0-07" is already owned by an active write handle`)
			require.Equal(t, jsonl.Code("SessionAlreadyOwned"), jsonl.ErrorCode(err))
		}
		lease, err := e.store.LeaseOf(bg, h.ID)
		require.NoError(t, err)
		require.Equal(t, live.Ref().HandleID, lease.HandleID, "a refused open leaves the lease alone")

		require.NoError(t, live.Append(bg, []session.Event{turnStart(t, 2, 2), turnEnd(t, 3, 2)}))
		require.NoError(t, live.Close(bg))
		next := openWrite(t, e.newStore(nil), h.ID)
		require.Equal(t, jsonl.AccessWrite, next.Access())
		require.Equal(t, int64(4), next.NextSeq())
		require.NoError(t, next.Close(bg))

		// A created, never-materialized session is owned by its creator too.
		pending := create(t, e.store, header("s0-07-pending", ""))
		_, err = e.newStore(nil).Open(bg, "s0-07-pending", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrAlreadyOwned)
		require.NoError(t, pending.Close(bg))
	})
}

func TestS0_16_OwnedOpenTurnCannotBeRepairedConcurrently(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s0-16", "/w")
		live := create(t, e.store, h)
		require.NoError(t, live.Append(bg, []session.Event{turnStart(t, 0, 1)}))
		require.NoError(t, live.Flush(bg))

		_, err := e.newStore(nil).Open(bg, h.ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrAlreadyOwned)
		require.ErrorContains(t, err, "already owned by an active write handle")

		require.NoError(t, live.Append(bg, []session.Event{turnEnd(t, 1, 1)}))
		require.NoError(t, live.Close(bg))
		got := readAll(t, e.store, h.ID)
		require.Equal(t, []string{wire.TypeTurnStart, wire.TypeTurnEnd}, types(got))
		te, err := got[1].TurnEnd()
		require.NoError(t, err)
		require.Equal(t, "completed", string(te.Reason.Kind))
	})
}

func TestS0_17_ReadHasNoClosersRepairStoresThem(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s0-17", "/w")
		persist(t, e.store, h, turnStart(t, 0, 1))

		require.Equal(t, []string{wire.TypeTurnStart}, types(readAll(t, e.store, h.ID)))

		hd := openWrite(t, e.newStore(nil), h.ID)
		require.Equal(t, []string{wire.TypeTurnStart}, types(readHandle(t, hd)))
		suffix := resumeMarker(t, hd)
		require.Equal(t, []string{wire.TypeTurnEnd, wire.TypeEndSeed}, types(suffix))
		require.NoError(t, hd.Close(bg))

		got := readAll(t, e.store, h.ID)
		require.Equal(t, []string{wire.TypeTurnStart, wire.TypeTurnEnd, wire.TypeEndSeed}, types(got))
		require.Equal(t, upTo(3), seqs(got))
		te, err := got[1].TurnEnd()
		require.NoError(t, err)
		require.Equal(t, "interrupted", string(te.Reason.Kind))
		require.Equal(t, int64(1), te.Turn)
		require.Equal(t, got[0].Time, got[1].Time, "closers copy the last event's time")
		es, err := got[2].EndSeed()
		require.NoError(t, err)
		require.False(t, es.Inherited)
		if comp == jsonl.CompressionZstd {
			// Header, the stored turn/start, then closers + marker as one frame.
			require.Len(t, logRecords(t, comp, readFile(t, e.logPath(h.Cwd, h.ID))), 3)
		}
	})
}

func TestS0_18_RecordedToolCallGetsOutcomeUnknown(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s0-18", "/w")
		stored := []session.Event{turnStart(t, 0, 1), stepStart(t, 1, 1, 1), assistantToolCall(t, 2, 1, 1, "call-1"), toolCall(t, 3, 1, 1, "call-1")}
		persist(t, e.store, h, stored...)

		hd := openWrite(t, e.store, h.ID)
		resumeMarker(t, hd)
		require.NoError(t, hd.Close(bg))

		got := readAll(t, e.newStore(nil), h.ID)
		require.Equal(t, upTo(8), seqs(got))
		require.Equal(t, stored, got[:4])
		require.Equal(t, []string{wire.TypeToolResult, wire.TypeStepEnd, wire.TypeTurnEnd, wire.TypeEndSeed}, types(got[4:]))

		result := got[4]
		require.Equal(t, []int64{3}, result.SourceEventSeqs)
		require.Equal(t, session.AppendOp(), result.SurfaceOp)
		tr, err := result.ToolResult()
		require.NoError(t, err)
		require.Equal(t, int64(1), tr.Turn)
		require.Equal(t, int64(1), tr.Step)
		require.Equal(t, &wire.ToolError{Name: "ToolOutcomeUnknownError", Code: "TOOL_OUTCOME_UNKNOWN"}, tr.Error)
		require.Equal(t, "interrupted-tool-result-call-1-4", tr.Message.ID)
		require.Equal(t, wire.ToolResultSource{Kind: "tool", CallID: "call-1"}, tr.Message.Source)
		require.Len(t, tr.Message.Content, 1)
		require.True(t, tr.Message.Content[0].IsError)
		require.Equal(t, "call-1", tr.Message.Content[0].ToolCallID)
		require.Equal(t, []wire.TextContent{{Type: "text", Text: "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."}}, tr.Message.Content[0].Content)

		se, err := got[5].StepEnd()
		require.NoError(t, err)
		require.Equal(t, wire.StepEnd{Turn: 1, Step: 1}, se)
		te, err := got[6].TurnEnd()
		require.NoError(t, err)
		require.Equal(t, "interrupted", string(te.Reason.Kind))
		for _, c := range got[4:] {
			require.Equal(t, stored[3].Time, c.Time)
		}
	})
}

func TestS0_19_TornFragmentCutClosersLandWithoutGap(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		e := newEnv(t, jsonl.CompressionNone, nil)
		h := header("s0-19", "")
		path := e.writeLog(h, lines(t, turnStart(t, 0, 1)))
		appendFile(t, path, []byte(`{"type":"assistant/chunk","seq":1,"ti`))
		require.Equal(t, []string{filepath.Join("_no-cwd", "s0-19", "session.v3.jsonl")}, logFilesUnder(t, e.root))

		hd := openWrite(t, e.store, h.ID)
		require.Equal(t, int64(1), hd.NextSeq())
		suffix := resumeMarker(t, hd)
		require.Equal(t, []int64{1, 2}, seqs(suffix))
		require.NoError(t, hd.Close(bg))

		got := readAll(t, e.newStore(nil), h.ID)
		require.Equal(t, []string{wire.TypeTurnStart, wire.TypeTurnEnd, wire.TypeEndSeed}, types(got))
		require.Equal(t, upTo(3), seqs(got))
		want := headerLine(h) + "\n" + strings.Join(lines(t, append([]session.Event{turnStart(t, 0, 1)}, suffix...)...), "\n") + "\n"
		require.Equal(t, want, string(readFile(t, path)), "fragment cut, closers right after the last valid record")
		require.Equal(t, []string{filepath.Join("_no-cwd", "s0-19", "session.v3.jsonl")}, logFilesUnder(t, e.root))
		require.Equal(t, []string{`session-persistence-jsonl: session "s0-19" recovered from a torn tail; incomplete tail bytes were discarded`}, e.logs.warnings())
	})
	t.Run("zstd", func(t *testing.T) {
		e := newEnv(t, jsonl.CompressionZstd, nil)
		h := header("s0-19", "")
		path := e.writeLog(h, lines(t, turnStart(t, 0, 1)))
		committed := readFile(t, path)
		appendFile(t, path, tornTail(t, jsonl.CompressionZstd, "", stepStart(t, 1, 1, 1)))

		hd := openWrite(t, e.store, h.ID)
		require.Equal(t, int64(1), hd.NextSeq())
		suffix := resumeMarker(t, hd)
		require.NoError(t, hd.Close(bg))
		data := readFile(t, path)
		require.True(t, bytes.HasPrefix(data, committed))
		require.Equal(t, []string{strings.Join(lines(t, suffix...), "\n") + "\n"}, logRecords(t, jsonl.CompressionZstd, data[len(committed):]))
		require.Equal(t, upTo(3), seqs(readAll(t, e.newStore(nil), h.ID)))
	})
}

func TestS0_24_SecondRepairAppendsNothing(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("s0-24", "/w")
		persist(t, e.store, h, fixture(t)...)

		first := openWrite(t, e.store, h.ID)
		require.Equal(t, []string{wire.TypeEndSeed}, types(resumeMarker(t, first)))
		require.NoError(t, first.Close(bg))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		second := openWrite(t, e.newStore(nil), h.ID)
		require.Equal(t, []string{wire.TypeTurnStart, wire.TypeTurnEnd, wire.TypeEndSeed}, types(readHandle(t, second)))
		require.Empty(t, resumeMarker(t, second))
		require.NoError(t, second.Close(bg))
		require.Equal(t, before, readFile(t, path))
		require.Equal(t, upTo(3), seqs(readAll(t, e.store, h.ID)))
	})
}

func TestS0_31_ForkHeaderAndInheritedCountRoundTrip(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := wire.Header{Version: 3, ID: "s0-31", CreatedAt: 5, Cwd: "/w", ParentSession: "parent-sess", IsSeeded: true, DelegationDepth: 1}

		_, err := e.store.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID()})
		requireCode(t, err, wire.ErrInvalidArgument)
		require.EqualError(t, err, "seeded session header requires an inherited event count")
		unseeded := h
		unseeded.IsSeeded = false
		_, err = e.store.Create(bg, unseeded, jsonl.CreateOptions{HandleID: newHandleID(), InheritedEventCount: 2})
		requireCode(t, err, wire.ErrInvalidArgument)
		require.EqualError(t, err, "unseeded session header inherited event count must be 0")

		hd, err := e.store.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID(), InheritedEventCount: 2})
		require.NoError(t, err)
		require.Equal(t, int64(2), hd.InheritedEventCount())
		seed := fixture(t)
		marker, ok := session.EndSeedMarker(seed, true, session.EndSeedTime(seed, 0))
		require.True(t, ok)
		require.Equal(t, int64(2), marker.Seq)
		require.NoError(t, hd.Append(bg, append(seed, marker)))
		require.NoError(t, hd.Close(bg))

		// Resume: the stored log ends with the tagged marker, so no new one;
		// the count comes from the marker, not from the resume seed length.
		w := openWrite(t, e.newStore(nil), h.ID)
		require.Equal(t, h, w.Header())
		require.Equal(t, int64(2), w.InheritedEventCount())
		require.Empty(t, resumeMarker(t, w))
		require.NoError(t, w.Append(bg, []session.Event{turnStart(t, 3, 2), turnEnd(t, 4, 2)}))
		require.NoError(t, w.Close(bg))

		rd, err := e.newStore(nil).Open(bg, h.ID, jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		got := rd.Header()
		require.Equal(t, "parent-sess", got.ParentSession)
		require.Equal(t, "/w", got.Cwd)
		require.True(t, got.IsSeeded)
		require.Equal(t, int64(1), got.DelegationDepth)
		require.Equal(t, int64(2), rd.InheritedEventCount())
		require.Len(t, readHandle(t, rd), 5)
		require.NoError(t, rd.Close(bg))
		count, err := session.InheritedEventCount(readAll(t, e.store, h.ID))
		require.NoError(t, err)
		require.Equal(t, int64(2), count)
	})
}

// ---------------------------------------------------------------------------
// Test vectors (docs/CONFORMANCE.md): a v3 log built by hand from FORMAT.md §1-§4 loads
// with the exact events, and the store writes the same bytes.

const vectorPath = "testdata/reference-v3.jsonl"

// vectorHeader is the header of the vector.
var vectorHeader = wire.Header{Version: 3, ID: "vector-1", CreatedAt: 1760000000000, Cwd: "/work/agent-harness", ParentSession: "parent-0", Origin: "subagent", DelegationDepth: 1, AgentPreset: "coder"}

// vectorEvents are the events of the vector, written out independently of
// the file.
func vectorEvents() []session.Event {
	raw := func(typ string, seq, time int64, data string) session.Event {
		return session.Event{Type: typ, Seq: seq, Time: time, Data: json.RawMessage(data)}
	}
	userMsg := raw("user/message", 1, 1760000000101, `{"id":"msg-1","role":"user","content":[{"type":"text","text":"Read a.txt <now> & tell me `+"\u2014 \u201cquoted\u201d"+` \"esc\" \\ \u0001 tab\t line`+"\u2028"+`sep `+"\U0001F600"+`"}],"source":{"kind":"user"}}`)
	userMsg.SurfaceOp = session.AppendOp()
	assistant := raw("assistant/message", 3, 1760000000110, `{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool-call","id":"call-1","name":"read_file","arguments":{"path":"a.txt"}}]},"stream":[{"type":"text-chunks","time0":1760000000103,"index":0,"dt":[0,3],"texts":["Let me"," look."]},{"type":"chunk","time":1760000000109,"chunk":{"type":"tool-call","id":"call-1"}}],"usage":{"inputTokens":12,"outputTokens":7}}`)
	assistant.SurfaceOp = session.AppendOp()
	result := raw("tool/result", 5, 1760000000112, `{"turn":1,"step":1,"message":{"id":"tool-result-call-1","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","isError":true,"content":[{"type":"text","text":"ENOENT: no such file or directory, open 'a.txt'"}]}]},"error":{"name":"ToolExecutionError","code":"ENOENT","reason":"missing"}}`)
	result.SurfaceOp = session.AppendOp()
	result.SourceEventSeqs = []int64{4}
	metrics := raw("plugin/metrics", 10, 1760000000201, `{"tokens":19,"ratio":0.5,"big":1e+21,"tiny":5e-324}`)
	metrics.Ignorable = true
	summary := raw("user/message", 11, 1760000000202, `{"id":"summary-1","role":"user","content":[{"type":"text","text":"Summary of turn 1"}],"source":{"kind":"compaction"}}`)
	summary.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: 1, EndSeq: 9}
	summary.SourceEventSeqs = []int64{1, 9}
	return []session.Event{
		raw("turn/start", 0, 1760000000100, `{"turn":1}`),
		userMsg,
		raw("step/start", 2, 1760000000102, `{"turn":1,"step":1}`),
		assistant,
		raw("tool/call", 4, 1760000000111, `{"turn":1,"step":1,"callId":"call-1","name":"read_file","arguments":"{\"path\":\"a.txt\"}"}`),
		result,
		raw("step/end", 6, 1760000000113, `{"turn":1,"step":1}`),
		raw("turn/end", 7, 1760000000114, `{"turn":1,"reason":{"kind":"completed"}}`),
		raw("session/end-seed", 8, 1760000000114, `{}`),
		raw("agent/inbox/spliced", 9, 1760000000200, `{"target":"next-step","start":0,"inserted":[{"id":"msg-2","role":"user","content":[{"type":"text","text":"also b.txt"}],"source":{"kind":"inject"}}]}`),
		metrics,
		summary,
	}
}

// vectorBatches splits the vector's events into the append batches used
// for its zstd form (one frame each).
func vectorBatches(events []session.Event) [][]session.Event {
	return [][]session.Event{events[:8], events[8:9], events[9:]}
}

func TestVector_ReferenceLogLoads(t *testing.T) {
	text := readFile(t, vectorPath)
	all := strings.SplitAfter(string(text), "\n")
	require.Equal(t, "", all[len(all)-1])
	hdr, eventLines := strings.TrimSuffix(all[0], "\n"), all[1:len(all)-1]
	require.Equal(t, headerLine(vectorHeader), hdr)

	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		var batches [][]string
		for _, b := range vectorBatches(vectorEvents()) {
			n := len(batches)
			start := 0
			for _, prev := range batches[:n] {
				start += len(prev)
			}
			var ls []string
			for _, l := range eventLines[start : start+len(b)] {
				ls = append(ls, strings.TrimSuffix(l, "\n"))
			}
			batches = append(batches, ls)
		}
		path := e.logPath(vectorHeader.Cwd, vectorHeader.ID)
		require.Equal(t, filepath.Join(e.root, "--work-agent-harness--", "vector-1", generationName(comp)), path)
		writeFile(t, path, encodeLog(t, comp, hdr, batches...))
		if comp == jsonl.CompressionNone {
			require.Equal(t, text, readFile(t, path))
		}

		rd, err := e.store.Open(bg, vectorHeader.ID, jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err)
		require.Equal(t, vectorHeader, rd.Header())
		require.Equal(t, int64(0), rd.InheritedEventCount())
		require.Equal(t, vectorEvents(), readHandle(t, rd))
		require.NoError(t, rd.Close(bg))

		// A write open accepts it too and continues at seq 12.
		w := openWrite(t, e.store, vectorHeader.ID)
		require.Equal(t, int64(12), w.NextSeq())
		require.NoError(t, w.Close(bg))
		snap, err := e.store.Stat(bg, vectorHeader.ID)
		require.NoError(t, err)
		require.Equal(t, vectorHeader, snap.Header)
	})
}

func TestVector_StoreWritesTheReferenceBytes(t *testing.T) {
	text := readFile(t, vectorPath)
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		hd := create(t, e.store, vectorHeader)
		for _, b := range vectorBatches(vectorEvents()) {
			require.NoError(t, hd.Append(bg, b))
		}
		require.NoError(t, hd.Close(bg))
		data := readFile(t, e.logPath(vectorHeader.Cwd, vectorHeader.ID))
		require.Equal(t, string(text), logText(t, comp, data))
		if comp == jsonl.CompressionZstd {
			require.Len(t, logRecords(t, comp, data), 4, "one header frame and one frame per batch")
		}
	})
}

// jsonKeys returns the top-level keys of a JSON object line, in order.
func jsonKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

func TestVector_StoreLineLayout(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := wire.Header{Version: 3, ID: "layout", CreatedAt: 7, Cwd: "/w", ParentSession: "p", IsSeeded: true, Origin: "subagent", DelegationDepth: 2, AgentPreset: "x"}
		hd, err := e.store.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID(), InheritedEventCount: 1})
		require.NoError(t, err)
		events := vectorEvents()[:8]
		marker, ok := session.EndSeedMarker(events[:1], true, events[0].Time)
		require.True(t, ok)
		batch := append([]session.Event{events[0], marker}, session.CloneEvents(events[1:])...)
		for i := range batch {
			batch[i].Seq = int64(i)
		}
		batch[6].SourceEventSeqs = []int64{5}
		require.NoError(t, hd.Append(bg, batch))
		require.NoError(t, hd.Close(bg))

		text := logText(t, comp, readFile(t, e.logPath(h.Cwd, h.ID)))
		require.True(t, strings.HasSuffix(text, "\n"))
		ls := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		require.Len(t, ls, 1+len(batch), "one record per line")
		require.Equal(t, []string{"type", "version", "id", "createdAt", "cwd", "parentSession", "isSeeded", "origin", "delegationDepth", "agentPreset"}, jsonKeys(t, ls[0]))
		require.Equal(t, []string{"type", "version", "id", "createdAt", "isSeeded", "delegationDepth"}, jsonKeys(t, headerLine(header("x", ""))))
		for i, l := range ls[1:] {
			keys := jsonKeys(t, l)
			require.Equal(t, []string{"type", "seq", "time", "data"}, keys[:4], "line %d", i+1)
			require.Equal(t, line(t, batch[i]), l)
		}
		require.Equal(t, []string{"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"}, jsonKeys(t, ls[7]))
	})
}
