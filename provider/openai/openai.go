// Package openai is a provider.Provider for the OpenAI Chat Completions API
// and every service that speaks it: OpenAI itself, DeepSeek, vLLM, Ollama,
// and any other compatible endpoint, chosen by base URL, API key and (per
// request) model. It streams over the official Go SDK
// (github.com/openai/openai-go/v3).
//
// A request maps to chat messages: the system prompt as a "system" message,
// user text as "user" messages, assistant text and tool calls as "assistant"
// messages with tool_calls, and each tool result as a "tool" message with its
// tool_call_id. Tools are offered as function tools with their JSON Schema.
// The stream maps to provider chunks: content deltas become text chunks;
// reasoning deltas, which compatible services stream in the delta's
// reasoning_content field (DeepSeek, vLLM) or reasoning field (OpenRouter,
// Ollama), become reasoning chunks; tool calls become tool-call chunks in the
// order the model started them; the usage chunk (stream_options.include_usage)
// becomes a usage chunk; and the finish reason becomes the finish chunk, sent
// last.
//
// Failures are *provider.Error values. HTTP 408, 409, 429 and 5xx are
// retryable, with RetryAfter taken from the retry-after-ms or retry-after
// header; any other refused request (400, 401, 403, 404, ...) is not
// retryable and carries the service's message and code, but for a 400 that
// says the request exceeds the model's context window (OpenAI's code
// context_length_exceeded, DeepSeek's and vLLM's "This model's maximum
// context length is ..."), whose code is provider.CodeContextWindowExceeded;
// an error event in the stream that says so (Chat Completions' {"error":
// {...}} or the Responses API's {"type": "error", ...}) maps the same way,
// Status 0 unless the event gives a numeric code. A stream that ends
// before the service said it was done (no finish reason and no [DONE]) is
// retryable (CodeStreamInterrupted). A chunk that is not JSON
// (CodeMalformedChunk) or that breaks the protocol (a tool call without a
// name, CodeProtocolViolation) is not: the event stream decoder only reads
// whole events, so a cut connection is a cut, never a broken chunk, and a
// service that sent a broken chunk would answer the same way again. The SDK's own retries are off: the caller retries, and
// honours the service's delay there. The API key never appears in an error
// or a log line, even when the service echoes it back.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 3, with
// provider: it may import provider, wire, internal/lib/... and session, and
// nothing above.
package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sessionflow/sessionflow/provider"
)

// DefaultBaseURL is the OpenAI API, used when the configuration names no
// base URL.
const DefaultBaseURL = "https://api.openai.com/v1"

// Environment variables read by ConfigFromEnv, as every OpenAI client reads
// them.
const (
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvBaseURL = "OPENAI_BASE_URL"
)

// Names of the request field that caps the output tokens (Config.MaxTokensField).
const (
	// MaxCompletionTokens is the field OpenAI's current models require.
	MaxCompletionTokens = "max_completion_tokens"
	// MaxTokens is the older field that DeepSeek, vLLM, Ollama and most
	// compatible servers accept.
	MaxTokens = "max_tokens"
)

// Codes of the errors this package produces itself (provider.Error.Code);
// errors the service returns carry the service's own code.
const (
	// CodeStreamInterrupted: the stream broke or ended before the service
	// finished the response. Retryable.
	CodeStreamInterrupted = "stream_interrupted"
	// CodeMalformedChunk: a streamed chunk was not JSON. Not retryable.
	CodeMalformedChunk = "malformed_chunk"
	// CodeProtocolViolation: a streamed chunk was JSON but could not be
	// followed (a tool call without a name). Not retryable.
	CodeProtocolViolation = "protocol_violation"
	// CodeConnection: the service could not be reached. Retryable.
	CodeConnection = "connection_error"
	// CodeInvalidRequest: the request could not be built (no model, a tool
	// schema that is not a JSON object). Not retryable.
	CodeInvalidRequest = "invalid_request"
)

// ErrNoAPIKey is returned by FromEnv when OPENAI_API_KEY is unset and no
// OPENAI_BASE_URL names another service (OpenAI itself needs a key; a local
// server may not).
var ErrNoAPIKey = errors.New("openai: " + EnvAPIKey + " is not set")

// ErrInvalidConfig is wrapped by New's refusals of a configuration.
var ErrInvalidConfig = errors.New("openai: invalid configuration")

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root, e.g. "https://api.deepseek.com/v1" or
	// "http://localhost:11434/v1"; empty means DefaultBaseURL. Requests go
	// to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as a bearer token; empty sends no Authorization header
	// (for local servers that need none).
	APIKey string
	// Model is used for requests that name no model.
	Model string
	// MaxTokensField names the request field that carries
	// provider.Request.MaxTokens: MaxCompletionTokens or MaxTokens. Empty
	// picks MaxCompletionTokens for the OpenAI API and MaxTokens for any
	// other base URL, which is what compatible servers accept.
	MaxTokensField string
	// SendReasoning sends the reasoning blocks of earlier assistant messages
	// back as their reasoning_content field, which DeepSeek's thinking mode
	// asks for within a turn that calls tools. Off by default: other
	// services refuse or ignore the field.
	SendReasoning bool
	// HTTPClient makes the requests; nil uses a client whose transport waits
	// at most 10 minutes for response headers (the stream itself is not
	// bounded).
	HTTPClient *http.Client
	// Logger receives a debug line per call and a warning per failure; nil
	// uses slog.Default(). Neither carries the API key.
	Logger *slog.Logger
}

