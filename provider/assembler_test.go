package provider_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// push pushes chunks at times 100, 101, ... and fails the test on a refusal.
func push(t *testing.T, a *provider.Assembler, chunks ...provider.Chunk) {
	t.Helper()
	for i, c := range chunks {
		if err := a.Push(c, int64(100+a.Chunks())); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
}

func text(s string) provider.Chunk { return provider.Chunk{Type: provider.ChunkText, Delta: s} }
func reasoning(s string) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkReasoning, Delta: s}
}
func call(i int, id, name, delta string) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkToolCall, Index: i, ID: id, Name: name, Delta: delta}
}
func finish(f provider.FinishReason) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkFinish, Finish: f}
}
func usage(in, out int64) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkUsage, Usage: &provider.Usage{InputTokens: in, OutputTokens: out}}
}

// recordStrings renders the record as "time chunk" lines.
func recordStrings(a *provider.Assembler) []string {
	var out []string
	for _, r := range a.Record() {
		out = append(out, strconv.FormatInt(r.Time, 10)+" "+string(r.Chunk))
	}
	return out
}

// replayed pushes the replay of a's record into a new Assembler.
func replayed(t *testing.T, a *provider.Assembler) *provider.Assembler {
	t.Helper()
	chunks, err := provider.ReplayRecord(a.Record())
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	b := provider.NewAssembler()
	for i, c := range chunks {
		if err := b.Push(c.Chunk, c.Time); err != nil {
			t.Fatalf("replayed chunk %d: %v", i, err)
		}
	}
	return b
}

func TestAssemblerFoldsAResponse(t *testing.T) {
	a := provider.NewAssembler()
	push(t, a,
		reasoning("th"), reasoning("ink"),
		text("Hel"), text("lo \"you\"\n"), text("<&>\u2028"),
		call(0, "c1", "read_file", `{"pa`), call(1, "c2", "list_dir", ""), call(0, "", "", `th":"a"}`),
		call(1, "c2", "list_dir", "{}"),
		usage(10, 3),
		finish(provider.FinishToolCalls),
	)
	want := []provider.Block{
		{Type: "reasoning", Text: "think"},
		{Type: "text", Text: "Hello \"you\"\n<&>\u2028"},
		{Type: "tool-call", ID: "c1", Name: "read_file", Arguments: `{"path":"a"}`},
		{Type: "tool-call", ID: "c2", Name: "list_dir", Arguments: "{}"},
	}
	if got := a.Content(); !reflect.DeepEqual(got, want) {
		t.Fatalf("content:\n got %+v\nwant %+v", got, want)
	}
	if got := a.Interrupted(); !reflect.DeepEqual(got, want[:2]) {
		t.Fatalf("interrupted: %+v", got)
	}
	if got := a.ToolCalls(); !reflect.DeepEqual(got, want[2:]) {
		t.Fatalf("tool calls: %+v", got)
	}
	if got := a.Usage(); got == nil || *got != (provider.Usage{InputTokens: 10, OutputTokens: 3}) {
		t.Fatalf("usage: %+v", got)
	}
	if a.Finish() != "tool-calls" || a.ShownText() != "Hello \"you\"\n<&>\u2028" || a.Chunks() != 11 {
		t.Fatalf("finish %q shown %q chunks %d", a.Finish(), a.ShownText(), a.Chunks())
	}
	// The harness's shapes: block-start, deltas and block-end per block
	// (indexes are content positions; every tool-call delta names its
	// call), the tool-call blocks ending at the finish, then usage and
	// finish.
	wantRecord := []string{
		`100 {"type":"block-start","index":0,"blockType":"reasoning"}`,
		`100 {"type":"reasoning-delta","index":0,"text":"th"}`,
		`101 {"type":"reasoning-delta","index":0,"text":"ink"}`,
		`102 {"type":"block-end","index":0,"block":{"type":"reasoning","text":"think"}}`,
		`102 {"type":"block-start","index":1,"blockType":"text"}`,
		`102 {"type":"text-delta","index":1,"text":"Hel"}`,
		`103 {"type":"text-delta","index":1,"text":"lo \"you\"\n"}`,
		`104 {"type":"text-delta","index":1,"text":"<&>` + "\u2028" + `"}`,
		`105 {"type":"block-end","index":1,"block":{"type":"text","text":"Hello \"you\"\n<&>` + "\u2028" + `"}}`,
		`105 {"type":"block-start","index":2,"blockType":"tool-call"}`,
		`105 {"type":"tool-call-delta","index":2,"id":"c1","name":"read_file","argumentsDelta":"{\"pa"}`,
		`106 {"type":"block-start","index":3,"blockType":"tool-call"}`,
		`106 {"type":"tool-call-delta","index":3,"id":"c2","name":"list_dir","argumentsDelta":""}`,
		`107 {"type":"tool-call-delta","index":2,"id":"c1","name":"read_file","argumentsDelta":"th\":\"a\"}"}`,
		`108 {"type":"tool-call-delta","index":3,"id":"c2","name":"list_dir","argumentsDelta":"{}"}`,
		`110 {"type":"block-end","index":2,"block":{"type":"tool-call","id":"c1","name":"read_file","arguments":"{\"path\":\"a\"}"}}`,
		`110 {"type":"block-end","index":3,"block":{"type":"tool-call","id":"c2","name":"list_dir","arguments":"{}"}}`,
		`109 {"type":"usage","usage":{"inputTokens":10,"outputTokens":3}}`,
		`110 {"type":"finish","reason":{"kind":"tool-calls"}}`,
	}
	if got := recordStrings(a); !reflect.DeepEqual(got, wantRecord) {
		t.Fatalf("record:\n got %q\nwant %q", got, wantRecord)
	}
	if b := replayed(t, a); !reflect.DeepEqual(b.Content(), want) || !reflect.DeepEqual(recordStrings(b), wantRecord) {
		t.Fatalf("the replayed record folds into %+v, records %q", b.Content(), recordStrings(b))
	}
}

