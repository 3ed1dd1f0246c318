package provider_test

import (
	"context"
	"iter"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

func TestContextWindow(t *testing.T) {
	cases := []struct {
		provider, model string
		want            int64
		known           bool
	}{
		{"openai", "gpt-4o", 128000, true},
		{"openai", "gpt-4o-2024-08-06", 128000, true},
		{"openai", "gpt-4o-mini", 128000, true},
		{"openai", "gpt-4o-mini-2024-07-18", 128000, true},
		{"openai", "gpt-4.1", 1047576, true},
		{"openai", "gpt-4.1-mini", 1047576, true},
		{"openai", "gpt-4.1-nano-2025-04-14", 1047576, true},
		{"openai", "o3", 200000, true},
		{"openai", "o4-mini", 200000, true},
		{"openai", "o4-mini-2025-04-16", 200000, true},
		{"openai", "gpt-5", 400000, true},
		{"openai", "gpt-5-mini", 400000, true},
		{"openai", "gpt-5-nano-2025-08-07", 400000, true},
		{"anthropic", "claude-sonnet-4-20250514", 200000, true},
		{"anthropic", "claude-sonnet-4-5", 200000, true},
		{"anthropic", "claude-opus-4-1-20250805", 200000, true},
		{"anthropic", "claude-3-5-haiku-latest", 200000, true},
		{"deepseek", "deepseek-chat", 128000, true},
		{"deepseek", "deepseek-reasoner", 128000, true},
		{"deepseek", "deepseek-v4-flash", 1000000, true},
		{"deepseek", "deepseek-v4-pro", 1000000, true},

		// Unknown: not a row, not a dated snapshot of one, another kind's
		// model, a provider name the table does not know.
		{"openai", "gpt-5-chat-latest", 0, false},
		{"openai", "gpt-4o-audio-preview", 0, false},
		{"openai", "gpt-4o-2024", 0, false},
		{"openai", "gpt-4", 0, false},
		{"openai", "claude-sonnet-4-5", 0, false},
		{"openai", "", 0, false},
		{"anthropic", "claude-2.1", 0, false},
		{"anthropic", "claude-instant-1.2", 0, false},
		{"anthropic", "gpt-4o", 0, false},
		{"deepseek", "deepseek-chat-v2", 0, false},
		{"ollama", "gpt-4o", 0, false},
		{"scripted", "m", 0, false},
		{"", "gpt-4o", 0, false},
	}
	for _, tc := range cases {
		got, known := provider.ContextWindow(tc.provider, tc.model)
		if got != tc.want || known != tc.known {
			t.Errorf("ContextWindow(%q, %q) = %d, %v; want %d, %v", tc.provider, tc.model, got, known, tc.want, tc.known)
		}
	}
}

// windowed is a provider that reports its own window.
type windowed int64

func (windowed) Stream(context.Context, provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(func(provider.Chunk, error) bool) {}
}
func (w windowed) ContextWindow() int64 { return int64(w) }

// plain is a provider that does not.
type plain struct{}

func (plain) Stream(context.Context, provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(func(provider.Chunk, error) bool) {}
}

func TestProviderContextWindow(t *testing.T) {
	cases := []struct {
		p               provider.Provider
		provider, model string
		want            int64
		known           bool
	}{
		{windowed(5000), "scripted", "m", 5000, true},
		{windowed(5000), "openai", "gpt-4o", 5000, true},
		{windowed(0), "openai", "gpt-4o", 128000, true},
		{windowed(0), "scripted", "m", 0, false},
		{plain{}, "anthropic", "claude-sonnet-4-5", 200000, true},
		{plain{}, "scripted", "m", 0, false},
	}
	for i, tc := range cases {
		got, known := provider.ProviderContextWindow(tc.p, tc.provider, tc.model)
		if got != tc.want || known != tc.known {
			t.Errorf("case %d: %d, %v; want %d, %v", i, got, known, tc.want, tc.known)
		}
	}
}

// The cases of the published harness's own tests of its classifier
// (packages/llm/llm/tests/service.spec.ts), and the vendors' wordings.
func TestIsContextWindowExceeded(t *testing.T) {
	for _, detail := range []string{
		"context_length_exceeded maximum context length",
		"context-window-overflowed",
		"This model maximum context length is 128000 tokens",
		"input is too long for this model",
		"request too large for model context",
		"input exceeds the model context window limit",
		"context_length_exceeded",
		"CONTEXT_LENGTH_EXCEEDED",
		"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.",
		"Your input exceeds the context window of this model. Please adjust your input and try again.",
		"input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again",
	} {
		if !provider.IsContextWindowExceeded(detail) {
			t.Errorf("%q: not recognised", detail)
		}
	}
	for _, detail := range []string{
		"invalid request: malformed tool arguments",
		"invalid input: temperature exceeds maximum allowed value",
		"input exceeds maximum allowed value",
		"context window size must be positive",
		"mycontext_length_exceeded",
		"context_length_exceededness",
		"rate_limit_exceeded Request too large for gpt-4o on tokens per min (TPM)",
		"",
	} {
		if provider.IsContextWindowExceeded(detail) {
			t.Errorf("%q: recognised", detail)
		}
	}
	// The parts are joined by spaces, empty ones skipped.
	if !provider.IsContextWindowExceeded("", "invalid_request_error", "", "This model's maximum context length is 8192 tokens.") ||
		!provider.IsContextWindowExceeded("context_length_exceeded", "", "Request refused.") ||
		!provider.IsContextWindowExceeded("context", "length", "exceeded") ||
		provider.IsContextWindowExceeded() {
		t.Error("parts are not joined by spaces")
	}
}
