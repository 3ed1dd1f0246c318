package openai_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

// TestAssemblerFoldsAStreamedResponse runs a DeepSeek-style response with
// reasoning, text and two interleaved tool calls through the Assembler: what
// the provider yields must be a stream the Assembler accepts, and it must
// fold into the content the model produced.
func TestAssemblerFoldsAStreamedResponse(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w,
			chunk(`{"role":"assistant","content":null,"reasoning_content":""}`, ""),
			chunk(`{"reasoning_content":"Two files; "}`, ""),
			chunk(`{"reasoning_content":"read both."}`, ""),
			chunk(`{"content":"Let me "}`, ""),
			chunk(`{"content":"look."}`, ""),
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"read_file","arguments":"{\"path\":"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":":\"a.txt\"}"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"b.txt\"}"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
			usageChunk(`{"prompt_tokens":40,"completion_tokens":30,"total_tokens":70,"prompt_cache_hit_tokens":32,`+
				`"completion_tokens_details":{"reasoning_tokens":12}}`),
			"[DONE]")
	})
	asm := provider.NewAssembler()
	var at int64 = 1_760_000_000_000
	for c, err := range svc.provider(t, nil).Stream(context.Background(), simpleRequest()) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if err := asm.Push(c, at); err != nil {
			t.Fatalf("Assembler refused %+v: %v", c, err)
		}
		at += 5
	}
	want := []provider.Block{
		{Type: "reasoning", Text: "Two files; read both."},
		{Type: "text", Text: "Let me look."},
		{Type: "tool-call", ID: "call_a", Name: "read_file", Arguments: `{"path":"a.txt"}`},
		{Type: "tool-call", ID: "call_b", Name: "read_file", Arguments: `{"path":"b.txt"}`},
	}
	if got := asm.Content(); !reflect.DeepEqual(got, want) {
		t.Fatalf("content:\n got %+v\nwant %+v", got, want)
	}
	if asm.Finish() != provider.FinishToolCalls {
		t.Fatalf("finish %q", asm.Finish())
	}
	if u := asm.Usage(); u == nil || *u != (provider.Usage{InputTokens: 40, OutputTokens: 30, ReasoningTokens: 12, CacheReadTokens: 32}) {
		t.Fatalf("usage %+v", u)
	}
	if asm.ShownText() != "Let me look." {
		t.Fatalf("shown text %q", asm.ShownText())
	}
	// The stored record replays to the same content, usage and finish.
	replayed, err := provider.ReplayRecord(asm.Record())
	if err != nil {
		t.Fatalf("ReplayRecord: %v", err)
	}
	again := provider.NewAssembler()
	for _, c := range replayed {
		if err := again.Push(c.Chunk, c.Time); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(again.Content(), want) || !reflect.DeepEqual(again.Usage(), asm.Usage()) || again.Finish() != asm.Finish() {
		t.Fatalf("the record replays as %+v", again.Content())
	}
}