func TestAssemblerBlocksFollowModelOrder(t *testing.T) {
	a := provider.NewAssembler()
	// A usage chunk does not close the text block and is recorded at the
	// end; a reasoning delta closes it; an empty delta that continues
	// nothing closes the open block and is not recorded, nor is an empty
	// delta that continues one.
	push(t, a, text("a"), usage(1, 1), text("b"), text("c"), reasoning("r"), text("d"),
		reasoning(""), text("e"), text(""), text("f"))
	want := []provider.Block{
		{Type: "text", Text: "abc"},
		{Type: "reasoning", Text: "r"},
		{Type: "text", Text: "d"},
		{Type: "text", Text: "ef"},
	}
	if got := a.Content(); !reflect.DeepEqual(got, want) {
		t.Fatalf("content:\n got %+v\nwant %+v", got, want)
	}
	wantRecord := []string{
		`100 {"type":"block-start","index":0,"blockType":"text"}`,
		`100 {"type":"text-delta","index":0,"text":"a"}`,
		`102 {"type":"text-delta","index":0,"text":"b"}`,
		`103 {"type":"text-delta","index":0,"text":"c"}`,
		`104 {"type":"block-end","index":0,"block":{"type":"text","text":"abc"}}`,
		`104 {"type":"block-start","index":1,"blockType":"reasoning"}`,
		`104 {"type":"reasoning-delta","index":1,"text":"r"}`,
		`105 {"type":"block-end","index":1,"block":{"type":"reasoning","text":"r"}}`,
		`105 {"type":"block-start","index":2,"blockType":"text"}`,
		`105 {"type":"text-delta","index":2,"text":"d"}`,
		`106 {"type":"block-end","index":2,"block":{"type":"text","text":"d"}}`,
		`107 {"type":"block-start","index":3,"blockType":"text"}`,
		`107 {"type":"text-delta","index":3,"text":"e"}`,
		`109 {"type":"text-delta","index":3,"text":"f"}`,
		`101 {"type":"usage","usage":{"inputTokens":1,"outputTokens":1}}`,
	}
	if got := recordStrings(a); !reflect.DeepEqual(got, wantRecord) {
		t.Fatalf("record:\n got %q\nwant %q", got, wantRecord)
	}
	if a.Finish() != "" {
		t.Fatalf("finish %q before a finish chunk", a.Finish())
	}
	if b := replayed(t, a); !reflect.DeepEqual(b.Content(), want) || !reflect.DeepEqual(recordStrings(b), wantRecord) {
		t.Fatalf("the replayed record folds into %+v, records %q", b.Content(), recordStrings(b))
	}
}

