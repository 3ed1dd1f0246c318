package jsonl_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// compressions are the two encodings every applicable case runs against.
var compressions = []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd}

// eachCompression runs fn as one subtest per encoding.
func eachCompression(t *testing.T, fn func(t *testing.T, comp jsonl.Compression)) {
	t.Helper()
	for _, comp := range compressions {
		t.Run(string(comp), func(t *testing.T) { fn(t, comp) })
	}
}

// bg is the context of every store call that is not about cancellation.
var bg = context.Background()

// handleCounter makes handle ids unique within the test binary (the store
// never reuses a handle id).
var handleCounter atomic.Int64

// newHandleID returns a fresh handle id.
func newHandleID() string { return fmt.Sprintf("handle-%d", handleCounter.Add(1)) }

// logCapture records the messages the store logs, with their levels.
type logCapture struct {
	mu   sync.Mutex
	msgs []string
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, r.Level.String()+" "+r.Message)
	return nil
}

func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }

func (c *logCapture) WithGroup(string) slog.Handler { return c }

// warnings returns the warning messages logged so far.
func (c *logCapture) warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.msgs {
		if w, ok := strings.CutPrefix(m, "WARN "); ok {
			out = append(out, w)
		}
	}
	return out
}

// env is one store root with the store over it.
type env struct {
	t     *testing.T
	comp  jsonl.Compression
	root  string
	store *jsonl.Store
	logs  *logCapture
}

// newEnv makes a store over a fresh root below a temp directory (the root
// itself does not exist yet). fsys may be nil for the real filesystem.
func newEnv(t *testing.T, comp jsonl.Compression, fsys jsonl.FS) *env {
	t.Helper()
	e := &env{t: t, comp: comp, root: filepath.Join(t.TempDir(), "root"), logs: &logCapture{}}
	e.store = e.newStore(fsys)
	return e
}

// newStore opens another store over the same root, as another worker
// process would.
func (e *env) newStore(fsys jsonl.FS) *jsonl.Store {
	e.t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{
		Root:        e.root,
		Compression: e.comp,
		FS:          fsys,
		Logger:      slog.New(e.logs),
	})
	require.NoError(e.t, err)
	return st
}

// header is an unseeded session header with createdAt 5.
func header(id, cwd string) wire.Header {
	return wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 5, Cwd: cwd}
}

// create creates a session and returns its write handle.
func create(t *testing.T, st *jsonl.Store, h wire.Header) *jsonl.Handle {
	t.Helper()
	hd, err := st.Create(bg, h, jsonl.CreateOptions{HandleID: newHandleID(), Owner: jsonl.Owner{WorkflowID: "session/" + h.ID, RunID: "run-1"}})
	require.NoError(t, err)
	return hd
}

// persist creates a session, appends events in one batch and closes it.
func persist(t *testing.T, st *jsonl.Store, h wire.Header, events ...session.Event) {
	t.Helper()
	hd := create(t, st, h)
	require.NoError(t, hd.Append(bg, events))
	require.NoError(t, hd.Close(bg))
}

// openWrite opens a write handle.
func openWrite(t *testing.T, st *jsonl.Store, id string) *jsonl.Handle {
	t.Helper()
	hd, err := st.Open(bg, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID(), Owner: jsonl.Owner{WorkflowID: "session/" + id, RunID: "run-2"}})
	require.NoError(t, err)
	require.Equal(t, jsonl.AccessWrite, hd.Access())
	return hd
}

