package jsonl

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
)

// scanRaw validates a raw JSONL log as the store's open does without force.
func scanRaw(data []byte) (*scanResult, error) {
	return scanRawDecoded(data, nil, false)
}

// fuzzHeader is a valid v3 header line without its newline.
const fuzzHeader = `{"type":"session","version":3,"id":"fuzz","createdAt":1700000000000,"isSeeded":false,"delegationDepth":0}`

// fuzzEvent renders one event line without its newline.
func fuzzEvent(typ string, seq int64, data string) string {
	return fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s}`, typ, seq, 1000+seq, data)
}

// fuzzLog joins a header and lines into a raw log, each line newline-
// terminated, followed by tail verbatim.
func fuzzLog(lines []string, tail string) []byte {
	var b strings.Builder
	b.WriteString(fuzzHeader + "\n")
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	b.WriteString(tail)
	return []byte(b.String())
}

// fuzzCompletedTurn is turn 1 at seqs 0..5.
func fuzzCompletedTurn() []string {
	return []string{
		fuzzEvent("turn/start", 0, `{"turn":1}`),
		fuzzEvent("user/message", 1, `{"turn":1,"message":{"role":"user","content":[{"type":"text","text":"hi"}]}}`),
		fuzzEvent("step/start", 2, `{"turn":1,"step":1}`),
		fuzzEvent("assistant/message", 3, `{"turn":1,"step":1,"stream":[],"message":{"role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":{}}]}}`),
		fuzzEvent("step/end", 4, `{"turn":1,"step":1}`),
		fuzzEvent("turn/end", 5, `{"turn":1,"reason":{"kind":"completed"}}`),
	}
}

// fuzzRawExamples are raw logs under the rules of FORMAT.md §4.3 with their outcome: the seqs
// read, or the error text they are refused with.
func fuzzRawExamples() []struct {
	name string
	log  []byte
	seqs int
	err  string
} {
	turn := fuzzCompletedTurn()
	start0 := fuzzEvent("turn/start", 0, `{"turn":1}`)
	end1 := fuzzEvent("turn/end", 1, `{"turn":1,"reason":{"kind":"completed"}}`)
	return []struct {
		name string
		log  []byte
		seqs int
		err  string
	}{
		{"torn tail after a completed turn", fuzzLog(append(turn,
			fuzzEvent("turn/start", 6, `{"turn":2}`),
			fuzzEvent("step/start", 7, `{"turn":2,"step":1}`)), `{"type":"assistant/mes`), 8, ""},
		{"gap without a turn end", fuzzLog([]string{start0, fuzzEvent("step/start", 2, `{"turn":1,"step":1}`)}, ""), 1, ""},
		{"unparsable line without a turn end", fuzzLog([]string{start0, `{not json`}, ""), 1, ""},
		{"gap after a turn end", fuzzLog([]string{start0, end1, fuzzEvent("step/start", 9, `{"turn":1,"step":1}`)}, ""), 2, ""},
		{"gap before a turn end", fuzzLog([]string{start0, fuzzEvent("step/start", 2, `{"turn":1,"step":1}`),
			fuzzEvent("turn/end", 3, `{"turn":1,"reason":{"kind":"completed"}}`)}, ""), 0, "seq gap"},
		{"unparsable line before a turn end", fuzzLog([]string{`{not json`, end1}, ""), 0, "unparsable committed event at line 1"},
		{"null line before a turn end", fuzzLog([]string{`null`, end1}, ""), 0, "invalid committed event at line 1"},
		{"malformed assistant message before a turn end", fuzzLog([]string{
			`{"type":"assistant/message","seq":0,"time":1,"data":{},"surfaceOp":"prepend"}`, end1}, ""), 0, "invalid committed event at line 1"},
		{"header only", fuzzLog(nil, ""), 0, ""},
		{"complete turn", fuzzLog(turn, ""), 6, ""},
	}
}