// A tool-call chunk closes the open text (or reasoning) block: text after
// it starts a new block placed after the call, never joined to the text
// before it, and its chunks name the new block; the record replays to the
// same content.
func TestAssemblerToolCallClosesTheOpenTextBlock(t *testing.T) {
	a := provider.NewAssembler()
	push(t, a, text("Let me "), text("look."), call(0, "c1", "list_dir", "{}"), text("Then "), text("answer."),
		reasoning("hm"), call(1, "c2", "read_file", "{}"), reasoning("ok"), finish(provider.FinishToolCalls))
	want := []provider.Block{
		{Type: "text", Text: "Let me look."},
		{Type: "tool-call", ID: "c1", Name: "list_dir", Arguments: "{}"},
		{Type: "text", Text: "Then answer."},
		{Type: "reasoning", Text: "hm"},
		{Type: "tool-call", ID: "c2", Name: "read_file", Arguments: "{}"},
		{Type: "reasoning", Text: "ok"},
	}
	if got := a.Content(); !reflect.DeepEqual(got, want) {
		t.Fatalf("content:\n got %+v\nwant %+v", got, want)
	}
	wantRecord := []string{
		`100 {"type":"block-start","index":0,"blockType":"text"}`,
		`100 {"type":"text-delta","index":0,"text":"Let me "}`,
		`101 {"type":"text-delta","index":0,"text":"look."}`,
		`102 {"type":"block-end","index":0,"block":{"type":"text","text":"Let me look."}}`,
		`102 {"type":"block-start","index":1,"blockType":"tool-call"}`,
		`102 {"type":"tool-call-delta","index":1,"id":"c1","name":"list_dir","argumentsDelta":"{}"}`,
		`103 {"type":"block-start","index":2,"blockType":"text"}`,
		`103 {"type":"text-delta","index":2,"text":"Then "}`,
		`104 {"type":"text-delta","index":2,"text":"answer."}`,
		`105 {"type":"block-end","index":2,"block":{"type":"text","text":"Then answer."}}`,
		`105 {"type":"block-start","index":3,"blockType":"reasoning"}`,
		`105 {"type":"reasoning-delta","index":3,"text":"hm"}`,
		`106 {"type":"block-end","index":3,"block":{"type":"reasoning","text":"hm"}}`,
		`106 {"type":"block-start","index":4,"blockType":"tool-call"}`,
		`106 {"type":"tool-call-delta","index":4,"id":"c2","name":"read_file","argumentsDelta":"{}"}`,
		`107 {"type":"block-start","index":5,"blockType":"reasoning"}`,
		`107 {"type":"reasoning-delta","index":5,"text":"ok"}`,
		`108 {"type":"block-end","index":5,"block":{"type":"reasoning","text":"ok"}}`,
		`108 {"type":"block-end","index":1,"block":{"type":"tool-call","id":"c1","name":"list_dir","arguments":"{}"}}`,
		`108 {"type":"block-end","index":4,"block":{"type":"tool-call","id":"c2","name":"read_file","arguments":"{}"}}`,
		`108 {"type":"finish","reason":{"kind":"tool-calls"}}`,
	}
	if got := recordStrings(a); !reflect.DeepEqual(got, wantRecord) {
		t.Fatalf("record:\n got %q\nwant %q", got, wantRecord)
	}
	if b := replayed(t, a); !reflect.DeepEqual(b.Content(), want) || !reflect.DeepEqual(recordStrings(b), wantRecord) {
		t.Fatalf("the replayed record folds into %+v, records %q", b.Content(), recordStrings(b))
	}
}

// Mid-stream, the open block has no block-end; the record grows as the
// stream goes on. Times may go back (a clock step) and are kept as they
// came.
func TestAssemblerRecordMidStream(t *testing.T) {
	a := provider.NewAssembler()
	for i, tm := range []int64{50, 40} {
		if err := a.Push(text(string(rune('a'+i))), tm); err != nil {
			t.Fatal(err)
		}
	}
	mid := []string{
		`50 {"type":"block-start","index":0,"blockType":"text"}`,
		`50 {"type":"text-delta","index":0,"text":"a"}`,
		`40 {"type":"text-delta","index":0,"text":"b"}`,
	}
	if got := recordStrings(a); !reflect.DeepEqual(got, mid) {
		t.Fatalf("mid-stream: %q", got)
	}
	if err := a.Push(finish("stop"), 1<<40); err != nil {
		t.Fatal(err)
	}
	want := append(mid,
		`1099511627776 {"type":"block-end","index":0,"block":{"type":"text","text":"ab"}}`,
		`1099511627776 {"type":"finish","reason":{"kind":"stop"}}`)
	if got := recordStrings(a); !reflect.DeepEqual(got, want) {
		t.Fatalf("record: %q", got)
	}
}

