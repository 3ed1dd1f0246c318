package anthropic_test

import (
	"errors"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

// okStream is a minimal successful response.
func okStream() []event {
	return []event{messageStart(1, 0, 0), textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn", 1, 0), messageStop()}
}

// The request carries the system prompt, the conversation with tool calls
// as tool_use blocks and tool results as tool_result blocks, signed
// reasoning as thinking blocks, the tools with their schemas, stream: true,
// the model, max_tokens and the thinking budget; the key travels only in
// x-api-key, with the API version header.
func TestStreamRequestBody(t *testing.T) {
	// Credentials in the environment must not reach the request.
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "env-token-must-not-be-sent")
	t.Setenv("ANTHROPIC_API_KEY", "env-key-must-not-be-sent")
	f := newFakeAPI(t, streamOf(okStream()...))
	req := provider.Request{
		Provider: "anthropic", Model: "claude-sonnet-4-5", System: "You are terse.",
		ReasoningEffort: "medium", SessionID: "s-1",
		Messages: []provider.Message{
			{Role: "user", Content: []provider.Block{{Type: "text", Text: "Read a.txt and list ."}}},
			{Role: "assistant", Content: []provider.Block{
				{Type: "reasoning", Text: "I should read.", Signature: "sig-1"},
				{Type: "reasoning", Text: "unsigned, from elsewhere"},
				{Type: "text", Text: ""},
				{Type: "text", Text: "Reading."},
				{Type: "tool-call", ID: "toolu_1", Name: "read_file", Arguments: `{"path":"a.txt"}`},
				{Type: "tool-call", ID: "toolu_2", Name: "list_dir", Arguments: ""},
			}},
			{Role: "user", Content: []provider.Block{
				{Type: "tool-result", ToolCallID: "toolu_1", IsError: true, Content: []provider.Block{{Type: "text", Text: "Error: no such file"}}},
			}},
			{Role: "user", Content: []provider.Block{
				{Type: "tool-result", ToolCallID: "toolu_2", Content: []provider.Block{{Type: "text", Text: "a.txt\n"}, {Type: "text", Text: "b.txt\n"}}},
			}},
			{Role: "assistant", Content: []provider.Block{{Type: "reasoning", Text: "interrupted, unsigned"}}},
			{Role: "user", Content: []provider.Block{{Type: "text", Text: "Go on."}}},
		},
		Tools: []provider.Tool{
			{Name: "list_dir", Description: "List a directory.", Schema: []byte(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
			{Name: "now"},
		},
	}
	if _, err := collect(t, f.provider(t), req); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/messages" {
		t.Fatalf("request %s %s", r.Method, r.Path)
	}
	if got := r.Header.Get("X-Api-Key"); got != testKey {
		t.Fatalf("x-api-key %q", got)
	}
	if got := r.Header.Get("Anthropic-Version"); got != "2026-10-21" {
		t.Fatalf("anthropic-version %q", got)
	}
	if got := r.Header.Get("Authorization"); got != "" {
		t.Fatalf("an Authorization header was sent: %q", got)
	}
	if got := r.Header.Get("X-Stainless-Retry-Count"); got != "" && got != "0" {
		t.Fatalf("retry count %q", got)
	}
	want := `{
	  "model": "claude-sonnet-4-5",
	  "max_tokens": 8192,
	  "stream": true,
	  "system": [{"type": "text", "text": "You are terse."}],
	  "thinking": {"type": "enabled", "budget_tokens": 4096},
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "Read a.txt and list ."}]},
	    {"role": "assistant", "content": [
	      {"type": "thinking", "thinking": "I should read.", "signature": "sig-1"},
	      {"type": "text", "text": "Reading."},
	      {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}},
	      {"type": "tool_use", "id": "toolu_2", "name": "list_dir", "input": {}}
	    ]},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true, "content": [{"type": "text", "text": "Error: no such file"}]}
	    ]},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "a.txt\n"}, {"type": "text", "text": "b.txt\n"}]}
	    ]},
	    {"role": "user", "content": [{"type": "text", "text": "Go on."}]}
	  ],
	  "tools": [
	    {"name": "list_dir", "description": "List a directory.",
	     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}},
	    {"name": "now", "input_schema": {"type": "object"}}
	  ]
	}`
	if got, exp := canonical(t, r.Body), canonical(t, []byte(want)); got != exp {
		t.Fatalf("request body\n got %s\nwant %s", got, exp)
	}
}

// max_tokens is the request's or the default, raised by the thinking budget
// when the request sets none; a budget is capped below max_tokens.
func TestStreamMaxTokensAndThinkingBudget(t *testing.T) {
	cases := []struct {
		effort    string
		maxTokens int64
		want      string // max_tokens and thinking of the body
	}{
		{"", 0, `{"max_tokens":4096}`},
		{"none", 100, `{"max_tokens":100}`},
		{"low", 0, `{"max_tokens":5120,"thinking":{"type":"enabled","budget_tokens":1024}}`},
		{"minimal", 2000, `{"max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024}}`},
		{"high", 0, `{"max_tokens":20480,"thinking":{"type":"enabled","budget_tokens":16384}}`},
		{"high", 10000, `{"max_tokens":10000,"thinking":{"type":"enabled","budget_tokens":9999}}`},
		{"max", 64000, `{"max_tokens":64000,"thinking":{"type":"enabled","budget_tokens":32768}}`},
		{"xhigh", 1025, `{"max_tokens":1025,"thinking":{"type":"enabled","budget_tokens":1024}}`},
	}
	for _, tc := range cases {
		f := newFakeAPI(t, streamOf(okStream()...))
		req := simpleRequest()
		req.ReasoningEffort, req.MaxTokens = tc.effort, tc.maxTokens
		if _, err := collect(t, f.provider(t), req); err != nil {
			t.Fatalf("%q/%d: %v", tc.effort, tc.maxTokens, err)
		}
		var body map[string]any
		mustUnmarshal(t, f.requests()[0].Body, &body)
		got := map[string]any{"max_tokens": body["max_tokens"]}
		if th, ok := body["thinking"]; ok {
			got["thinking"] = th
		}
		if g, w := canonical(t, mustMarshal(t, got)), canonical(t, []byte(tc.want)); g != w {
			t.Fatalf("%q/%d: got %s want %s", tc.effort, tc.maxTokens, g, w)
		}
	}
}

// A request the API cannot be given is refused before any call.
func TestStreamRefusesInexpressibleRequests(t *testing.T) {
	cases := []struct {
		name string
		edit func(*provider.Request)
		want string
	}{
		{"unknown effort", func(r *provider.Request) { r.ReasoningEffort = "extreme" },
			`model call failed (invalid_request): unknown reasoning effort "extreme" (want none, minimal, low, medium, high, xhigh or max)`},
		{"no room to think", func(r *provider.Request) { r.ReasoningEffort, r.MaxTokens = "low", 1024 },
			`model call failed (invalid_request): maxTokens 1024 leaves no room for reasoning effort "low": thinking needs at least 1024 tokens below maxTokens`},
		{"negative max tokens", func(r *provider.Request) { r.MaxTokens = -1 }, "model call failed (invalid_request): maxTokens -1 is negative"},
		{"no model", func(r *provider.Request) { r.Model = "" }, "model call failed (invalid_request): no model"},
		{"schema not an object", func(r *provider.Request) { r.Tools = []provider.Tool{{Name: "t", Schema: []byte(`[1]`)}} },
			`model call failed (invalid_request): tool "t": the schema is not a JSON object`},
		{"tool call in a user message", func(r *provider.Request) {
			r.Messages[0].Content = append(r.Messages[0].Content, provider.Block{Type: "tool-call", ID: "c", Name: "n"})
		}, `model call failed (invalid_request): message 0 (user) block 1: a "tool-call" block has no place in a user message`},
		{"unknown role", func(r *provider.Request) { r.Messages[0].Role = "system" },
			`model call failed (invalid_request): message 0 has role "system" (want user or assistant)`},
		{"non-text tool result content", func(r *provider.Request) {
			r.Messages[0].Content = []provider.Block{{Type: "tool-result", ToolCallID: "c", Content: []provider.Block{{Type: "reasoning", Text: "x"}}}}
		}, `model call failed (invalid_request): message 0 block 0: tool result content 0 is a "reasoning" block, not text`},
	}
	for _, tc := range cases {
		f := newFakeAPI(t, streamOf(okStream()...))
		req := simpleRequest()
		tc.edit(&req)
		chunks, err := collect(t, f.provider(t), req)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Retryable || pe.Code != "invalid_request" || err.Error() != tc.want {
			t.Fatalf("%s: error %v (%#v), want %q", tc.name, err, pe, tc.want)
		}
		if len(chunks) != 0 || len(f.requests()) != 0 {
			t.Fatalf("%s: %d chunks, %d requests", tc.name, len(chunks), len(f.requests()))
		}
	}
}
