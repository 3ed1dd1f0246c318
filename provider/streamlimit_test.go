package provider_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

// textOf is the text a chunk repeats from the content: what
// LimitStreamText counts.
func textOf(c provider.Chunk) int {
	return len(c.Delta) + len(c.Signature) + len(c.ID) + len(c.Name)
}

// TestLimitStreamTextRandomStreams: with a limit, the stream record is the
// whole record while the chunks' text is within it, and past it only the
// usage and finish chunk records, in order with their times; either way it
// replays, and the content, usage and finish are those of the unlimited
// assembler. The limit is checked after every chunk (mid-stream: an
// interrupted call's record).
func TestLimitStreamTextRandomStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	elided := 0
	for iter := range 3000 {
		chunks := randomStream(r)
		limit := r.IntN(200)
		full, lim := provider.NewAssembler(), provider.NewAssembler()
		lim.LimitStreamText(limit)
		total := 0
		var plain []provider.TimedChunk // the usage and finish chunks so far
		for i, tc := range chunks {
			if err := full.Push(tc.Chunk, tc.Time); err != nil {
				t.Fatalf("stream %d chunk %d: %v", iter, i, err)
			}
			if err := lim.Push(tc.Chunk, tc.Time); err != nil {
				t.Fatalf("stream %d chunk %d (limited): %v", iter, i, err)
			}
			total += textOf(tc.Chunk)
			if tc.Chunk.Type == provider.ChunkUsage || tc.Chunk.Type == provider.ChunkFinish {
				plain = append(plain, tc)
			}
			got := lim.Stream()
			if total <= limit {
				if lim.StreamElided() || !reflect.DeepEqual(got, full.Stream()) {
					t.Fatalf("stream %d chunk %d: %d bytes of text within the limit %d, but the record differs from the whole one:\n got %s\nwant %s",
						iter, i, total, limit, got, full.Stream())
				}
				continue
			}
			if !lim.StreamElided() {
				t.Fatalf("stream %d chunk %d: %d bytes of text past the limit %d, not elided", iter, i, total, limit)
			}
			replayed, err := provider.ReplayStreamTimed(got)
			if err != nil {
				t.Fatalf("stream %d chunk %d: the elided record does not replay: %v\n%s", iter, i, err, got)
			}
			if !(len(replayed) == 0 && len(plain) == 0) && !reflect.DeepEqual(replayed, plain) {
				t.Fatalf("stream %d chunk %d: elided record\n got %+v\nwant %+v", iter, i, replayed, plain)
			}
		}
		if lim.StreamElided() {
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

// TestLimitStreamTextStoresTheTextOnce: a long answer's record keeps none
// of its text, only its usage and finish with their times.
func TestLimitStreamTextStoresTheTextOnce(t *testing.T) {
	a := provider.NewAssembler()
	a.LimitStreamText(1 << 10)
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
	raw, err := json.Marshal(a.Stream())
	require(err == nil, "%v", err)
	require(string(raw) == `[{"type":"chunk","time":203,"chunk":{"type":"usage","usage":{"inputTokens":12,"outputTokens":3456}}},{"type":"chunk","time":204,"chunk":{"type":"finish","finish":"tool-calls"}}]`,
		"elided record %s", raw)
	content, err := json.Marshal(a.Content())
	require(err == nil, "%v", err)
	require(strings.Count(string(content), "UNIQUE-MARKER") == 100, "the content lost text: %.200s", content)
	require(a.StreamElided(), "not reported elided")

	// A limit of -1 (the default) keeps the whole record.
	b := provider.NewAssembler()
	b.LimitStreamText(-1)
	push(t, b, text(strings.Repeat("x", 5000)), text("y"), finish(provider.FinishStop))
	require(!b.StreamElided() && len(b.Stream()) == 2, "an unlimited record: %d records", len(b.Stream()))
}