func TestAssemblerShownTail(t *testing.T) {
	a := provider.NewAssembler()
	push(t, a, text("ab"), reasoning("hidden"), text("çd"))
	if a.ShownText() != "abçd" || a.ShownLen() != 5 {
		t.Fatalf("shown %q len %d", a.ShownText(), a.ShownLen())
	}
	for _, tc := range []struct {
		max  int
		off  int
		tail string
	}{{0, 5, ""}, {1, 4, "d"}, {2, 4, "d"}, {3, 2, "çd"}, {10, 0, "abçd"}, {-1, 5, ""}} {
		off, tail := a.ShownTail(tc.max)
		if off != tc.off || tail != tc.tail {
			t.Errorf("ShownTail(%d) = %d %q, want %d %q", tc.max, off, tail, tc.off, tc.tail)
		}
	}
}

func TestAssemblerRefusesMalformedStreams(t *testing.T) {
	started := call(0, "c1", "read_file", "{")
	cases := []struct {
		name   string
		before []provider.Chunk
		bad    provider.Chunk
		time   int64
		want   string
	}{
		{"delta for a call never started", nil, call(0, "", "", "{}"), 0,
			`chunk 0 ("tool-call"): malformed model stream: tool-call delta for index 0, which was never started (next index is 0)`},
		{"call index skipped", []provider.Chunk{started}, call(2, "c3", "x", ""), 0,
			"tool-call delta for index 2, which was never started (next index is 1)"},
		{"negative index", nil, call(-1, "c", "x", ""), 0, "tool-call index -1 is negative"},
		{"first chunk without name", nil, call(0, "c1", "", "{}"), 0, "the first chunk of tool call 0 must carry its id and name"},
		{"first chunk without id", nil, call(0, "", "read_file", "{}"), 0, "the first chunk of tool call 0 must carry its id and name"},
		{"id changes", []provider.Chunk{started}, call(0, "c2", "", "}"), 0, `tool call 0 has id "c2", not "c1" as on its first chunk`},
		{"name changes", []provider.Chunk{started}, call(0, "", "write_file", "}"), 0, `tool call 0 has name "write_file", not "read_file" as on its first chunk`},
		{"duplicate id", []provider.Chunk{started}, call(1, "c1", "x", ""), 0, `tool call 1 reuses the id "c1" of tool call 0`},
		{"chunk after finish", []provider.Chunk{text("a"), finish("stop")}, text("b"), 0,
			`chunk 2 ("text"): malformed model stream: a chunk after the finish chunk`},
		{"second finish", []provider.Chunk{finish("stop")}, finish("stop"), 0, "a chunk after the finish chunk"},
		{"unknown finish", nil, finish("done"), 0, `unknown finish reason "done"`},
		{"unknown type", nil, provider.Chunk{Type: "image"}, 0, `unknown chunk type "image"`},
		{"text with an id", nil, provider.Chunk{Type: "text", Delta: "a", ID: "x"}, 0, "a text chunk may carry only a delta"},
		{"reasoning with index", nil, provider.Chunk{Type: "reasoning", Delta: "a", Index: 1}, 0, "a reasoning chunk may carry only a delta"},
		{"tool call with finish", nil, provider.Chunk{Type: "tool-call", ID: "c", Name: "n", Finish: "stop"}, 0, "a tool-call chunk may carry only index, id, name and delta"},
		{"usage without usage", nil, provider.Chunk{Type: "usage"}, 0, "a usage chunk without usage"},
		{"usage with delta", nil, provider.Chunk{Type: "usage", Usage: &provider.Usage{}, Delta: "x"}, 0, "a usage chunk may carry only usage"},
		{"negative tokens", nil, usage(-1, 0), 0, "token count -1 is outside 0..9007199254740991"},
		{"unsafe tokens", nil, usage(0, 1<<53), 0, "token count 9007199254740992 is outside 0..9007199254740991"},
		{"finish with delta", nil, provider.Chunk{Type: "finish", Finish: "stop", Delta: "x"}, 0, "a finish chunk may carry only the finish reason"},
		{"invalid utf-8", nil, text("a\xffb"), 0, "a delta, id or name that is not valid UTF-8"},
		{"negative time", nil, text("a"), -1, "time -1 is outside 0..9007199254740991"},
		{"unsafe time", nil, text("a"), 1 << 53, "time 9007199254740992 is outside 0..9007199254740991"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := provider.NewAssembler()
			push(t, a, tc.before...)
			before := recordStrings(a)
			content := a.Content()
			err := a.Push(tc.bad, tc.time)
			if err == nil {
				t.Fatalf("accepted %+v", tc.bad)
			}
			if !errors.Is(err, provider.ErrMalformedStream) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q and match ErrMalformedStream", err, tc.want)
			}
			if !reflect.DeepEqual(recordStrings(a), before) || !reflect.DeepEqual(a.Content(), content) || a.Chunks() != len(tc.before) {
				t.Fatalf("a refused chunk changed the assembler")
			}
		})
	}
}