// TestScanRawSpecExamples pins the outcomes of fuzzRawExamples under FORMAT.md §4.3.
func TestScanRawSpecExamples(t *testing.T) {
	for _, ex := range fuzzRawExamples() {
		t.Run(ex.name, func(t *testing.T) {
			r, err := scanRaw(ex.log)
			if ex.err != "" {
				require.ErrorContains(t, err, ex.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, r.events, ex.seqs)
			fuzzCheckRaw(t, ex.log, r)
		})
	}
	r, err := scanRaw(fuzzLog(nil, ""))
	require.NoError(t, err)
	require.Equal(t, int64(len(fuzzHeader)+1), r.committedBytes, "a header-only log commits the header line")
}

// fuzzCheckRaw checks the invariants of a successful raw scan: the committed
// region is a prefix of whole valid lines numbered from 0, a torn suffix is
// reported exactly when bytes follow it, and re-scanning the committed
// prefix alone gives the same log with nothing to repair.
func fuzzCheckRaw(t *testing.T, data []byte, r *scanResult) {
	t.Helper()
	n := int64(len(data))
	require.Equal(t, n, r.size)
	require.Positive(t, r.committedBytes)
	require.LessOrEqual(t, r.committedBytes, n)
	require.Equal(t, byte('\n'), data[r.committedBytes-1], "the committed region ends a line")
	require.Empty(t, r.recovered)
	for i, e := range r.events {
		require.Equal(t, int64(i), e.Seq)
		require.NoError(t, e.Validate())
	}
	if r.committedBytes < n {
		require.Equal(t, r.committedBytes, r.tornTruncateTo)
	} else {
		require.Equal(t, int64(-1), r.tornTruncateTo)
	}
	again, err := scanRaw(data[:r.committedBytes])
	require.NoError(t, err, "the committed prefix must scan")
	require.Equal(t, int64(-1), again.tornTruncateTo)
	require.Equal(t, r.committedBytes, again.committedBytes)
	require.Equal(t, r.header, again.header)
	require.Equal(t, fuzzLines(t, r.events), fuzzLines(t, again.events))
}

func fuzzLines(t *testing.T, events []session.Event) []string {
	t.Helper()
	out := make([]string, len(events))
	for i, e := range events {
		b, err := e.MarshalJSON()
		require.NoError(t, err)
		out[i] = string(b)
	}
	return out
}

// FuzzScanRaw feeds arbitrary bytes to the raw scanner: it must never
// panic, and what it accepts must satisfy fuzzCheckRaw.
func FuzzScanRaw(f *testing.F) {
	for _, ex := range fuzzRawExamples() {
		f.Add(ex.log)
	}
	turn := fuzzLog(fuzzCompletedTurn(), "")
	for _, k := range []int{0, 1, len(fuzzHeader), len(fuzzHeader) + 1, len(fuzzHeader) + 20, len(turn) / 2, len(turn) - 1} {
		f.Add(turn[:k])
	}
	f.Add([]byte("\n"))
	f.Add([]byte("null\n"))
	f.Add([]byte("[]\n"))
	f.Add([]byte(`{"type":"session","version":4,"id":"fuzz"}` + "\n"))
	f.Add([]byte(`{"type":"session","version":3,"id":"fuzz","createdAt":1,"isSeeded":false,"delegationDepth":0,"sandboxMode":"x"}` + "\n"))
	f.Add(fuzzLog([]string{fuzzEvent("turn/start", 0, `{"turn":1}`), fuzzEvent("turn/start", 1, `{"turn":-0}`)}, ""))
	f.Add(fuzzLog([]string{fuzzEvent("turn/start", 0, `{"turn":1}`), "", fuzzEvent("turn/end", 1, `{"turn":1,"reason":{"kind":"x"}}`)}, ""))
	f.Add(fuzzLog([]string{fuzzEvent("turn/start", 0, `{"turn":1,"n":1e400}`)}, "\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := scanRaw(data)
		if err != nil {
			require.Nil(t, r)
			return
		}
		fuzzCheckRaw(t, data, r)
	})
}

// FuzzScanZstd turns a raw log into a zstd log (a header frame, then one
// frame per group of lines), cuts it, and checks the zstd scanner: complete
// frames give contiguous events, a torn last frame is reported with its
// start, its recovered records continue the seqs, and the log cut at the
// torn frame scans to the same events with nothing to repair.
func FuzzScanZstd(f *testing.F) {
	codec, err := newZstdCodec()
	require.NoError(f, err)
	for _, ex := range fuzzRawExamples() {
		f.Add(ex.log, uint8(2), uint16(0xFFFF))
		f.Add(ex.log, uint8(1), uint16(len(ex.log)/3))
	}
	turn := fuzzLog(fuzzCompletedTurn(), "")
	for cut := 0; cut < 400; cut += 37 {
		f.Add(turn, uint8(3), uint16(cut))
	}
	f.Fuzz(func(t *testing.T, plain []byte, group uint8, cut uint16) {
		lines := bytes.SplitAfter(plain, []byte("\n"))
		per := max(int(group%8), 1)
		var data []byte
		data = codec.encodeFrame(data, lines[0])
		for i := 1; i < len(lines); i += per {
			data = codec.encodeFrame(data, bytes.Join(lines[i:min(i+per, len(lines))], nil))
		}
		data = data[:min(int(cut), len(data))]

		r, err := scanZstd(codec, data)
		if err != nil {
			require.Nil(t, r)
			return
		}
		n := int64(len(data))
		require.Equal(t, n, r.size)
		require.LessOrEqual(t, r.committedBytes, n)
		for i, e := range append(r.events[:len(r.events):len(r.events)], r.recovered...) {
			require.Equal(t, int64(i), e.Seq)
			require.NoError(t, e.Validate())
		}
		if r.tornTruncateTo < 0 {
			require.Equal(t, n, r.committedBytes)
			require.Empty(t, r.recovered)
			return
		}
		require.Equal(t, r.committedBytes, r.tornTruncateTo)
		require.Less(t, r.tornTruncateTo, n)
		again, err := scanZstd(codec, data[:r.tornTruncateTo])
		require.NoError(t, err, "the complete frames must scan")
		require.Equal(t, int64(-1), again.tornTruncateTo)
		require.Empty(t, again.recovered)
		require.Equal(t, r.header, again.header)
		require.Equal(t, fuzzLines(t, r.events), fuzzLines(t, again.events))
	})
}
