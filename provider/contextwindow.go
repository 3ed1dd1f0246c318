package provider

import (
	"regexp"
	"strings"
)

// Provider kinds of the context-window table: the names a worker offers
// its providers under (--openai, --anthropic), and the conventional name of
// DeepSeek's OpenAI-compatible endpoint (--openai-compatible
// deepseek=https://api.deepseek.com,...).
const (
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
	KindDeepSeek  = "deepseek"
)

// window is one row of the context-window table: a model name, matched
// exactly or, with prefix, as a prefix.
type window struct {
	model  string
	prefix bool
	tokens int64
}

// contextWindows are the context windows, in tokens, of the models of each
// provider kind. Sources: the vendors' model pages (OpenAI's "Models" and
// Anthropic's "Models overview"), and for DeepSeek the published harness's
// own catalog (packages/llm/llm-deepseek/src/index.ts DEFAULT_MODELS: the
// deepseek-v4 models at its DEFAULT_CONTEXT_WINDOW, 1,000,000) beside
// DeepSeek's API documentation (128K for deepseek-chat and
// deepseek-reasoner, taken as 128,000: a smaller window compacts a little
// early, a larger one would be refused).
var contextWindows = map[string][]window{
	KindOpenAI: {
		{model: "gpt-4o", tokens: 128_000},
		{model: "gpt-4o-mini", tokens: 128_000},
		{model: "gpt-4.1", tokens: 1_047_576},
		{model: "gpt-4.1-mini", tokens: 1_047_576},
		{model: "gpt-4.1-nano", tokens: 1_047_576},
		{model: "o1", tokens: 200_000},
		{model: "o3", tokens: 200_000},
		{model: "o3-mini", tokens: 200_000},
		{model: "o3-pro", tokens: 200_000},
		{model: "o4-mini", tokens: 200_000},
		{model: "gpt-5", tokens: 400_000},
		{model: "gpt-5-mini", tokens: 400_000},
		{model: "gpt-5-nano", tokens: 400_000},
		{model: "gpt-5-codex", tokens: 400_000},
	},
	KindAnthropic: {
		// The retired Claude 2 and Claude Instant models had smaller
		// windows: unknown rather than wrong.
		{model: "claude-2", prefix: true, tokens: 0},
		{model: "claude-instant", prefix: true, tokens: 0},
		{model: "claude-", prefix: true, tokens: 200_000},
	},
	KindDeepSeek: {
		{model: "deepseek-chat", tokens: 128_000},
		{model: "deepseek-reasoner", tokens: 128_000},
		{model: "deepseek-v4-flash", tokens: 1_000_000},
		{model: "deepseek-v4-pro", tokens: 1_000_000},
		{model: "deepseek-v4-flash-vision-exp", tokens: 1_000_000},
	},
}

// snapshot matches the dated suffix of a model snapshot, "-2024-08-06".
var snapshot = regexp.MustCompile(`^-\d{4}-\d{2}-\d{2}$`)

// ContextWindow returns the context window, in tokens, of model as served
// by the provider named providerName, and whether it is known. The table
// knows the provider kinds KindOpenAI, KindAnthropic and KindDeepSeek, by
// provider name; any other name (a compatible endpoint under another name,
// the scripted provider, whose window is its script's) is unknown.
//
// A model matches a row of its kind when it is the row's model, or the
// row's model followed by a dated snapshot suffix ("gpt-4o-2024-08-06" is
// "gpt-4o"); the Anthropic row is the prefix "claude-" (every current
// Claude model has a 200,000-token window; "claude-2..." and
// "claude-instant..." are unknown). Figures (see contextWindows):
//
//   - openai: gpt-4o, gpt-4o-mini 128,000; gpt-4.1, gpt-4.1-mini,
//     gpt-4.1-nano 1,047,576; o1, o3, o3-mini, o3-pro, o4-mini 200,000;
//     gpt-5, gpt-5-mini, gpt-5-nano, gpt-5-codex 400,000;
//   - anthropic: claude-* 200,000;
//   - deepseek: deepseek-chat, deepseek-reasoner 128,000; deepseek-v4-flash,
//     deepseek-v4-pro, deepseek-v4-flash-vision-exp 1,000,000 (the
//     published harness's catalog).
func ContextWindow(providerName, model string) (int64, bool) {
	for _, w := range contextWindows[providerName] {
		var match bool
		switch {
		case w.prefix:
			match = strings.HasPrefix(model, w.model)
		case model == w.model:
			match = true
		default:
			rest, ok := strings.CutPrefix(model, w.model)
			match = ok && snapshot.MatchString(rest)
		}
		if match {
			return w.tokens, w.tokens > 0
		}
	}
	return 0, false
}

// WindowReporter is a Provider that knows the context window of what it
// serves (scripted.Provider, whose script may give one). ContextWindow
// returns it in tokens, 0 for none.
type WindowReporter interface {
	ContextWindow() int64
}

// ProviderContextWindow returns the context window of model as served by
// p under the name providerName: p's own when p is a WindowReporter that
// reports one, else ContextWindow(providerName, model).
func ProviderContextWindow(p Provider, providerName, model string) (int64, bool) {
	if r, ok := p.(WindowReporter); ok {
		if w := r.ContextWindow(); w > 0 {
			return w, true
		}
	}
	return ContextWindow(providerName, model)
}

// The published harness's classifier of context-overflow wording
// (packages/llm/llm/src/error.ts isContextWindowExceededError), ported to
// RE2: the same expressions, case-insensitive.
var contextExceeded = [...]*regexp.Regexp{
	// Structured codes and plain phrases that name a context bound being
	// exceeded: "context_length_exceeded", "context window exceeded".
	regexp.MustCompile(`(?i)(?:^|[^a-z0-9])context[\s_-](?:length|window)[\s_-](?:exceed(?:ed|s)?|overflow(?:ed)?|limit[\s_-]exceeded)(?:$|[^a-z0-9])`),
	// "This model's maximum context length is 128000 tokens."
	regexp.MustCompile(`(?i)\b(?:maximum|max)(?:\s+(?:allowed|supported))?\s+context\s+(?:length|window)\b`),
	// "prompt is too long for the model's context window".
	regexp.MustCompile(`(?i)\b(?:request|prompt|input|messages?)\s+(?:is\s+|are\s+)?too\s+(?:large|long)\s+for\s+(?:(?:this|the)\s+)?(?:model(?:'s)?\s+)?context(?:\s+window)?\b`),
	// "input is too long for this model".
	regexp.MustCompile(`(?i)\b(?:input|prompt|request)\s+(?:is\s+)?too\s+(?:long|large)\s+for\s+(?:this|the)\s+model\b`),
	// "input length and max_tokens exceed context limit".
	regexp.MustCompile(`(?i)\b(?:input|prompt|request|messages?)\b.{0,40}\b(?:exceed(?:s|ed)?|overflows?|is\s+larger\s+than)\b.{0,40}\b(?:the\s+)?(?:model(?:'s)?\s+)?context(?:\s+(?:length|window))?\b`),
}

// IsContextWindowExceeded reports whether a refusal whose code, type and
// message are parts (empty ones skipped, the rest joined by spaces) says
// the request exceeds the model's context window. It is the published
// harness's conservative classifier of the wording of OpenAI-compatible
// services; a provider applies it to a refused request (HTTP 400) or an
// error in the stream, and maps a match to CodeContextWindowExceeded.
func IsContextWindowExceeded(parts ...string) bool {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	detail := strings.Join(kept, " ")
	for _, re := range contextExceeded {
		if re.MatchString(detail) {
			return true
		}
	}
	return false
}
