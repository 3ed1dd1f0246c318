package jsonl_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// durID and durCwd name the session the durability tests (crash, fault,
// race) write.
const (
	durID  = "dur-session"
	durCwd = "/work/durability"
)

// durHeader is the header of the durability tests' session.
func durHeader() wire.Header {
	return wire.Header{Version: wire.FormatVersion, ID: durID, CreatedAt: 1_700_000_000_000, Cwd: durCwd}
}

// durQuiet is a logger that drops the store's torn-tail warnings.
var durQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// durNoSyncFS is the OS filesystem with fsync turned into a no-op. Tests
// that simulate crashes by cutting files themselves use it to stay fast;
// it changes nothing the store can observe.
type durNoSyncFS struct{ jsonl.OSFS }

type durNoSyncFile struct{ jsonl.File }

// Sync does nothing.
func (durNoSyncFile) Sync() error { return nil }

// OpenFile opens a file whose Sync does nothing.
func (fsys durNoSyncFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	f, err := fsys.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return durNoSyncFile{f}, nil
}

// durScratchDir returns an empty directory for tests that create and delete
// thousands of files: in memory (/dev/shm) when the system has one, else
// the test's temp dir.
func durScratchDir(tb testing.TB) string {
	tb.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "sessionflow-test-"); err == nil {
			tb.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return tb.TempDir()
}

// durStore opens a store over root or fails the test.
func durStore(tb testing.TB, root string, comp jsonl.Compression, fsys jsonl.FS) *jsonl.Store {
	tb.Helper()
	s, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: comp, FS: fsys, Logger: durQuiet})
	require.NoError(tb, err)
	return s
}

// durLogPath is where the store keeps the log of durID under root.
func durLogPath(tb testing.TB, root string, comp jsonl.Compression) string {
	tb.Helper()
	project, err := jsonl.ProjectKey(durCwd)
	require.NoError(tb, err)
	seg, err := jsonl.EncodeSegment(durID)
	require.NoError(tb, err)
	name := "session.v3.jsonl"
	if comp == jsonl.CompressionZstd {
		name += ".zstd"
	}
	return filepath.Join(root, project, seg, name)
}

// durBuilder numbers events as it builds them.
type durBuilder struct {
	tb     testing.TB
	events []session.Event
}

func (b *durBuilder) add(typ string, data any) {
	b.tb.Helper()
	seq := int64(len(b.events))
	e, err := session.NewEvent(typ, seq, 2_000+seq*7, data)
	require.NoError(b.tb, err)
	b.events = append(b.events, e)
}

type durObj = map[string]any

func (b *durBuilder) userMessage(turn int64, text string) {
	b.add(wire.TypeUserMessage, durObj{"turn": turn, "message": durObj{
		"role": "user", "content": []any{durObj{"type": "text", "text": text}}}})
}

func (b *durBuilder) assistantText(turn, step int64, text string) {
	b.add(wire.TypeAssistantMessage, durObj{"turn": turn, "step": step, "stream": []any{}, "message": durObj{
		"role": "assistant", "content": []any{durObj{"type": "text", "text": text}}}})
}

func (b *durBuilder) assistantCall(turn, step int64, callID string) {
	b.add(wire.TypeAssistantMessage, durObj{"turn": turn, "step": step, "stream": []any{}, "message": durObj{
		"role": "assistant", "content": []any{
			durObj{"type": "text", "text": "Reading the file first."},
			durObj{"type": "tool-call", "id": callID, "name": "read", "arguments": durObj{"path": "/etc/hosts"}},
		}}})
}

func (b *durBuilder) toolCall(turn, step int64, callID string) {
	b.add(wire.TypeToolCall, durObj{"turn": turn, "step": step, "callId": callID, "name": "read", "arguments": `{"path":"/etc/hosts"}`})
}

func (b *durBuilder) toolResult(turn, step int64, callID string) {
	b.add(wire.TypeToolResult, durObj{"turn": turn, "step": step, "message": durObj{
		"id": "result-" + callID, "role": "user", "source": durObj{"kind": "tool", "callId": callID},
		"content": []any{durObj{"type": "tool-result", "toolCallId": callID, "isError": false,
			"content": []any{durObj{"type": "text", "text": "127.0.0.1 localhost"}}}}}})
}

