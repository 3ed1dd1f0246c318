package provider_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
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

func streamStrings(a *provider.Assembler) []string {
	var out []string
	for _, r := range a.Stream() {
		out = append(out, string(r))
	}
	return out
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
	wantStream := []string{
		`{"type":"reasoning-chunks","time0":100,"index":0,"dt":[1],"texts":["th","ink"]}`,
		`{"type":"text-chunks","time0":102,"index":1,"dt":[1,1],"texts":["Hel","lo \"you\"\n","<&>` + "\u2028" + `"]}`,
		`{"type":"chunk","time":105,"chunk":{"type":"tool-call","id":"c1","name":"read_file","delta":"{\"pa"}}`,
		`{"type":"chunk","time":106,"chunk":{"type":"tool-call","index":1,"id":"c2","name":"list_dir"}}`,
		`{"type":"chunk","time":107,"chunk":{"type":"tool-call","delta":"th\":\"a\"}"}}`,
		`{"type":"chunk","time":108,"chunk":{"type":"tool-call","index":1,"id":"c2","name":"list_dir","delta":"{}"}}`,
		`{"type":"chunk","time":109,"chunk":{"type":"usage","usage":{"inputTokens":10,"outputTokens":3}}}`,
		`{"type":"chunk","time":110,"chunk":{"type":"finish","finish":"tool-calls"}}`,
	}
	if got := streamStrings(a); !reflect.DeepEqual(got, wantStream) {
		t.Fatalf("stream:\n got %q\nwant %q", got, wantStream)
	}
}

func TestAssemblerBlocksFollowModelOrder(t *testing.T) {
	a := provider.NewAssembler()
	// A usage chunk does not close the text block; a reasoning delta does;
	// a lone delta is stored as a plain chunk; an empty delta that continues
	// nothing closes the open block.
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
	wantStream := []string{
		`{"type":"chunk","time":100,"chunk":{"type":"text","delta":"a"}}`,
		`{"type":"chunk","time":101,"chunk":{"type":"usage","usage":{"inputTokens":1,"outputTokens":1}}}`,
		`{"type":"text-chunks","time0":102,"index":0,"dt":[1],"texts":["b","c"]}`,
		`{"type":"chunk","time":104,"chunk":{"type":"reasoning","delta":"r"}}`,
		`{"type":"chunk","time":105,"chunk":{"type":"text","delta":"d"}}`,
		`{"type":"chunk","time":106,"chunk":{"type":"reasoning"}}`,
		`{"type":"text-chunks","time0":107,"index":3,"dt":[1,1],"texts":["e","","f"]}`,
	}
	if got := streamStrings(a); !reflect.DeepEqual(got, wantStream) {
		t.Fatalf("stream:\n got %q\nwant %q", got, wantStream)
	}
	if a.Finish() != "" {
		t.Fatalf("finish %q before a finish chunk", a.Finish())
	}
}

// A tool-call chunk closes the open text (or reasoning) block: text after
// it starts a new block placed after the call, never joined to the text
// before it, and the packed run of that text names the new block; the
// stream record replays to the same content.
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
	wantStream := []string{
		`{"type":"text-chunks","time0":100,"index":0,"dt":[1],"texts":["Let me ","look."]}`,
		`{"type":"chunk","time":102,"chunk":{"type":"tool-call","id":"c1","name":"list_dir","delta":"{}"}}`,
		`{"type":"text-chunks","time0":103,"index":2,"dt":[1],"texts":["Then ","answer."]}`,
		`{"type":"chunk","time":105,"chunk":{"type":"reasoning","delta":"hm"}}`,
		`{"type":"chunk","time":106,"chunk":{"type":"tool-call","index":1,"id":"c2","name":"read_file","delta":"{}"}}`,
		`{"type":"chunk","time":107,"chunk":{"type":"reasoning","delta":"ok"}}`,
		`{"type":"chunk","time":108,"chunk":{"type":"finish","finish":"tool-calls"}}`,
	}
	if got := streamStrings(a); !reflect.DeepEqual(got, wantStream) {
		t.Fatalf("stream:\n got %q\nwant %q", got, wantStream)
	}
	replayed, err := provider.ReplayStream(a.Stream())
	if err != nil {
		t.Fatal(err)
	}
	b := provider.NewAssembler()
	push(t, b, replayed...)
	if got := b.Content(); !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed content:\n got %+v\nwant %+v", got, want)
	}
}

func TestAssemblerStreamMidRunStaysOpen(t *testing.T) {
	a := provider.NewAssembler()
	push(t, a, text("a"), text("b"))
	mid := streamStrings(a)
	if want := []string{`{"type":"text-chunks","time0":100,"index":0,"dt":[1],"texts":["a","b"]}`}; !reflect.DeepEqual(mid, want) {
		t.Fatalf("mid-stream: %q", mid)
	}
	push(t, a, text("c"), finish("stop"))
	want := []string{
		`{"type":"text-chunks","time0":100,"index":0,"dt":[1,1],"texts":["a","b","c"]}`,
		`{"type":"chunk","time":103,"chunk":{"type":"finish","finish":"stop"}}`,
	}
	if got := streamStrings(a); !reflect.DeepEqual(got, want) {
		t.Fatalf("stream: %q", got)
	}
}

