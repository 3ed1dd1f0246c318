package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/openai"
)

func providerTool(name, desc, schema string) provider.Tool {
	return provider.Tool{Name: name, Description: desc, Schema: []byte(schema)}
}

func okStream(w http.ResponseWriter, r *http.Request) {
	streamHeaders(w)
	sse(w, chunk(`{"content":"ok"}`, "stop"), "[DONE]")
}

// conversation is a turn with reasoning, text, two tool calls, their results
// and a follow-up question.
func conversation() provider.Request {
	return provider.Request{
		Provider: "openai", Model: "gpt-test", System: "Be brief.", ReasoningEffort: "low", MaxTokens: 1024,
		SessionID: "s-1",
		Messages: []provider.Message{
			{Role: "user", Content: []provider.Block{{Type: "text", Text: "Read a.txt"}, {Type: "text", Text: "and list ."}}},
			{Role: "assistant", Content: []provider.Block{
				{Type: "reasoning", Text: "I should read it."},
				{Type: "text", Text: "Reading."},
				{Type: "tool-call", ID: "call_a", Name: "read_file", Arguments: `{"path":"a.txt"}`},
				{Type: "tool-call", ID: "call_b", Name: "list_dir", Arguments: ""},
			}},
			{Role: "user", Content: []provider.Block{
				{Type: "tool-result", ToolCallID: "call_a", Content: []provider.Block{{Type: "text", Text: "line 1"}, {Type: "text", Text: "line 2"}}},
				{Type: "tool-result", ToolCallID: "call_b", IsError: true, Content: []provider.Block{{Type: "text", Text: "Error: no such directory"}}},
			}},
			{Role: "assistant", Content: []provider.Block{{Type: "reasoning", Text: "only thought, interrupted"}}},
			{Role: "user", Content: []provider.Block{{Type: "text", Text: "Thanks"}}},
		},
		Tools: []provider.Tool{
			providerTool("read_file", "Read a file", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
			providerTool("list_dir", "", ``),
		},
	}
}

func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, s)
	}
	return v
}

func TestRequestMapping(t *testing.T) {
	svc := newService(t, okStream)
	got := collect(context.Background(), svc.provider(t, nil), conversation())
	wantChunks(t, got, text("ok"), finish(provider.FinishStop))
	reqs := svc.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" {
		t.Fatalf("request %s %s", r.Method, r.Path)
	}
	if r.Auth != "Bearer "+testKey {
		t.Fatalf("Authorization = %q", r.Auth)
	}
	want := jsonOf(t, `{
		"model": "gpt-test",
		"stream": true,
		"stream_options": {"include_usage": true},
		"max_tokens": 1024,
		"reasoning_effort": "low",
		"messages": [
			{"role": "system", "content": "Be brief."},
			{"role": "user", "content": "Read a.txt\nand list ."},
			{"role": "assistant", "content": "Reading.", "tool_calls": [
				{"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}},
				{"id": "call_b", "type": "function", "function": {"name": "list_dir", "arguments": "{}"}}
			]},
			{"role": "tool", "tool_call_id": "call_a", "content": "line 1\nline 2"},
			{"role": "tool", "tool_call_id": "call_b", "content": "Error: no such directory"},
			{"role": "user", "content": "Thanks"}
		],
		"tools": [
			{"type": "function", "function": {"name": "read_file", "description": "Read a file",
				"parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
			{"type": "function", "function": {"name": "list_dir", "parameters": {"type": "object", "properties": {}}}}
		]
	}`)
	if !reflect.DeepEqual(r.Body, want) {
		gotJSON, _ := json.MarshalIndent(r.Body, "", "  ")
		t.Fatalf("request body:\n%s", gotJSON)
	}
}

func TestRequestSendsReasoningBackWhenConfigured(t *testing.T) {
	svc := newService(t, okStream)
	p := svc.provider(t, nil, func(c *openai.Config) { c.SendReasoning = true; c.MaxTokensField = openai.MaxCompletionTokens })
	collect(context.Background(), p, conversation())
	body := svc.requests()[0].Body
	msgs := body["messages"].([]any)
	first := msgs[2].(map[string]any)
	if first["reasoning_content"] != "I should read it." || first["content"] != "Reading." {
		t.Fatalf("assistant message: %v", first)
	}
	// The anchor that only reasoned is sent too, with its reasoning.
	anchor := msgs[5].(map[string]any)
	if anchor["role"] != "assistant" || anchor["reasoning_content"] != "only thought, interrupted" {
		t.Fatalf("message 5: %v", anchor)
	}
	if _, ok := anchor["content"]; ok {
		t.Fatalf("an assistant message without text carries content: %v", anchor)
	}
	if body["max_completion_tokens"] != float64(1024) || body["max_tokens"] != nil {
		t.Fatalf("max tokens fields: %v / %v", body["max_completion_tokens"], body["max_tokens"])
	}
}