// readAll reads the whole log through a read handle.
func readAll(t *testing.T, st *jsonl.Store, id string) []session.Event {
	t.Helper()
	hd, err := st.Open(bg, id, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	events, err := hd.Read(bg, 0, -1)
	require.NoError(t, err)
	require.NoError(t, hd.Close(bg))
	return events
}

// readHandle reads everything a handle serves.
func readHandle(t *testing.T, hd *jsonl.Handle) []session.Event {
	t.Helper()
	events, err := hd.Read(bg, 0, -1)
	require.NoError(t, err)
	return events
}

// evTime is the time every test event at seq gets.
func evTime(seq int64) int64 { return 1000 + seq }

// ev builds an event with raw JSON data through session.NewEvent.
func ev(t *testing.T, typ string, seq int64, data string) session.Event {
	t.Helper()
	e, err := session.NewEvent(typ, seq, evTime(seq), json.RawMessage(data))
	require.NoError(t, err)
	return e
}

// surface builds a surface event with surfaceOp "append".
func surface(t *testing.T, typ string, seq int64, data string) session.Event {
	t.Helper()
	e := ev(t, typ, seq, data)
	e.SurfaceOp = session.AppendOp()
	require.NoError(t, e.Validate())
	return e
}

func turnStart(t *testing.T, seq, turn int64) session.Event {
	return ev(t, wire.TypeTurnStart, seq, fmt.Sprintf(`{"turn":%d}`, turn))
}

func turnEnd(t *testing.T, seq, turn int64) session.Event {
	return ev(t, wire.TypeTurnEnd, seq, fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
}

func stepStart(t *testing.T, seq, turn, step int64) session.Event {
	return ev(t, wire.TypeStepStart, seq, fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
}

func stepEnd(t *testing.T, seq, turn, step int64) session.Event {
	return ev(t, wire.TypeStepEnd, seq, fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
}

func userMessage(t *testing.T, seq int64, text string) session.Event {
	b, err := json.Marshal(text)
	require.NoError(t, err)
	return surface(t, wire.TypeUserMessage, seq, fmt.Sprintf(`{"id":"u-%d","role":"user","content":[{"type":"text","text":%s}],"source":{"kind":"user"}}`, seq, b))
}

func assistantMessage(t *testing.T, seq, turn, step int64, text string) session.Event {
	b, err := json.Marshal(text)
	require.NoError(t, err)
	return surface(t, wire.TypeAssistantMessage, seq, fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"role":"assistant","content":[{"type":"text","text":%s}]},"stream":[]}`, turn, step, b))
}

// assistantToolCall is an assistant message requesting tool call callID.
func assistantToolCall(t *testing.T, seq, turn, step int64, callID string) session.Event {
	return surface(t, wire.TypeAssistantMessage, seq, fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"role":"assistant","content":[{"type":"tool-call","id":%q,"name":"read_file","arguments":{"path":"a.txt"}}]},"stream":[]}`, turn, step, callID))
}

func toolCall(t *testing.T, seq, turn, step int64, callID string) session.Event {
	return ev(t, wire.TypeToolCall, seq, fmt.Sprintf(`{"turn":%d,"step":%d,"callId":%q,"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}`, turn, step, callID))
}

// completedTurn is one whole turn of six events starting at seq first:
// turn/start, user/message, step/start, assistant/message, step/end,
// turn/end{completed}.
func completedTurn(t *testing.T, first, turn int64) []session.Event {
	return []session.Event{
		turnStart(t, first, turn),
		userMessage(t, first+1, fmt.Sprintf("question %d", turn)),
		stepStart(t, first+2, turn, 1),
		assistantMessage(t, first+3, turn, 1, fmt.Sprintf("answer %d", turn)),
		stepEnd(t, first+4, turn, 1),
		turnEnd(t, first+5, turn),
	}
}

// seqs returns the seqs of events.
func seqs(events []session.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Seq
	}
	return out
}

// types returns the types of events.
func types(events []session.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

// upTo returns 0..n-1.
func upTo(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// line is the stored line of an event (without its newline).
func line(t *testing.T, e session.Event) string {
	t.Helper()
	b, err := e.MarshalJSON()
	require.NoError(t, err)
	return string(b)
}

// lines renders events as stored lines.
func lines(t *testing.T, events ...session.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = line(t, e)
	}
	return out
}

// sessionDir is the directory of a session, computed from FORMAT.md §3.1-§3.3.
func sessionDir(t *testing.T, root, cwd, id string) string {
	t.Helper()
	project := "_no-cwd"
	if cwd != "" {
		var err error
		project, err = jsonl.ProjectKey(cwd)
		require.NoError(t, err)
	}
	seg, err := jsonl.EncodeSegment(id)
	require.NoError(t, err)
	return filepath.Join(root, project, seg)
}

// generationName is the current generation file of an encoding.
func generationName(comp jsonl.Compression) string {
	if comp == jsonl.CompressionZstd {
		return "session.v3.jsonl.zstd"
	}
	return "session.v3.jsonl"
}

// logPath is the log file of a session.
func (e *env) logPath(cwd, id string) string {
	return filepath.Join(sessionDir(e.t, e.root, cwd, id), generationName(e.comp))
}

// headerLine renders a header line (without newline) by hand, in the key
// order of FORMAT.md §2.1, independently of the store's encoder.
func headerLine(h wire.Header) string {
	var b strings.Builder
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	fmt.Fprintf(&b, `{"type":"session","version":%d,"id":%s,"createdAt":%d`, h.Version, q(h.ID), h.CreatedAt)
	if h.Cwd != "" {
		fmt.Fprintf(&b, `,"cwd":%s`, q(h.Cwd))
	}
	if h.ParentSession != "" {
		fmt.Fprintf(&b, `,"parentSession":%s`, q(h.ParentSession))
	}
	fmt.Fprintf(&b, `,"isSeeded":%t`, h.IsSeeded)
	if h.Origin != "" {
		fmt.Fprintf(&b, `,"origin":%s`, q(h.Origin))
	}
	fmt.Fprintf(&b, `,"delegationDepth":%d`, h.DelegationDepth)
	if h.AgentPreset != "" {
		fmt.Fprintf(&b, `,"agentPreset":%s`, q(h.AgentPreset))
	}
	b.WriteString("}")
	return b.String()
}

// zstdFrame encodes plaintext as one Zstandard frame with a content
// checksum, independently of the store's codec.
func zstdFrame(t *testing.T, plain []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithZeroFrames(true))
	require.NoError(t, err)
	defer enc.Close()
	return enc.EncodeAll(plain, nil)
}