func TestReplayRecordRefusesMalformedRecords(t *testing.T) {
	start := `{"type":"block-start","index":0,"blockType":"text"}`
	cases := []struct {
		name   string
		chunks []string
		want   string
	}{
		{"not json", []string{`{`}, "recorded chunk 0: unexpected EOF"},
		{"unknown field", []string{`{"type":"usage","usage":{"inputTokens":1,"outputTokens":1},"x":1}`}, `recorded chunk 0: json: unknown field "x"`},
		{"unknown usage field", []string{`{"type":"usage","usage":{"inputTokens":1,"outputTokens":1,"cacheWriteTokens":1}}`}, `json: unknown field "cacheWriteTokens"`},
		{"unknown chunk type", []string{`{"type":"text","index":0,"text":"a"}`}, `recorded chunk 0: unknown chunk type "text"`},
		{"delta without index", []string{start, `{"type":"text-delta","text":"a"}`}, "recorded chunk 1: the fields of a text-delta chunk are wrong"},
		{"delta with a block type", []string{start, `{"type":"text-delta","index":0,"blockType":"text","text":"a"}`}, "the fields of a text-delta chunk are wrong"},
		{"tool-call delta without id", []string{`{"type":"block-start","index":0,"blockType":"tool-call"}`, `{"type":"tool-call-delta","index":0,"name":"n","argumentsDelta":""}`},
			"the fields of a tool-call-delta chunk are wrong"},
		{"finish without reason", []string{`{"type":"finish"}`}, "the fields of a finish chunk are wrong"},
		{"block-start out of order", []string{`{"type":"block-start","index":1,"blockType":"text"}`}, `recorded chunk 0: block-start 1 of type "text" (the next block is 0)`},
		{"unknown block type", []string{`{"type":"block-start","index":0,"blockType":"image"}`}, `block-start 0 of type "image"`},
		{"delta for a block not started", []string{`{"type":"text-delta","index":0,"text":"a"}`}, "recorded chunk 0: a text-delta for block 0, which is not started or has ended"},
		{"delta after the block-end", []string{start, `{"type":"text-delta","index":0,"text":"a"}`, `{"type":"block-end","index":0,"block":{"type":"text","text":"a"}}`, `{"type":"text-delta","index":0,"text":"b"}`},
			"recorded chunk 3: a text-delta for block 0, which is not started or has ended"},
		{"delta of another kind", []string{start, `{"type":"reasoning-delta","index":0,"text":"a"}`}, "recorded chunk 1: a reasoning-delta for a text block"},
		{"an empty first delta", []string{start, `{"type":"text-delta","index":0,"text":""}`}, "recorded chunk 1: the delta folds into block -1, not 0"},
		{"a second text block while the first is open", []string{start, `{"type":"text-delta","index":0,"text":"a"}`, `{"type":"block-start","index":1,"blockType":"text"}`, `{"type":"text-delta","index":1,"text":"b"}`},
			"recorded chunk 3: the delta folds into block 0, not 1"},
		{"another call id", []string{`{"type":"block-start","index":0,"blockType":"tool-call"}`, `{"type":"tool-call-delta","index":0,"id":"c1","name":"n","argumentsDelta":"{"}`, `{"type":"tool-call-delta","index":0,"id":"c2","argumentsDelta":"}"}`},
			`recorded chunk 2: a tool-call delta of call "c2" for block 0`},
		{"a first tool-call delta without its name", []string{`{"type":"block-start","index":0,"blockType":"tool-call"}`, `{"type":"tool-call-delta","index":0,"id":"c1","argumentsDelta":"{"}`},
			"the first chunk of tool call 0 must carry its id and name"},
		{"a block-end that differs", []string{start, `{"type":"text-delta","index":0,"text":"a"}`, `{"type":"block-end","index":0,"block":{"type":"text","text":"b"}}`},
			"recorded chunk 2: malformed model stream: block-end 0 holds"},
		{"a block-end of an empty block", []string{start, `{"type":"block-end","index":0,"block":{"type":"text","text":""}}`},
			"recorded chunk 1: malformed model stream: block-end 0 of a block that is not open"},
		{"an unknown finish", []string{`{"type":"finish","reason":{"kind":"error"}}`}, `recorded chunk 0: chunk 0 ("finish"): malformed model stream: unknown finish reason "error"`},
		{"a chunk after the finish", []string{`{"type":"finish","reason":{"kind":"stop"}}`, `{"type":"usage","usage":{"inputTokens":1,"outputTokens":1}}`},
			"a chunk after the finish chunk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rec []provider.RecordedChunk
			for i, c := range tc.chunks {
				rec = append(rec, provider.RecordedChunk{Time: int64(i), Chunk: json.RawMessage(c)})
			}
			_, err := provider.ReplayRecord(rec)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, provider.ErrMalformedStream) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q and match ErrMalformedStream", err, tc.want)
			}
		})
	}
}