func TestAssemblerPackedGapsMayBeNegative(t *testing.T) {
	a := provider.NewAssembler()
	for i, tm := range []int64{50, 40, 40, 1 << 40} {
		if err := a.Push(text(string(rune('a'+i))), tm); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"type":"text-chunks","time0":50,"index":0,"dt":[-10,0,1099511627736],"texts":["a","b","c","d"]}`
	if got := streamStrings(a); len(got) != 1 || got[0] != want {
		t.Fatalf("stream %q", got)
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
			before := streamStrings(a)
			content := a.Content()
			err := a.Push(tc.bad, tc.time)
			if err == nil {
				t.Fatalf("accepted %+v", tc.bad)
			}
			if !errors.Is(err, provider.ErrMalformedStream) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q and match ErrMalformedStream", err, tc.want)
			}
			if !reflect.DeepEqual(streamStrings(a), before) || !reflect.DeepEqual(a.Content(), content) || a.Chunks() != len(tc.before) {
				t.Fatalf("a refused chunk changed the assembler")
			}
		})
	}
}

func TestReplayStreamRefusesMalformedRecords(t *testing.T) {
	cases := []struct {
		name    string
		records []string
		want    string
	}{
		{"not json", []string{`{`}, "stream record 0: unexpected EOF"},
		{"unknown record field", []string{`{"type":"chunk","time":1,"chunk":{"type":"text","delta":"a"},"x":1}`}, `stream record 0: json: unknown field "x"`},
		{"unknown chunk field", []string{`{"type":"chunk","time":1,"chunk":{"type":"text","text":"a"}}`}, `stream record 0: chunk: json: unknown field "text"`},
		{"unknown record type", []string{`{"type":"tool-call-chunks","time0":1}`}, `stream record 0: unknown record type "tool-call-chunks"`},
		{"chunk without time", []string{`{"type":"chunk","chunk":{"type":"text","delta":"a"}}`}, "a chunk record must be exactly {type, time, chunk}"},
		{"chunk with texts", []string{`{"type":"chunk","time":1,"chunk":{"type":"text","delta":"a"},"texts":[]}`}, "a chunk record must be exactly {type, time, chunk}"},
		{"run without dt", []string{`{"type":"text-chunks","time0":1,"index":0,"texts":["a"]}`}, "a text-chunks record must be exactly {type, time0, index, dt, texts}"},
		{"dt arity", []string{`{"type":"text-chunks","time0":1,"index":0,"dt":[1,1],"texts":["a","b"]}`}, "2 texts need 1 dt gaps, not 2"},
		{"empty run", []string{`{"type":"text-chunks","time0":1,"index":0,"dt":[],"texts":[]}`}, "0 texts need 0 dt gaps, not 0"},
		{"fractional time", []string{`{"type":"chunk","time":1.5,"chunk":{"type":"text","delta":"a"}}`}, "stream record 0: json: cannot unmarshal number 1.5"},
		{"wrong index", []string{`{"type":"chunk","time":1,"chunk":{"type":"reasoning","delta":"r"}}`, `{"type":"text-chunks","time0":1,"index":0,"dt":[0],"texts":["a","b"]}`},
			"stream record 1: text 0 folds into block 1, not the record's index 0"},
		{"run of empty deltas continuing nothing", []string{`{"type":"text-chunks","time0":1,"index":0,"dt":[0],"texts":["","b"]}`},
			"stream record 0: text 0 folds into block -1, not the record's index 0"},
		{"reasoning run of a text block", []string{`{"type":"chunk","time":1,"chunk":{"type":"text","delta":"a"}}`, `{"type":"reasoning-chunks","time0":1,"index":0,"dt":[0],"texts":["a","b"]}`},
			"stream record 1: text 0 folds into block 1, not the record's index 0"},
		{"malformed chunk sequence", []string{`{"type":"chunk","time":1,"chunk":{"type":"tool-call","index":1,"id":"c","name":"n"}}`},
			`stream record 0: chunk 0 ("tool-call"): malformed model stream: tool-call delta for index 1, which was never started (next index is 0)`},
		{"time out of range", []string{`{"type":"text-chunks","time0":9007199254740991,"index":0,"dt":[1],"texts":["a","b"]}`},
			"time 9007199254740992 is outside 0..9007199254740991"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var recs []json.RawMessage
			for _, r := range tc.records {
				recs = append(recs, json.RawMessage(r))
			}
			_, err := provider.ReplayStream(recs)
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

func TestAssemblerStreamRoundTripsRandomStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	header := session.Header{Version: session.FormatVersion, ID: "s1", CreatedAt: 1}
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
		records := a.Stream()
		for i, rec := range records {
			canon, err := session.CanonicalJSON(rec)
			if err != nil || !bytes.Equal(canon, rec) {
				t.Fatalf("stream %d record %d not canonical lossless JSON (%v):\n %s\n %s", iter, i, err, rec, canon)
			}
		}
		replayed, err := provider.ReplayStreamTimed(records)
		if err != nil {
			t.Fatalf("stream %d: replay: %v", iter, err)
		}
		if !(len(replayed) == 0 && len(chunks) == 0) && !reflect.DeepEqual(replayed, chunks) {
			t.Fatalf("stream %d: replay\n got %+v\nwant %+v", iter, replayed, chunks)
		}
		again := provider.NewAssembler()
		for _, tc := range replayed {
			if err := again.Push(tc.Chunk, tc.Time); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(again.Stream(), records) {
			t.Fatalf("stream %d: the record of the replayed chunks differs", iter)
		}
		// The record is storable as assistant/message.stream.
		data, err := session.MarshalData(map[string]any{
			"turn": 1, "step": 1,
			"message": map[string]any{"id": "m1", "role": "assistant", "content": content},
			"stream":  records,
			"usage":   a.Usage(),
		})
		if err != nil {
			t.Fatalf("stream %d: %v", iter, err)
		}
		ev := session.Event{Type: session.TypeAssistantMessage, Seq: 0, Time: 1, Data: data, SurfaceOp: session.AppendOp()}
		if err := session.CheckAppendable(header, 0, []session.Event{ev}); err != nil {
			t.Fatalf("stream %d: %v", iter, err)
		}
	}
}