// durTurnLog builds a realistic log: a plain turn, a turn with a completed
// tool call, and an open third turn whose tool call was recorded but has no
// result (so crash repair has a tool result, a step/end and a turn/end to
// synthesize). It is about 3 KB of raw JSONL.
func durTurnLog(tb testing.TB) []session.Event {
	b := &durBuilder{tb: tb}
	b.add(wire.TypeTurnStart, durObj{"turn": 1})
	b.userMessage(1, "Say hello.")
	b.add(wire.TypeStepStart, durObj{"turn": 1, "step": 1})
	b.assistantText(1, 1, "Hello! How can I help?")
	b.add(wire.TypeStepEnd, durObj{"turn": 1, "step": 1})
	b.add(wire.TypeTurnEnd, durObj{"turn": 1, "reason": durObj{"kind": "completed"}})

	b.add(wire.TypeTurnStart, durObj{"turn": 2})
	b.userMessage(2, "What is in /etc/hosts?")
	b.add(wire.TypeStepStart, durObj{"turn": 2, "step": 1})
	b.assistantCall(2, 1, "call-a")
	b.toolCall(2, 1, "call-a")
	b.toolResult(2, 1, "call-a")
	b.add(wire.TypeStepEnd, durObj{"turn": 2, "step": 1})
	b.add(wire.TypeStepStart, durObj{"turn": 2, "step": 2})
	b.assistantText(2, 2, "It maps localhost.")
	b.add(wire.TypeStepEnd, durObj{"turn": 2, "step": 2})
	b.add(wire.TypeTurnEnd, durObj{"turn": 2, "reason": durObj{"kind": "completed"}})

	b.add(wire.TypeTurnStart, durObj{"turn": 3})
	b.userMessage(3, "Read it again.")
	b.add(wire.TypeStepStart, durObj{"turn": 3, "step": 1})
	b.assistantCall(3, 1, "call-b")
	b.toolCall(3, 1, "call-b")
	return b.events
}

// durSeqEvents builds n simple events with seqs from..from+n-1.
func durSeqEvents(tb testing.TB, from, n int64) []session.Event {
	tb.Helper()
	out := make([]session.Event, 0, n)
	for seq := from; seq < from+n; seq++ {
		e, err := session.NewEvent(wire.TypeSystemMessage, seq, 5_000+seq, durObj{"text": fmt.Sprintf("event number %d", seq)})
		require.NoError(tb, err)
		out = append(out, e)
	}
	return out
}

// durLines renders events as the store's JSON lines, for comparisons.
func durLines(tb testing.TB, events []session.Event) []string {
	tb.Helper()
	out := make([]string, len(events))
	for i, e := range events {
		b, err := e.MarshalJSON()
		require.NoError(tb, err)
		out[i] = string(b)
	}
	return out
}

// durRequireEvents checks got against want, event by event.
func durRequireEvents(tb testing.TB, want, got []session.Event, msgAndArgs ...any) {
	tb.Helper()
	require.Equal(tb, durLines(tb, want), durLines(tb, got), msgAndArgs...)
}

// durResumeBatch is what a resume appends to a recovered log: the crash
// closers of an open turn followed by the session/end-seed marker.
func durResumeBatch(tb testing.TB, stored []session.Event) []session.Event {
	tb.Helper()
	closers, err := session.InterruptedTurnClosers(stored)
	require.NoError(tb, err)
	seed := append(append([]session.Event(nil), stored...), closers...)
	batch := closers
	if marker, ok := session.EndSeedMarker(seed, false, session.EndSeedTime(seed, 9_999)); ok {
		batch = append(batch, marker)
	}
	return batch
}

// durWriteLog writes events through a store in the given batch sizes and
// returns the log bytes and the file size after each publication (the end
// of the header line or frame, then the end of each batch).
func durWriteLog(tb testing.TB, root string, comp jsonl.Compression, events []session.Event, batches []int) ([]byte, []int64) {
	tb.Helper()
	ctx := context.Background()
	s := durStore(tb, root, comp, nil)
	h, err := s.Create(ctx, durHeader(), jsonl.CreateOptions{HandleID: "writer"})
	require.NoError(tb, err)
	require.NoError(tb, h.Flush(ctx))
	path := durLogPath(tb, root, comp)
	var ends []int64
	size := func() int64 {
		fi, err := os.Stat(path)
		require.NoError(tb, err)
		return fi.Size()
	}
	ends = append(ends, size())
	pos := 0
	for _, n := range batches {
		require.NoError(tb, h.Append(ctx, events[pos:pos+n]))
		pos += n
		ends = append(ends, size())
	}
	require.Equal(tb, len(events), pos, "batches must cover the events")
	require.NoError(tb, h.Close(ctx))
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	return data, ends
}

