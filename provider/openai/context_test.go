package openai_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/openai"
)

// A request refused for not fitting the model's context window, in each
// vendor's own shape, is the harness's CONTEXT_WINDOW_EXCEEDED: not
// retryable, with the HTTP status and the vendor's message.
func TestContextWindowExceededRefusals(t *testing.T) {
	cases := []struct {
		name string
		body string
		msg  string
	}{
		{"OpenAI", `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages."},
		{"DeepSeek", `{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (139000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (139000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."},
		{"OpenAI code alone", `{"error":{"message":"Request refused.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			"Request refused."},
		{"vLLM shape", `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages, Please reduce the length of the messages.","type":"BadRequestError","param":null,"code":400}`,
			"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages, Please reduce the length of the messages."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, refuse(400, map[string]string{"Retry-After": "3"}, tc.body))
			got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
			want := provider.Error{Status: 400, Code: "CONTEXT_WINDOW_EXCEEDED", Message: tc.msg}
			if pe := providerError(t, got.err); *pe != want {
				t.Fatalf("error = %#v\nwant %#v", *pe, want)
			}
			if len(got.chunks) != 0 || len(svc.requests()) != 1 {
				t.Fatalf("%d chunks, %d requests", len(got.chunks), len(svc.requests()))
			}
		})
	}
}

// Other refusals keep the vendor's code: an ordinary 400, and a refusal
// that names the context in another status (a 429 for a request larger
// than the rate limit, which is retryable).
func TestOtherRefusalsAreNotContextWindowExceeded(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   provider.Error
	}{
		{"400 empty messages", 400, `{"error":{"message":"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.","type":"invalid_request_error","param":"messages","code":"empty_array"}}`,
			provider.Error{Status: 400, Code: "empty_array", Message: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."}},
		{"400 max_tokens", 400, `{"error":{"message":"max_tokens is too large: 300000. This model supports at most 16384 completion tokens, whereas you provided 300000.","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}`,
			provider.Error{Status: 400, Code: "invalid_value", Message: "max_tokens is too large: 300000. This model supports at most 16384 completion tokens, whereas you provided 300000."}},
		{"429 request too large", 429, `{"error":{"message":"Request too large for gpt-4o in organization org-1 on tokens per min (TPM): Limit 30000, Requested 35000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			provider.Error{Retryable: true, Status: 429, Code: "rate_limit_exceeded", Message: "Request too large for gpt-4o in organization org-1 on tokens per min (TPM): Limit 30000, Requested 35000. The input or output tokens must be reduced in order to run successfully."}},
		{"500 naming the context length", 500, `{"error":{"message":"The server failed while checking the maximum context length.","type":"server_error","code":null}}`,
			provider.Error{Retryable: true, Status: 500, Code: "server_error", Message: "The server failed while checking the maximum context length."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, refuse(tc.status, nil, tc.body))
			got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
			if pe := providerError(t, got.err); *pe != tc.want {
				t.Fatalf("error = %#v\nwant %#v", *pe, tc.want)
			}
		})
	}
}

// An error event in the stream that says the request exceeds the context
// window, as Chat Completions sends it ({"error": {...}}) or as the
// Responses API does (event "error", {"type": "error", "code", ...}), is
// CONTEXT_WINDOW_EXCEEDED after the chunks that came; other error events
// of the Responses shape keep their code.
func TestContextWindowExceededInTheStream(t *testing.T) {
	cases := []struct {
		name, event, data string
		want              provider.Error
	}{
		{"chat completions", "", `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			provider.Error{Code: "CONTEXT_WINDOW_EXCEEDED", Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages."}},
		{"responses", "error", `{"type":"error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":null,"sequence_number":3}`,
			provider.Error{Code: "CONTEXT_WINDOW_EXCEEDED", Message: "Your input exceeds the context window of this model. Please adjust your input and try again."}},
		{"responses, numeric code", "error", `{"type":"error","code":400,"message":"This model's maximum context length is 8192 tokens.","param":null,"sequence_number":3}`,
			provider.Error{Status: 400, Code: "CONTEXT_WINDOW_EXCEEDED", Message: "This model's maximum context length is 8192 tokens."}},
		{"responses, another error", "error", `{"type":"error","code":"server_error","message":"The model failed.","param":null,"sequence_number":3}`,
			provider.Error{Retryable: true, Code: "server_error", Message: "The model failed."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
				streamHeaders(w)
				sse(w, chunk(`{"content":"a"}`, ""))
				if tc.event != "" {
					fmt.Fprintf(w, "event: %s\n", tc.event)
				}
				sse(w, tc.data)
			})
			got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
			if pe := providerError(t, got.err); *pe != tc.want {
				t.Fatalf("error = %#v\nwant %#v", *pe, tc.want)
			}
			if len(got.chunks) != 1 || got.chunks[0].Delta != "a" || got.after != 0 {
				t.Fatalf("chunks %+v, %d after the error", got.chunks, got.after)
			}
		})
	}
}

// A compatible endpoint configured from its spec (DeepSeek's) maps its
// context-window refusal the same way.
func TestCompatibleEndpointContextWindowExceeded(t *testing.T) {
	const msg = "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (139000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."
	svc := newService(t, refuse(400, nil, `{"error":{"message":"`+msg+`","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`))
	getenv := func(string) string { return testKey }
	name, cfg, err := openai.ParseCompatible("deepseek="+svc.srv.URL+",key-env=DEEPSEEK_API_KEY,send-reasoning", getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	p, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := simpleRequest()
	req.Provider, req.Model = name, "deepseek-chat"
	got := collect(context.Background(), p, req)
	want := provider.Error{Status: 400, Code: "CONTEXT_WINDOW_EXCEEDED", Message: msg}
	if pe := providerError(t, got.err); *pe != want {
		t.Fatalf("error = %#v\nwant %#v", *pe, want)
	}
	if r := svc.requests(); len(r) != 1 || r[0].Path != "/chat/completions" || r[0].Body["model"] != "deepseek-chat" {
		t.Fatalf("requests %+v", r)
	}
}