// Provider streams model calls from a Chat Completions endpoint. Make one
// with New or FromEnv; it is safe for concurrent use.
type Provider struct {
	chat      sdk.ChatCompletionService
	key       string
	baseURL   string // redacted, for logs
	model     string
	maxField  string
	reasoning bool
	log       *slog.Logger
}

var _ provider.Provider = (*Provider)(nil)

// ConfigFromEnv returns the configuration the environment gives:
// OPENAI_API_KEY and OPENAI_BASE_URL.
func ConfigFromEnv() Config {
	return Config{APIKey: os.Getenv(EnvAPIKey), BaseURL: os.Getenv(EnvBaseURL)}
}

// FromEnv returns a Provider configured by ConfigFromEnv. It refuses with
// ErrNoAPIKey when neither OPENAI_API_KEY nor OPENAI_BASE_URL is set.
func FromEnv() (*Provider, error) {
	cfg := ConfigFromEnv()
	if cfg.APIKey == "" && cfg.BaseURL == "" {
		return nil, ErrNoAPIKey
	}
	return New(cfg)
}

// New returns a Provider for cfg. It refuses, wrapping ErrInvalidConfig, a
// base URL that is not an absolute http or https URL and an unknown
// MaxTokensField. Unlike the SDK's own client, it reads no environment
// variable: the configuration is all there is.
func New(cfg Config) (*Provider, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The parse error quotes the URL, which may hold credentials.
		return nil, fmt.Errorf("%w: base URL must be an absolute http or https URL", ErrInvalidConfig)
	}
	field := cfg.MaxTokensField
	switch field {
	case MaxCompletionTokens, MaxTokens:
	case "":
		field = MaxTokens
		if u.Host == "api.openai.com" {
			field = MaxCompletionTokens
		}
	default:
		return nil, fmt.Errorf("%w: MaxTokensField %q is neither %q nor %q", ErrInvalidConfig, field, MaxCompletionTokens, MaxTokens)
	}
	client := cfg.HTTPClient
	if client == nil {
		client = defaultHTTPClient()
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(client),
		// The caller retries model calls (as activity retries, after the
		// service's delay); the SDK must not retry underneath it.
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Provider{
		chat:      sdk.NewChatCompletionService(opts...),
		key:       cfg.APIKey,
		baseURL:   u.Redacted(),
		model:     cfg.Model,
		maxField:  field,
		reasoning: cfg.SendReasoning,
		log:       log,
	}, nil
}

func defaultHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: http.DefaultTransport}
}

// Stream performs one streaming Chat Completions call. It yields the chunks
// as they arrive and a finish chunk last, or one error: a *provider.Error for
// a failed call, or ctx's error when ctx ends first.
func (p *Provider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(provider.Chunk{}, p.failed(req, err))
			return
		}
		p.log.DebugContext(ctx, "model call", "provider", req.Provider, "baseURL", p.baseURL,
			"model", string(params.Model), "messages", len(params.Messages), "tools", len(params.Tools))
		var w watch
		stream := p.chat.NewStreaming(ctx, params, option.WithMiddleware(w.middleware))
		defer stream.Close()
		var d decoder
		events := 0
		for stream.Next() {
			events++
			chunks, err := d.chunk(stream.Current())
			if err != nil {
				yield(provider.Chunk{}, p.failed(req, err))
				return
			}
			if !yieldAll(chunks, yield) {
				return
			}
		}
		if ctx.Err() != nil {
			yield(provider.Chunk{}, ctx.Err())
			return
		}
		if events == 0 {
			if e := provider.NotEventStream(w.res); e != nil {
				yield(provider.Chunk{}, p.failed(req, e))
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(provider.Chunk{}, p.failed(req, p.classify(err, w.res)))
			return
		}
		chunks, err := d.end(w.done())
		if err != nil {
			yield(provider.Chunk{}, p.failed(req, err))
			return
		}
		if !yieldAll(chunks, yield) {
			return
		}
		p.log.DebugContext(ctx, "model call finished", "provider", req.Provider, "model", string(params.Model),
			"finish", string(chunks[len(chunks)-1].Finish))
	}
}

// yieldAll yields cs in order and reports whether the consumer wants more.
func yieldAll(cs []provider.Chunk, yield func(provider.Chunk, error) bool) bool {
	for _, c := range cs {
		if !yield(c, nil) {
			return false
		}
	}
	return true
}

// failed redacts the key from e, logs it and returns it.
func (p *Provider) failed(req provider.Request, e *provider.Error) *provider.Error {
	e.Message = provider.Redact(e.Message, p.key)
	e.Code = provider.Redact(e.Code, p.key)
	model := req.Model
	if model == "" {
		model = p.model
	}
	p.log.Warn("model call failed", "provider", req.Provider, "baseURL", p.baseURL, "model", model,
		"retryable", e.Retryable, "status", e.Status, "code", e.Code, "error", e.Message)
	return e
}

// String describes the provider by its base URL (credentials removed).
func (p Provider) String() string { return "openai provider at " + p.baseURL }

// Format writes String for every verb, so that no formatting of a Provider
// or of a pointer to one prints its fields (the API key among them).
func (p Provider) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, p.String()) }

// LogValue logs a Provider as its String.
func (p Provider) LogValue() slog.Value { return slog.StringValue(p.String()) }