// durZstdDecoder decodes whole zstd logs independently of the store.
var durZstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))

// durTrimLines drops the newline of each line.
func durTrimLines(lines [][]byte) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(bytes.TrimSuffix(l, []byte("\n")))
	}
	return out
}

// durCutCase describes what a log cut at one offset must recover.
type durCutCase struct {
	// headerless: the cut falls inside the header record.
	headerless bool
	// lo and hi bound the number of events that must survive; exact cuts
	// have lo == hi.
	lo, hi int
	// committed is the length of the prefix of the original bytes that must
	// still head the file after repair.
	committed int64
}

// TestCrashTruncationEveryOffset cuts a multi-turn log at every byte offset
// and resumes it the way the agent loop does: open for write with a fresh
// store, append the crash closers and the end-seed marker, close, re-read.
func TestCrashTruncationEveryOffset(t *testing.T) {
	events := durTurnLog(t)
	for _, tc := range []struct {
		comp    jsonl.Compression
		batches []int
		refusal string
	}{
		{jsonl.CompressionNone, []int{len(events)}, "empty or header-less session log"},
		{jsonl.CompressionZstd, []int{3, 3, 5, 6, 3, 2}, "empty or header-less Zstandard session log"},
	} {
		t.Run(string(tc.comp), func(t *testing.T) {
			t.Parallel()
			src := t.TempDir()
			full, ends := durWriteLog(t, src, tc.comp, events, tc.batches)
			t.Logf("%d-byte log, %d events in %d batches", len(full), len(events), len(tc.batches))
			if tc.comp == jsonl.CompressionNone {
				require.Greater(t, len(full), 2_500, "the raw log should be about 3 KB")
			}
			cut := func(k int64) durCutCase {
				if tc.comp == jsonl.CompressionNone {
					return durRawCut(full, k)
				}
				return durZstdCut(ends, tc.batches, k)
			}
			work := durScratchDir(t)
			last := 0
			for k := int64(0); k <= int64(len(full)); k++ {
				got := durResumeCut(t, work, tc.comp, full, k, cut(k), events, tc.refusal)
				if got >= 0 {
					require.GreaterOrEqual(t, got, last, "offset %d: fewer events survive a longer prefix", k)
					last = got
				}
			}
			require.Equal(t, len(events), last, "the uncut log keeps every event")
		})
	}
}

// durRawCut computes the expected outcome of a raw log cut at k: the
// complete lines before k survive.
func durRawCut(full []byte, k int64) durCutCase {
	header := int64(bytes.IndexByte(full, '\n') + 1)
	if k < header {
		return durCutCase{headerless: true}
	}
	c := durCutCase{committed: header}
	for pos := header; ; {
		nl := bytes.IndexByte(full[pos:k], '\n')
		if nl < 0 {
			break
		}
		pos += int64(nl) + 1
		c.lo++
		c.committed = pos
	}
	c.hi = c.lo
	return c
}

// durZstdCut computes the expected outcome of a zstd log cut at k: complete
// frames survive; the records of a torn final frame may be recovered, and
// must be when only its checksum is missing.
func durZstdCut(ends []int64, batches []int, k int64) durCutCase {
	if k < ends[0] {
		return durCutCase{headerless: true}
	}
	c := durCutCase{committed: ends[0]}
	for i, end := range ends[1:] {
		if end <= k {
			c.lo += batches[i]
			c.committed = end
			continue
		}
		if k > ends[i] {
			c.hi = c.lo + batches[i]
			if k >= end-4 {
				c.lo = c.hi
			}
			return c
		}
		break
	}
	c.hi = c.lo
	return c
}