func TestRequestDefaultsAndOptionalFields(t *testing.T) {
	svc := newService(t, okStream)
	p, err := openai.New(openai.Config{BaseURL: svc.srv.URL + "/v1/", Model: "local-model"})
	if err != nil {
		t.Fatal(err)
	}
	req := provider.Request{Messages: []provider.Message{{Role: "user", Content: []provider.Block{{Type: "text", Text: "hi"}}}}}
	wantChunks(t, collect(context.Background(), p, req), text("ok"), finish(provider.FinishStop))
	r := svc.requests()[0]
	if r.Auth != "" {
		t.Fatalf("Authorization sent without a key: %q", r.Auth)
	}
	if r.Path != "/v1/chat/completions" {
		t.Fatalf("path %q", r.Path)
	}
	want := jsonOf(t, `{"model":"local-model","stream":true,"stream_options":{"include_usage":true},
		"messages":[{"role":"user","content":"hi"}]}`)
	if !reflect.DeepEqual(r.Body, want) {
		t.Fatalf("body %s", r.Raw)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []openai.Config{
		{BaseURL: "localhost:8080"},
		{BaseURL: "ftp://example.com/v1"},
		{BaseURL: "http://"},
		{BaseURL: "http://example.com", MaxTokensField: "max_output_tokens"},
	} {
		if _, err := openai.New(cfg); !errors.Is(err, openai.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

func TestNewPicksTheMaxTokensFieldByHost(t *testing.T) {
	// The OpenAI API gets max_completion_tokens, any other host max_tokens.
	var got string
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		for _, f := range []string{"max_tokens", "max_completion_tokens"} {
			if _, ok := body[f]; ok {
				got = r.URL.Host + " " + f
			}
		}
		return nil, errors.New("not sent")
	})
	for base, want := range map[string]string{
		"":                           "api.openai.com max_completion_tokens",
		"https://api.deepseek.com":   "api.deepseek.com max_tokens",
		"http://localhost:11434/v1/": "localhost:11434 max_tokens",
	} {
		p, err := openai.New(openai.Config{BaseURL: base, APIKey: testKey, HTTPClient: &http.Client{Transport: rt}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		req := simpleRequest()
		req.MaxTokens = 5
		got = ""
		collect(context.Background(), p, req)
		if got != want {
			t.Errorf("base %q: %q, want %q", base, got, want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestFromEnv(t *testing.T) {
	svc := newService(t, okStream)
	t.Setenv("OPENAI_API_KEY", testKey)
	t.Setenv("OPENAI_BASE_URL", svc.srv.URL+"/v1")
	p, err := openai.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	wantChunks(t, collect(context.Background(), p, simpleRequest()), text("ok"), finish(provider.FinishStop))
	if r := svc.requests()[0]; r.Auth != "Bearer "+testKey || r.Path != "/v1/chat/completions" {
		t.Fatalf("request: auth %q path %q", r.Auth, r.Path)
	}

	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	if _, err := openai.FromEnv(); !errors.Is(err, openai.ErrNoAPIKey) {
		t.Fatalf("FromEnv without a key = %v", err)
	}
	// A local server needs no key.
	t.Setenv("OPENAI_BASE_URL", svc.srv.URL+"/v1")
	if _, err := openai.FromEnv(); err != nil {
		t.Fatalf("FromEnv with a base URL and no key: %v", err)
	}
}

func TestNewIgnoresTheEnvironment(t *testing.T) {
	// Config is explicit: the SDK must not pick up OPENAI_* variables.
	svc := newService(t, okStream)
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	p, err := openai.New(openai.Config{BaseURL: svc.srv.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	wantChunks(t, collect(context.Background(), p, simpleRequest()), text("ok"), finish(provider.FinishStop))
	if r := svc.requests()[0]; r.Auth != "" {
		t.Fatalf("Authorization %q taken from the environment", r.Auth)
	}
}

func TestFormattingAProviderShowsNoKey(t *testing.T) {
	p, err := openai.New(openai.Config{BaseURL: "https://user:pw@api.example.com/v1", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "provider", p, "set", provider.Set{"a": p})
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "provider", p)
	out := fmt.Sprint(p, *p) + logs.String()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
		out += fmt.Sprintf(verb, p) + fmt.Sprintf(verb, *p)
	}
	noKey(t, "formatting", out)
	if strings.Contains(out, "pw@") {
		t.Fatalf("the base URL's password shows: %s", out)
	}
	if got := p.String(); got != "openai provider at https://user:xxxxx@api.example.com/v1" {
		t.Fatalf("String() = %q", got)
	}
}