// encodeLog renders a log by hand: a header line and batches of event
// lines. Raw: the lines joined; zstd: one header frame plus one frame per
// batch (FORMAT.md §4.2).
func encodeLog(t *testing.T, comp jsonl.Compression, hdrLine string, batches ...[]string) []byte {
	t.Helper()
	if comp != jsonl.CompressionZstd {
		var b bytes.Buffer
		b.WriteString(hdrLine + "\n")
		for _, batch := range batches {
			for _, l := range batch {
				b.WriteString(l + "\n")
			}
		}
		return b.Bytes()
	}
	out := zstdFrame(t, []byte(hdrLine+"\n"))
	for _, batch := range batches {
		out = append(out, zstdFrame(t, []byte(strings.Join(batch, "\n")+"\n"))...)
	}
	return out
}

// writeFile writes data at path, creating parent directories (0700).
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// appendFile appends data to path.
func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// readFile reads path.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// writeLog writes a hand-built log for session h at its layout path and
// returns the path.
func (e *env) writeLog(h wire.Header, batches ...[]string) string {
	e.t.Helper()
	path := e.logPath(h.Cwd, h.ID)
	writeFile(e.t, path, encodeLog(e.t, e.comp, headerLine(h), batches...))
	return path
}

// zstdFrameSpan is one frame of a Zstandard log.
type zstdFrameSpan struct {
	start, end int
	checksum   bool
}

// splitZstdFrames splits a Zstandard log into frames with the structural
// rules of FORMAT.md §4.2 (implemented here independently of the store). It
// fails the test on any malformed or torn frame.
func splitZstdFrames(t *testing.T, data []byte) []zstdFrameSpan {
	t.Helper()
	var out []zstdFrameSpan
	pos := 0
	need := func(n int) { require.LessOrEqual(t, pos+n, len(data), "torn zstd frame at byte %d", pos) }
	for pos < len(data) {
		start := pos
		need(5)
		require.Equal(t, uint32(0xFD2FB528), binary.LittleEndian.Uint32(data[pos:]), "frame magic at byte %d", pos)
		fhd := data[pos+4]
		pos += 5
		single := fhd&0x20 != 0
		if !single {
			pos++ // window descriptor
		}
		pos += []int{0, 1, 2, 4}[fhd&3]
		switch fcs := fhd >> 6; {
		case fcs == 0 && single:
			pos++
		case fcs > 0:
			pos += 1 << fcs
		}
		for {
			need(3)
			bh := int(data[pos]) | int(data[pos+1])<<8 | int(data[pos+2])<<16
			pos += 3
			size := bh >> 3
			if (bh>>1)&3 == 1 {
				size = 1
			}
			need(size)
			pos += size
			if bh&1 == 1 {
				break
			}
		}
		sum := fhd&0x04 != 0
		if sum {
			need(4)
			pos += 4
		}
		out = append(out, zstdFrameSpan{start: start, end: pos, checksum: sum})
	}
	return out
}