// durResumeCut runs one offset of TestCrashTruncationEveryOffset and returns
// the number of stored events that survived the cut (-1 for a refusal).
func durResumeCut(t *testing.T, work string, comp jsonl.Compression, full []byte, k int64, want durCutCase, events []session.Event, refusal string) int {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, os.RemoveAll(work))
	root := filepath.Join(work, "root")
	path := durLogPath(t, root, comp)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, full[:k], 0o600))

	s := durStore(t, root, comp, durNoSyncFS{})
	h, err := s.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: fmt.Sprintf("resume-%d", k)})
	if want.headerless {
		require.Error(t, err, "offset %d: a log without a complete header must be refused", k)
		require.ErrorIs(t, err, wire.ErrCorrupt, "offset %d", k)
		require.Equal(t, fmt.Sprintf("session %q: stored log is corrupt: %s (raw log: %s)", durID, refusal, path), err.Error(), "offset %d", k)
		l, lerr := s.LeaseOf(ctx, durID)
		require.NoError(t, lerr)
		require.Nil(t, l, "offset %d: a refused write open must not keep the lease", k)
		data, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		require.Equal(t, full[:k], data, "offset %d: a refused open must not touch the log", k)
		return -1
	}
	require.NoError(t, err, "offset %d", k)
	stored, err := h.Read(ctx, 0, -1)
	require.NoError(t, err, "offset %d", k)
	m := len(stored)
	require.True(t, want.lo <= m && m <= want.hi, "offset %d: %d events survive, want %d..%d", k, m, want.lo, want.hi)
	durRequireEvents(t, events[:m], stored, "offset %d: the survivors must be the original prefix", k)
	require.Equal(t, int64(m), h.NextSeq(), "offset %d", k)

	batch := durResumeBatch(t, stored)
	require.NoError(t, h.Append(ctx, batch), "offset %d", k)
	require.NoError(t, h.Close(ctx), "offset %d", k)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(data, full[:want.committed]), "offset %d: repair rewrote committed bytes", k)

	resumed := append(append([]session.Event(nil), stored...), batch...)
	require.NoError(t, session.CheckContiguous(durID, 0, resumed))
	fresh := durStore(t, root, comp, durNoSyncFS{})
	r, err := fresh.Open(ctx, durID, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err, "offset %d: the repaired log must re-open", k)
	reread, err := r.Read(ctx, 0, -1)
	require.NoError(t, err)
	durRequireEvents(t, resumed, reread, "offset %d: re-read after repair", k)

	// Nothing is left to repair: the file is exactly the header line and
	// one line per event, in one valid frame per record batch for zstd.
	plain := data
	if comp == jsonl.CompressionZstd {
		plain, err = durZstdDecoder.DecodeAll(data, nil)
		require.NoError(t, err, "offset %d: the repaired log must be whole frames only", k)
	}
	lines := bytes.SplitAfter(plain, []byte("\n"))
	require.Empty(t, lines[len(lines)-1], "offset %d: a fragment follows the last line", k)
	require.Equal(t, durLines(t, resumed), durTrimLines(lines[1:len(lines)-1]), "offset %d", k)
	return m
}

// TestCrashTornTailRepairIsOneMutation pins the example of FORMAT.md §5.5: a log
// holding turn/start@0 and a torn fragment resumes as turn/start@0,
// turn/end@1, session/end-seed@2, with no fragment left in the file.
func TestCrashTornTailRepairIsOneMutation(t *testing.T) {
	ctx := context.Background()
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		t.Run(string(comp), func(t *testing.T) {
			root := t.TempDir()
			start, err := session.NewEvent(wire.TypeTurnStart, 0, 10, durObj{"turn": 1})
			require.NoError(t, err)
			full, ends := durWriteLog(t, root, comp, []session.Event{start}, []int{1})
			path := durLogPath(t, root, comp)
			torn := append(append([]byte(nil), full...), `{"type":"step/st`...)
			if comp == jsonl.CompressionZstd {
				// A frame whose blocks never arrived.
				torn = append(append([]byte(nil), full...), full[ends[0]:ends[0]+8]...)
			}
			require.NoError(t, os.WriteFile(path, torn, 0o600))

			s := durStore(t, root, comp, nil)
			h, err := s.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "resume"})
			require.NoError(t, err)
			stored, err := h.Read(ctx, 0, -1)
			require.NoError(t, err)
			durRequireEvents(t, []session.Event{start}, stored)
			batch := durResumeBatch(t, stored)
			require.Len(t, batch, 2)
			require.Equal(t, wire.TypeTurnEnd, batch[0].Type)
			require.Equal(t, wire.TypeEndSeed, batch[1].Type)
			require.NoError(t, h.Append(ctx, batch))
			require.NoError(t, h.Close(ctx))

			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(data, full))
			r, err := durStore(t, root, comp, nil).Open(ctx, durID, jsonl.AccessRead, jsonl.OpenOptions{})
			require.NoError(t, err)
			got, err := r.Read(ctx, 0, -1)
			require.NoError(t, err)
			durRequireEvents(t, append([]session.Event{start}, batch...), got)
			if comp == jsonl.CompressionNone {
				require.Equal(t, len(data), bytes.LastIndexByte(data, '\n')+1, "no fragment may remain")
				require.Equal(t, 4, bytes.Count(data, []byte("\n")), "header and three events")
			}
		})
	}
}
