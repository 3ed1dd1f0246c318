package session

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/wire"
)

// batchLines encodes turn/start events of seqs 0..n-1, the data of event i
// padded with pad[i] bytes, one per line.
func batchLines(t *testing.T, pad ...int) []string {
	t.Helper()
	out := make([]string, len(pad))
	for i, p := range pad {
		e, err := NewEvent(wire.TypeTurnStart, int64(i), 1, map[string]any{"turn": i + 1, "pad": strings.Repeat("x", p)})
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b) + "\n"
	}
	return out
}

// readBatches reads every batch: the seqs of each and its end offset.
func readBatches(t *testing.T, r *wire.BatchReaderOf[Event]) (seqs [][]int64, ends []int64, err error) {
	t.Helper()
	for {
		b, err := r.Next()
		if errors.Is(err, io.EOF) {
			return seqs, ends, nil
		}
		if err != nil {
			return seqs, ends, err
		}
		var s []int64
		for _, e := range b.Events {
			s = append(s, e.Seq)
		}
		seqs = append(seqs, s)
		ends = append(ends, b.End)
	}
}

func TestBatchReaderSplitsByEventsAndBytes(t *testing.T) {
	lines := batchLines(t, 10, 10, 10, 10, 10)
	n := len(lines[0]) // every line has the same size: the event's encoded size
	in := lines[0] + "\n" + lines[1] + lines[2] + lines[3] + "  \n" + lines[4] + "\n"

	seqs, ends, err := readBatches(t, NewBatchReader(strings.NewReader(in), wire.BatchLimits{MaxBytes: 1 << 20, MaxEvents: 2}))
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs := [][]int64{{0, 1}, {2, 3}, {4}}
	wantEnds := []int64{int64(2*n + 1), int64(4*n + 1), int64(len(in))}
	if !equalSeqs(seqs, wantSeqs) || !equalInts(ends, wantEnds) {
		t.Fatalf("by events: got %v ends %v, want %v ends %v", seqs, ends, wantSeqs, wantEnds)
	}

	// Two events fit the byte limit, a third does not: the batch ends
	// before the line that does not fit (blank lines before it included).
	seqs, ends, err = readBatches(t, NewBatchReader(strings.NewReader(in), wire.BatchLimits{MaxBytes: 2*n + 1, MaxEvents: 100}))
	if err != nil {
		t.Fatal(err)
	}
	wantEnds = []int64{int64(2*n + 1), int64(4*n + 1 + 3), int64(len(in))}
	if !equalSeqs(seqs, wantSeqs) || !equalInts(ends, wantEnds) {
		t.Fatalf("by bytes: got %v ends %v, want %v ends %v", seqs, ends, wantSeqs, wantEnds)
	}
}

func TestBatchReaderOversizedEvent(t *testing.T) {
	lines := batchLines(t, 10, 500, 10)
	in := strings.Join(lines, "")
	limit := len(lines[1]) - 1

	r := NewBatchReader(strings.NewReader(in), wire.BatchLimits{MaxBytes: limit, MaxEvents: 100})
	_, err := r.Next()
	var le *wire.LineError
	if !errors.As(err, &le) || !errors.Is(err, wire.ErrEventTooLarge) || le.Line != 2 || le.Size != limit+1 {
		t.Fatalf("got %v (%+v), want line 2 of %d bytes too large", err, le, limit+1)
	}
	if got, want := err.Error(), "line 2: event exceeds the batch limit"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}

	seqs, _, err := readBatches(t, NewBatchReader(strings.NewReader(in), wire.BatchLimits{MaxBytes: limit, MaxEvents: 100, OversizeAlone: true}))
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int64{{0}, {1}, {2}}; !equalSeqs(seqs, want) {
		t.Fatalf("oversize alone: got %v, want %v", seqs, want)
	}
}

func TestBatchReaderBadLineDropsItsBatch(t *testing.T) {
	lines := batchLines(t, 10, 10, 10)
	in := lines[0] + lines[1] + lines[2] + `{"type":"future/thing","seq":3,"time":1,"data":{}}` + "\n"
	r := NewBatchReader(strings.NewReader(in), wire.BatchLimits{MaxBytes: 1 << 20, MaxEvents: 2})
	seqs, _, err := readBatches(t, r)
	if want := [][]int64{{0, 1}}; !equalSeqs(seqs, want) {
		t.Fatalf("got %v before the bad line, want %v", seqs, want)
	}
	if got, want := err.Error(), `line 4: not a valid event: type "future/thing" is unknown to this build and not marked ignorable`; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
}

func equalSeqs(a, b [][]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalInts(a[i], b[i]) {
			return false
		}
	}
	return true
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