// randomString returns a short string drawn from characters that exercise
// JSON escaping and multi-byte UTF-8.
func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", " ", "\"", "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "<", "&", "\u2028", "é", "日本", "😀", "{", "}", "/"}
	n := r.IntN(5)
	var b strings.Builder
	for range n {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// randomStream returns a random well-formed timed chunk stream, finished or
// not.
func randomStream(r *rand.Rand) []provider.TimedChunk {
	var out []provider.TimedChunk
	calls := 0
	tm := r.Int64N(1 << 45)
	n := r.IntN(40)
	for range n {
		switch r.IntN(10) {
		case 0:
			tm -= r.Int64N(5) // the clock may step back
		default:
			tm += r.Int64N(3)
		}
		tm = max(tm, 0)
		var c provider.Chunk
		switch k := r.IntN(12); {
		case k < 4:
			c = provider.Chunk{Type: provider.ChunkText, Delta: randomString(r)}
		case k < 6:
			c = provider.Chunk{Type: provider.ChunkReasoning, Delta: randomString(r)}
		case k < 10:
			if calls == 0 || r.IntN(3) == 0 {
				c = provider.Chunk{Type: provider.ChunkToolCall, Index: calls, ID: "call-" + randomString(r) + string(rune('A'+calls)), Name: "tool" + randomString(r), Delta: randomString(r)}
				calls++
			} else {
				c = provider.Chunk{Type: provider.ChunkToolCall, Index: r.IntN(calls), Delta: randomString(r)}
			}
		default:
			c = provider.Chunk{Type: provider.ChunkUsage, Usage: &provider.Usage{InputTokens: r.Int64N(1000), OutputTokens: r.Int64N(1000), ReasoningTokens: r.Int64N(2), CacheReadTokens: r.Int64N(2)}}
		}
		out = append(out, provider.TimedChunk{Chunk: c, Time: tm})
	}
	if r.IntN(2) == 0 {
		f := []provider.FinishReason{"stop", "tool-calls", "max-tokens"}[r.IntN(3)]
		out = append(out, provider.TimedChunk{Chunk: provider.Chunk{Type: provider.ChunkFinish, Finish: f}, Time: tm})
	}
	return out
}

// modelContent folds chunks the simple way: the expected Content.
func modelContent(chunks []provider.TimedChunk) []provider.Block {
	var blocks []provider.Block
	open := -1
	callBlock := map[int]int{}
	for _, tc := range chunks {
		c := tc.Chunk
		switch c.Type {
		case provider.ChunkText, provider.ChunkReasoning:
			typ := string(c.Type)
			switch {
			case open >= 0 && blocks[open].Type == typ:
				blocks[open].Text += c.Delta
			case c.Delta == "":
				open = -1
			default:
				blocks = append(blocks, provider.Block{Type: typ, Text: c.Delta})
				open = len(blocks) - 1
			}
		case provider.ChunkToolCall:
			open = -1
			i, ok := callBlock[c.Index]
			if !ok {
				blocks = append(blocks, provider.Block{Type: "tool-call", ID: c.ID, Name: c.Name})
				i = len(blocks) - 1
				callBlock[c.Index] = i
			}
			blocks[i].Arguments += c.Delta
		}
	}
	return blocks
}

func TestAssemblerRecordRoundTripsRandomStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	header := wire.Header{Version: wire.FormatVersion, ID: "s1", CreatedAt: 1}
	for iter := range 3000 {
		chunks := randomStream(r)
		a := provider.NewAssembler()
		for i, tc := range chunks {
			if err := a.Push(tc.Chunk, tc.Time); err != nil {
				t.Fatalf("stream %d chunk %d: %v", iter, i, err)
			}
		}
		content := a.Content()
		if want := modelContent(chunks); !(len(want) == 0 && len(content) == 0) && !reflect.DeepEqual(content, want) {
			t.Fatalf("stream %d: content\n got %+v\nwant %+v", iter, content, want)
		}
		var shown strings.Builder
		var interrupted []provider.Block
		for _, b := range content {
			if b.Type == "text" {
				shown.WriteString(b.Text)
			}
			if b.Type != "tool-call" {
				interrupted = append(interrupted, b)
			}
		}
		if a.ShownText() != shown.String() {
			t.Fatalf("stream %d: shown %q, want %q", iter, a.ShownText(), shown.String())
		}
		if got := a.Interrupted(); !reflect.DeepEqual(got, interrupted) {
			t.Fatalf("stream %d: interrupted %+v, want %+v", iter, got, interrupted)
		}
		record := a.Record()
		for i, rec := range record {
			canon, err := session.CanonicalJSON(rec.Chunk)
			if err != nil || !bytes.Equal(canon, rec.Chunk) {
				t.Fatalf("stream %d chunk %d not canonical lossless JSON (%v):\n %s\n %s", iter, i, err, rec.Chunk, canon)
			}
		}
		chunksBack, err := provider.ReplayRecord(record)
		if err != nil {
			t.Fatalf("stream %d: replay: %v\n%q", iter, err, recordStrings(a))
		}
		again := provider.NewAssembler()
		for _, tc := range chunksBack {
			if err := again.Push(tc.Chunk, tc.Time); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(again.Content(), content) || !reflect.DeepEqual(again.Usage(), a.Usage()) || again.Finish() != a.Finish() {
			t.Fatalf("stream %d: the replayed record folds into\n %+v\nnot\n %+v", iter, again.Content(), content)
		}
		if !reflect.DeepEqual(again.Record(), record) {
			t.Fatalf("stream %d: the record of the replayed chunks differs:\n %q\n %q", iter, recordStrings(again), recordStrings(a))
		}
		// The record is storable as assistant/chunk events cited by the
		// assistant/message.
		var events []session.Event
		var seqs []int64
		for i, rec := range record {
			data, err := session.MarshalData(map[string]any{"turn": 1, "step": 1, "chunk": rec.Chunk})
			if err != nil {
				t.Fatalf("stream %d: %v", iter, err)
			}
			events = append(events, session.Event{Type: wire.TypeAssistantChunk, Seq: int64(i), Time: rec.Time, Data: data})
			seqs = append(seqs, int64(i))
		}
		data, err := session.MarshalData(map[string]any{
			"turn": 1, "step": 1,
			"message": map[string]any{"id": "m1", "role": "assistant", "content": content},
			"usage":   a.Usage(),
		})
		if err != nil {
			t.Fatalf("stream %d: %v", iter, err)
		}
		events = append(events, session.Event{Type: wire.TypeAssistantMessage, Seq: int64(len(events)), Time: 1, Data: data,
			SurfaceOp: session.AppendOp(), SourceEventSeqs: append([]int64{}, seqs...)})
		if err := session.CheckAppendable(header, 0, events); err != nil {
			t.Fatalf("stream %d: %v", iter, err)
		}
	}
}
