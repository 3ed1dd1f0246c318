package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// referenceScanRaw is the raw scan of FORMAT.md §2.3 and §4.3 as a plain loop over
// the lines, each decoded by session.DecodeEventLine: the oracle of the
// chunked and pipelined scans.
func referenceScanRaw(data []byte) (*scanResult, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return nil, errHeaderless
	}
	h, err := parseHeaderLine(data[:nl])
	if err != nil {
		return nil, err
	}
	base := nl + 1
	var events []session.Event
	var issue error
	committed := base
	damagedAt := 0
	line := 0
	for pos := base; ; {
		end := bytes.IndexByte(data[pos:], '\n')
		if end < 0 {
			break
		}
		end += pos
		line++
		start := pos
		ev, err := session.DecodeEventLine(data[pos:end])
		pos = end + 1
		if errors.Is(err, session.ErrUnparsable) {
			if issue == nil {
				issue = fmt.Errorf("corrupt session log: unparsable committed event at line %d", line)
				damagedAt = start
			}
			continue
		}
		isTurnEnd := ev.Type == wire.TypeTurnEnd
		if issue != nil {
			if isTurnEnd {
				return nil, issue
			}
			if err == nil {
				return nil, fmt.Errorf("%w; the damage at byte %d is followed by a complete valid record at line %d (byte %d), so it is not a torn write",
					issue, damagedAt, line, start)
			}
			continue
		}
		if err == nil && ev.Seq != int64(len(events)) {
			err = fmt.Errorf("seq gap (expected %d, got %d)", len(events), ev.Seq)
		}
		if err != nil {
			issue = fmt.Errorf("corrupt session log: invalid committed event at line %d: %w", line, err)
			damagedAt = start
			if isTurnEnd {
				return nil, issue
			}
			continue
		}
		events = append(events, ev)
		committed = end + 1
	}
	r := &scanResult{header: h, events: events, committedBytes: int64(committed), tornTruncateTo: -1, size: int64(len(data))}
	if r.committedBytes < r.size {
		r.tornTruncateTo = r.committedBytes
	}
	return r, nil
}

// requireSameScan fails unless two scans of one log agree: same error text
// and sentinel, or equal results.
func requireSameScan(t *testing.T, want *scanResult, wantErr error, got *scanResult, gotErr error, msg string) {
	t.Helper()
	if wantErr != nil {
		require.Error(t, gotErr, msg)
		require.Equal(t, wantErr.Error(), gotErr.Error(), msg)
		require.Nil(t, got, msg)
		return
	}
	require.NoError(t, gotErr, msg)
	require.Equal(t, want.header, got.header, msg)
	require.Equal(t, want.committedBytes, got.committedBytes, msg)
	require.Equal(t, want.tornTruncateTo, got.tornTruncateTo, msg)
	require.Equal(t, want.size, got.size, msg)
	require.Equal(t, len(want.events), len(got.events), msg)
	for i := range want.events {
		if !reflect.DeepEqual(want.events[i], got.events[i]) {
			t.Fatalf("%s: event %d differs: %+v vs %+v", msg, i, want.events[i], got.events[i])
		}
	}
}

// randomRawLog builds a raw log of about n event lines: mostly valid
// canonical events, with valid lines that are not canonical, long lines,
// non-ASCII and escaped text, and (when damaged) unparsable lines, seq gaps,
// invalid events, empty lines, turn ends after damage and a torn tail.
func randomRawLog(rng *rand.Rand, n int, damaged bool) []byte {
	var b strings.Builder
	b.WriteString(fuzzHeader + "\n")
	seq := int64(0)
	for range n {
		text := strings.Repeat("word ", rng.IntN(8))
		switch k := rng.IntN(20); {
		case k < 10:
			b.WriteString(fuzzEvent("step/start", seq, `{"turn":1,"step":1,"text":"`+text+`"}`))
		case k == 10:
			b.WriteString(fuzzEvent("user/message", seq, `{"text":"caf`+"\u00e9"+` \"q\" \\ \n \u001b `+"\U0001F600"+`"}`))
		case k == 11:
			b.WriteString(`{"type":"turn/start", "seq":` + fmt.Sprint(seq) + `,"time":1,"data":{"t":"\/\u0041"}}`)
		case k == 12:
			b.WriteString(fuzzEvent("assistant/message", seq, `{"text":"`+strings.Repeat("long line ", 20+rng.IntN(300))+`"}`))
		case k == 13:
			b.WriteString(fuzzEvent("turn/end", seq, `{"turn":1,"reason":{"kind":"completed"}}`))
		case k == 14 && damaged:
			b.WriteString(`{not json`)
		case k == 15 && damaged:
			b.WriteString(fuzzEvent("step/end", seq+2, `{"turn":1,"step":1}`))
		case k == 16 && damaged:
			b.WriteString(fuzzEvent("step/end", seq, `"not an object"`))
		case k == 17 && damaged:
			// an empty line
		case k == 18 && damaged:
			b.WriteString(fuzzEvent("step/end", seq, `{"n":-0}`))
		default:
			b.WriteString(fuzzEvent("request/header", seq, `{"i":`+fmt.Sprint(rng.IntN(1000))+`}`))
		}
		b.WriteByte('\n')
		seq++
	}
	if damaged && rng.IntN(2) == 0 {
		b.WriteString(`{"type":"assistant/mes`)
	}
	return []byte(b.String())
}

