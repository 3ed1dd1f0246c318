package anthropic_test

import (
	"reflect"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

// A response with thinking, text and two parallel tool calls streams as the
// chunks the Assembler folds into the message's content, with the
// signature on the thinking block and the usage of message_start and
// message_delta.
func TestStreamThinkingTextAndParallelToolCalls(t *testing.T) {
	f := newFakeAPI(t, streamOf(
		messageStart(25, 5, 2),
		ping(),
		thinkingStart(0), thinkingDelta(0, "Let me "), thinkingDelta(0, "look."), signatureDelta(0, "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"), blockStop(0),
		textStart(1), textDelta(1, "Reading "), textDelta(1, "both."), blockStop(1),
		toolStart(2, "toolu_01A", "read_file"), jsonDelta(2, ""), jsonDelta(2, `{"path":`), jsonDelta(2, `"a.txt"}`), blockStop(2),
		toolStart(3, "toolu_01B", "list_dir"), jsonDelta(3, `{"path":"."}`), blockStop(3),
		messageDelta("tool_use", 40, 12),
		messageStop(),
	))
	chunks, err := collect(t, f.provider(t), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.Chunk{
		{Type: "reasoning", Delta: "Let me "},
		{Type: "reasoning", Delta: "look."},
		{Type: "reasoning", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},
		{Type: "text", Delta: "Reading "},
		{Type: "text", Delta: "both."},
		{Type: "tool-call", Index: 0, ID: "toolu_01A", Name: "read_file"},
		{Type: "tool-call", Index: 0, Delta: `{"path":`},
		{Type: "tool-call", Index: 0, Delta: `"a.txt"}`},
		{Type: "tool-call", Index: 1, ID: "toolu_01B", Name: "list_dir"},
		{Type: "tool-call", Index: 1, Delta: `{"path":"."}`},
		{Type: "usage", Usage: &provider.Usage{InputTokens: 32, OutputTokens: 40, ReasoningTokens: 12, CacheReadTokens: 5}},
		{Type: "finish", Finish: "tool-calls"},
	}
	if !reflect.DeepEqual(chunks, want) {
		t.Fatalf("chunks\n got %+v\nwant %+v", chunks, want)
	}

	a := provider.NewAssembler()
	for i, c := range chunks {
		if err := a.Push(c, int64(1000+i)); err != nil {
			t.Fatalf("the Assembler refused chunk %d: %v", i, err)
		}
	}
	wantContent := []provider.Block{
		{Type: "reasoning", Text: "Let me look.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},
		{Type: "text", Text: "Reading both."},
		{Type: "tool-call", ID: "toolu_01A", Name: "read_file", Arguments: `{"path":"a.txt"}`},
		{Type: "tool-call", ID: "toolu_01B", Name: "list_dir", Arguments: `{"path":"."}`},
	}
	if got := a.Content(); !reflect.DeepEqual(got, wantContent) {
		t.Fatalf("assembled\n got %+v\nwant %+v", got, wantContent)
	}
	if a.Finish() != provider.FinishToolCalls || !reflect.DeepEqual(a.Usage(), want[10].Usage) {
		t.Fatalf("finish %q usage %+v", a.Finish(), a.Usage())
	}
	replayed, err := provider.ReplayRecord(a.Record())
	if err != nil {
		t.Fatal(err)
	}
	again := provider.NewAssembler()
	for _, c := range replayed {
		if err := again.Push(c.Chunk, c.Time); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(again.Content(), wantContent) || !reflect.DeepEqual(again.Usage(), a.Usage()) {
		t.Fatalf("the stored record replays as\n %+v\nnot\n %+v", again.Content(), wantContent)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// Two thinking blocks in one response (interleaved with a tool call) stay
// two signed blocks.
func TestStreamKeepsThinkingBlocksApart(t *testing.T) {
	f := newFakeAPI(t, streamOf(
		messageStart(3, 0, 0),
		thinkingStart(0), thinkingDelta(0, "one"), signatureDelta(0, "sig-A"), blockStop(0),
		thinkingStart(1), thinkingDelta(1, "two"), signatureDelta(1, "sig-"), signatureDelta(1, "B"), blockStop(1),
		textStart(2), textDelta(2, "done"), blockStop(2),
		messageDelta("end_turn", 9, 0),
		messageStop(),
	))
	chunks, err := collect(t, f.provider(t), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	a := provider.NewAssembler()
	for i, c := range chunks {
		if err := a.Push(c, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	want := []provider.Block{
		{Type: "reasoning", Text: "one", Signature: "sig-A"},
		{Type: "reasoning", Text: "two", Signature: "sig-B"},
		{Type: "text", Text: "done"},
	}
	if got := a.Content(); !reflect.DeepEqual(got, want) {
		t.Fatalf("assembled\n got %+v\nwant %+v", got, want)
	}
	if got := a.Usage(); got == nil || *got != (provider.Usage{InputTokens: 3, OutputTokens: 9}) {
		t.Fatalf("usage %+v", got)
	}
}

func TestStreamFinishReasons(t *testing.T) {
	for stop, want := range map[string]provider.FinishReason{
		"end_turn":                      "stop",
		"stop_sequence":                 "stop",
		"refusal":                       "stop",
		"pause_turn":                    "stop",
		"tool_use":                      "tool-calls",
		"max_tokens":                    "max-tokens",
		"model_context_window_exceeded": "max-tokens",
	} {
		f := newFakeAPI(t, streamOf(messageStart(1, 0, 0), textStart(0), textDelta(0, "x"), blockStop(0), messageDelta(stop, 1, 0), messageStop()))
		chunks, err := collect(t, f.provider(t), simpleRequest())
		if err != nil {
			t.Fatalf("%s: %v", stop, err)
		}
		last := chunks[len(chunks)-1]
		if last != (provider.Chunk{Type: "finish", Finish: want}) {
			t.Fatalf("%s: last chunk %+v, want finish %q", stop, last, want)
		}
	}
}
