package provider_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

// recordText is the text a record holds, decoded from its chunks: what
// LimitRecordText counts (the deltas, the blocks of the block-ends, and
// the id and name of every tool-call delta).
func recordText(t *testing.T, rec []provider.RecordedChunk) int {
	t.Helper()
	n := 0
	for _, r := range rec {
		var c struct {
			Type, Text, ID, Name, ArgumentsDelta string
			Block                                provider.Block
		}
		if err := json.Unmarshal(r.Chunk, &c); err != nil {
			t.Fatal(err)
		}
		n += len(c.Text) + len(c.ID) + len(c.Name) + len(c.ArgumentsDelta)
		n += len(c.Block.Text) + len(c.Block.Signature) + len(c.Block.ID) + len(c.Block.Name) + len(c.Block.Arguments)
	}
	return n
}

// plainOf is the usage and finish chunks of a record.
func plainOf(rec []provider.RecordedChunk) []provider.RecordedChunk {
	out := []provider.RecordedChunk{}
	for _, r := range rec {
		if strings.HasPrefix(string(r.Chunk), `{"type":"usage"`) || strings.HasPrefix(string(r.Chunk), `{"type":"finish"`) {
			out = append(out, r)
		}
	}
	return out
}

// TestLimitRecordTextRandomStreams: with a limit, the record is the whole
// record while the text it would hold is within the limit, and past it
// only the usage and finish chunks, with their times; either way it
// replays, and the content, usage and finish are those of the unlimited
// assembler. The limit is checked after every chunk (mid-stream: an
// interrupted call's record).
func TestLimitRecordTextRandomStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	elided := 0
	for iter := range 3000 {
		chunks := randomStream(r)
		limit := r.IntN(300)
		full, lim := provider.NewAssembler(), provider.NewAssembler()
		lim.LimitRecordText(limit)
		for i, tc := range chunks {
			if err := full.Push(tc.Chunk, tc.Time); err != nil {
				t.Fatalf("stream %d chunk %d: %v", iter, i, err)
			}
			if err := lim.Push(tc.Chunk, tc.Time); err != nil {
				t.Fatalf("stream %d chunk %d (limited): %v", iter, i, err)
			}
			got, whole := lim.Record(), full.Record()
			if total := recordText(t, whole); total <= limit {
				if lim.RecordElided() || !reflect.DeepEqual(got, whole) {
					t.Fatalf("stream %d chunk %d: %d bytes of text within the limit %d, but the record differs from the whole one:\n got %v\nwant %v",
						iter, i, total, limit, got, whole)
				}
				continue
			}
			if !lim.RecordElided() {
				t.Fatalf("stream %d chunk %d: past the limit %d, not elided", iter, i, limit)
			}
			if want := plainOf(whole); !reflect.DeepEqual(append([]provider.RecordedChunk{}, got...), want) {
				t.Fatalf("stream %d chunk %d: elided record\n got %v\nwant %v", iter, i, got, want)
			}
			if _, err := provider.ReplayRecord(got); err != nil {
				t.Fatalf("stream %d chunk %d: the elided record does not replay: %v", iter, i, err)
			}
		}
		if lim.RecordElided() {
			elided++
		}
		if !reflect.DeepEqual(lim.Content(), full.Content()) || !reflect.DeepEqual(lim.Usage(), full.Usage()) ||
			lim.Finish() != full.Finish() || lim.ShownText() != full.ShownText() || !reflect.DeepEqual(lim.Interrupted(), full.Interrupted()) {
			t.Fatalf("stream %d: the limit changed what the assembler folds", iter)
		}
	}
	if elided < 500 || elided > 2500 {
		t.Fatalf("%d of 3000 streams elided: the test does not exercise both sides of the limit", elided)
	}
}

// TestLimitRecordTextStoresTheTextOnce: a long answer's record keeps none
// of its text, only its usage and finish with their times.
func TestLimitRecordTextStoresTheTextOnce(t *testing.T) {
	a := provider.NewAssembler()
	a.LimitRecordText(1 << 10)
	push(t, a, reasoning("ponder "), text("Here is "))
	for range 100 {
		push(t, a, text("UNIQUE-MARKER-0123456789 "))
	}
	push(t, a, call(0, "call-1", "write_file", `{"path":"a.txt","content":"`+strings.Repeat("z", 2000)+`"}`),
		usage(12, 3456), finish(provider.FinishToolCalls))
	require := func(ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Fatalf(format, args...)
		}
	}
	got := recordStrings(a)
	require(reflect.DeepEqual(got, []string{
		`203 {"type":"usage","usage":{"inputTokens":12,"outputTokens":3456}}`,
		`204 {"type":"finish","reason":{"kind":"tool-calls"}}`,
	}), "elided record %q", got)
	content, err := json.Marshal(a.Content())
	require(err == nil, "%v", err)
	require(strings.Count(string(content), "UNIQUE-MARKER") == 100, "the content lost text: %.200s", content)
	require(a.RecordElided(), "not reported elided")

	// A limit of -1 (the default) keeps the whole record.
	b := provider.NewAssembler()
	b.LimitRecordText(-1)
	push(t, b, text(strings.Repeat("x", 5000)), text("y"), finish(provider.FinishStop))
	require(!b.RecordElided() && len(b.Record()) == 5, "an unlimited record: %d chunks", len(b.Record()))
}