// edgeLogs are logs at the borders of the header and line handling.
func edgeLogs() [][]byte {
	long := fuzzEvent("user/message", 0, `{"text":"`+strings.Repeat("x", 5000)+`"}`)
	return [][]byte{
		nil, []byte("\n"), []byte(fuzzHeader), []byte(fuzzHeader + "\n"), []byte(fuzzHeader + "\n{"),
		[]byte("{not a header\n" + fuzzEvent("turn/start", 0, `{"turn":1}`) + "\n"),
		[]byte(fuzzHeader + "\n" + long + "\n"), []byte(fuzzHeader + "\n" + long),
		[]byte(fuzzHeader + "\n\n\n"), fuzzLog(fuzzCompletedTurn(), ""), fuzzLog(fuzzCompletedTurn(), `{"type":"turn/st`),
	}
}

// TestChunkedScanMatchesLineByLine: splitting the lines into chunks of any
// size, decoded in parallel, gives exactly the line-by-line scan.
func TestChunkedScanMatchesLineByLine(t *testing.T) {
	defer func(c int) { decodeChunkBytes = c }(decodeChunkBytes)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	rng := rand.New(rand.NewPCG(11, 12))
	logs := edgeLogs()
	for i := range 60 {
		logs = append(logs, randomRawLog(rng, rng.IntN(200), i%3 != 0))
	}
	for li, data := range logs {
		want, wantErr := referenceScanRaw(data)
		for _, chunk := range []int{1, 2, 7, 64, 333, 4096, 512 << 10} {
			decodeChunkBytes = chunk
			got, err := scanRaw(data)
			requireSameScan(t, want, wantErr, got, err, fmt.Sprintf("log %d, chunks of %d bytes", li, chunk))
		}
	}
}

// testFS is the OS filesystem with files whose Stat under-reports the size
// by shrink bytes and whose read number failRead (from 1) fails.
type testFS struct {
	OSFS
	shrink   int64
	failRead int
}

var errTestRead = errors.New("injected read failure")

type testFile struct {
	File
	fs    *testFS
	reads int
}

type sizeInfo struct {
	os.FileInfo
	size int64
}

func (i sizeInfo) Size() int64 { return i.size }

func (f *testFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &testFile{File: file, fs: f}, nil
}

func (f *testFile) Stat() (os.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return sizeInfo{fi, max(fi.Size()-f.fs.shrink, 0)}, nil
}

func (f *testFile) Read(p []byte) (int, error) {
	f.reads++
	if f.reads == f.fs.failRead {
		return 0, errTestRead
	}
	return f.File.Read(p)
}

// waitGoroutines waits for the goroutine count to come back to n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left running, want %d", runtime.NumGoroutine(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReadRawDecodingMatchesReadFile: decoding a raw log while it is read,
// in any piece and chunk sizes, reads the same bytes as readFile and scans
// to the same result; a failed read returns its error and leaves no
// decoding running; a file larger than its stat is read whole and decoded
// afterwards.
func TestReadRawDecodingMatchesReadFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	logs := edgeLogs()
	for i := range 12 {
		logs = append(logs, randomRawLog(rng, 50+rng.IntN(150), i%2 == 0))
	}
	dir := t.TempDir()
	goroutines := runtime.NumGoroutine()
	for li, data := range logs {
		path := filepath.Join(dir, fmt.Sprintf("log-%d.jsonl", li))
		require.NoError(t, os.WriteFile(path, data, 0o600))
		want, wantErr := referenceScanRaw(data)
		for _, sizes := range [][2]int{{1, 1}, {13, 50}, {100, 7}, {4096, 300}, {1 << 20, 512 << 10}} {
			msg := fmt.Sprintf("log %d, pieces of %d, chunks of %d", li, sizes[0], sizes[1])
			SetDecodeSizesForTest(t, sizes[0], sizes[1])
			fsys := &testFS{}
			s := &Store{fs: fsys}
			got, chunks, err := s.readRawDecoding(path)
			require.NoError(t, err, msg)
			require.Equal(t, string(data), string(got), msg)
			require.Equal(t, bytes.IndexByte(data, '\n') >= 0, chunks != nil, "%s: decoded while read", msg)
			r, err := scanRawDecoded(got, chunks, false)
			requireSameScan(t, want, wantErr, r, err, msg)

			// A read that fails at any point.
			for fail := 1; fail <= 3+len(data)/sizes[0] && fail < 40; fail++ {
				fsys.failRead = fail
				_, _, err := s.readRawDecoding(path)
				if fail == 1 {
					require.ErrorIs(t, err, errTestRead, msg)
				}
				if errors.Is(err, errTestRead) {
					waitGoroutines(t, goroutines)
					continue
				}
				require.NoError(t, err, "%s: read %d", msg, fail)
			}

			// A file that grew after its stat.
			fsys.failRead, fsys.shrink = 0, 600+int64(rng.IntN(100))
			got, chunks, err = s.readRawDecoding(path)
			require.NoError(t, err, msg)
			require.Equal(t, string(data), string(got), msg)
			if len(data) > 2*int(fsys.shrink) {
				require.Nil(t, chunks, "%s: a grown file is decoded after reading", msg)
			}
			r, err = scanRawDecoded(got, chunks, false)
			requireSameScan(t, want, wantErr, r, err, msg+", grown file")
			waitGoroutines(t, goroutines)
		}
	}
}