// zstdPlaintexts decodes every frame of a Zstandard log separately.
func zstdPlaintexts(t *testing.T, data []byte) [][]byte {
	t.Helper()
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer dec.Close()
	var out [][]byte
	for _, f := range splitZstdFrames(t, data) {
		require.True(t, f.checksum, "every frame carries a content checksum")
		plain, err := dec.DecodeAll(data[f.start:f.end], nil)
		require.NoError(t, err)
		out = append(out, plain)
	}
	return out
}

// logRecords returns the physical records of a log file: each
// newline-terminated line of a raw log (a raw file keeps no batch
// boundaries), or each frame's plaintext of a zstd log.
func logRecords(t *testing.T, comp jsonl.Compression, data []byte) []string {
	t.Helper()
	if comp == jsonl.CompressionZstd {
		var out []string
		for _, p := range zstdPlaintexts(t, data) {
			out = append(out, string(p))
		}
		return out
	}
	var out []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// logText is the plaintext of a log file (all frames decoded for zstd).
func logText(t *testing.T, comp jsonl.Compression, data []byte) string {
	t.Helper()
	if comp == jsonl.CompressionZstd {
		return strings.Join(logRecords(t, comp, data), "")
	}
	return string(data)
}

// treeSnapshot describes every entry under root: kind, permissions, size
// and a content digest, keyed by path relative to root. Symlinks are
// described, never followed. The root marker (written once by the first
// operation on a root) is left out; rootmarker_test.go checks it.
func treeSnapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path == root {
				return filepath.SkipDir
			}
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if rel == ".sessionflow-root" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			out[rel] = "symlink -> " + target
		case d.IsDir():
			out[rel] = fmt.Sprintf("dir %v", info.Mode().Perm())
		default:
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("file %v %d %s", info.Mode().Perm(), len(b), hex.EncodeToString(sum[:8]))
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// filesUnder lists the regular files and symlinks under root, relative and
// sorted.
func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for rel, desc := range treeSnapshot(t, root) {
		if !strings.HasPrefix(desc, "dir ") {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// logFilesUnder lists the session log files under root (any encoding).
func logFilesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, rel := range filesUnder(t, root) {
		if strings.HasSuffix(rel, ".jsonl") || strings.HasSuffix(rel, ".jsonl.zstd") {
			out = append(out, rel)
		}
	}
	return out
}

// requireCode asserts that err is a store error of the sentinel's class.
func requireCode(t *testing.T, err error, sentinel error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, sentinel, "got %v (code %q)", err, jsonl.ErrorCode(err))
}

// strp returns a pointer to s.
func strp(s string) *string { return &s }

// toolResult is a tool/result answering callID, citing the tool/call at
// callSeq.
func toolResult(t *testing.T, seq, turn, step int64, callID string, callSeq int64) session.Event {
	e := surface(t, wire.TypeToolResult, seq, fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"id":"tr-%s","role":"user","source":{"kind":"tool","callId":%q},"content":[{"type":"tool-result","toolCallId":%q,"isError":false,"content":[{"type":"text","text":"ok"}]}]}}`, turn, step, callID, callID, callID))
	e.SourceEventSeqs = []int64{callSeq}
	require.NoError(t, e.Validate())
	return e
}

// fileSize returns the size of path.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// tornTail is damage appended after the last complete record of a log: a
// partial JSON line (raw) or the first half of a frame holding one complete
// record (zstd), so that no complete record can be recovered from it.
func tornTail(t *testing.T, comp jsonl.Compression, partialLine string, e session.Event) []byte {
	t.Helper()
	if comp != jsonl.CompressionZstd {
		return []byte(partialLine)
	}
	frame := zstdFrame(t, []byte(line(t, e)+"\n"))
	return frame[:len(frame)/2]
}

// noSuchFile asserts that path does not exist.
func noSuchFile(t *testing.T, path string) {
	t.Helper()
	_, err := os.Lstat(path)
	require.ErrorIs(t, err, fs.ErrNotExist, "%s should not exist", path)
}

// sha256Hex is the hex SHA-256 of s (deterministic filler text).
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// requireSameLog asserts that a log file holds what want holds: the same
// bytes (raw), or the same frame plaintexts (zstd; two encoders may compress
// the same plaintext differently).
func requireSameLog(t *testing.T, comp jsonl.Compression, want, got []byte) {
	t.Helper()
	if comp == jsonl.CompressionZstd {
		require.Equal(t, logRecords(t, comp, want), logRecords(t, comp, got))
		return
	}
	require.Equal(t, string(want), string(got))
}
