// Package anthropic is a provider.Provider over Anthropic's Messages API,
// streamed, on Anthropic's Go SDK (github.com/anthropics/anthropic-sdk-go).
//
// A request maps to one streaming POST /v1/messages: the system prompt, the
// user and assistant messages (tool calls as tool_use blocks, tool results as
// tool_result blocks of a user message, reasoning as signed thinking blocks),
// the tools with their input schemas, max_tokens and, for a reasoning
// effort, an extended-thinking budget (see ThinkingBudget). The response's
// server-sent events map to provider chunks; every failure is a
// *provider.Error classified for the caller's retry policy (see Stream). The
// SDK's own retries are off: the caller retries.
//
// The API key is sent only in the x-api-key header, with the SDK's
// anthropic-version header. It never appears in an
// error, a chunk or a log line: the package logs nothing, and every error
// text is scrubbed of the key before it is returned.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 3, with
// provider: it may import provider, wire, internal/lib/... and session, and
// nothing above.
package anthropic

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"os"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/sessionflow/sessionflow/provider"
)

// DefaultBaseURL is the Messages API's base URL when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is the max_tokens of a request that sets none (the API
// requires one) when Config.MaxTokens is 0.
const DefaultMaxTokens = 4096

// Environment variables read by EnvConfig, as Anthropic's own tools read
// them.
const (
	EnvAPIKey  = "ANTHROPIC_API_KEY"
	EnvBaseURL = "ANTHROPIC_BASE_URL"
)

// ErrNoAPIKey is returned by New for a Config without an API key.
var ErrNoAPIKey = errors.New("anthropic: no API key (set " + EnvAPIKey + ")")

// Config configures a Provider.
type Config struct {
	// APIKey is the key sent in the x-api-key header. Required.
	APIKey string
	// BaseURL is the API's base URL; empty means DefaultBaseURL.
	BaseURL string
	// MaxTokens is the max_tokens of a request that sets none; 0 means
	// DefaultMaxTokens.
	MaxTokens int64
	// HTTPClient performs the requests; nil means the SDK's default client.
	HTTPClient *http.Client
}

// EnvConfig returns the Config given by the environment: the key from
// ANTHROPIC_API_KEY and, when set, the base URL from ANTHROPIC_BASE_URL.
func EnvConfig() Config {
	return Config{APIKey: os.Getenv(EnvAPIKey), BaseURL: os.Getenv(EnvBaseURL)}
}

// FromEnv returns a Provider configured by EnvConfig.
func FromEnv() (*Provider, error) { return New(EnvConfig()) }

// Provider streams model calls from the Messages API. It is safe for
// concurrent use.
type Provider struct {
	client    sdk.Client
	key       string
	maxTokens int64
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Provider for cfg. It reads no environment variable and no
// SDK configuration file: cfg is the whole configuration.
func New(cfg Config) (*Provider, error) {
	if cfg.APIKey == "" {
		return nil, ErrNoAPIKey
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	maxTokens := cfg.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		// The key goes in x-api-key, the header the Messages API documents
		// for API keys and the one compatible endpoints check (the SDK's
		// WithAPIKey sends it as a bearer token).
		option.WithHeader("x-api-key", cfg.APIKey),
		// The caller retries (as activity retries, honouring RetryAfter).
		option.WithMaxRetries(0),
		// No SDK spans: they would carry request details to whatever
		// tracer provider the process registered.
		option.WithoutOpenTelemetry(),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{client: sdk.NewClient(opts...), key: cfg.APIKey, maxTokens: maxTokens}, nil
}

// Stream performs one streamed Messages call. It yields text, reasoning
// (with the signature of each thinking block on the chunk that ends it, see
// provider.Chunk.Signature), tool-call, one usage and one finish chunk, or
// one error, which is the context's error when ctx is done and otherwise a
// *provider.Error:
//
//   - the service refused the request (400, 401, 403, 404, 413 and any other
//     4xx but 408 and 429): not retryable, Status, Code = the error type
//     (e.g. "authentication_error") and the service's message;
//   - the request does not fit the model's context window (a 400 or an error
//     event of type invalid_request_error saying "prompt is too long: ..."
//     or "input length and max_tokens exceed context limit: ..."): not
//     retryable, Code provider.CodeContextWindowExceeded, with the status
//     (0 for an event) and the service's message;
//   - 408, 429, 5xx and 529 (overloaded): retryable, with RetryAfter from
//     the retry-after-ms or retry-after header;
//   - an error event in the stream: retryable for overloaded_error,
//     api_error, rate_limit_error and timeout_error, otherwise not; Code =
//     the error type, Status 0;
//   - the connection failed or the stream ended before message_stop:
//     retryable, Code "connection" or "stream_cut";
//   - an event whose data is not the JSON the API documents: not retryable,
//     Code "malformed_event" (a service that sends it would send it again);
//   - a request this package cannot express (an unknown reasoning effort, a
//     tool schema that is not a JSON object, a block type the API has no
//     place for): not retryable, Code "invalid_request", before any call.
func (p *Provider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(provider.Chunk{}, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// res is the HTTP response, to tell a page that is not an event
		// stream from a stream cut short.
		var res *http.Response
		stream := p.client.Messages.NewStreaming(ctx, params, option.WithMiddleware(
			func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				r, err := next(req)
				res = r
				return r, err
			}))
		defer stream.Close()
		var st streamState
		events := 0
		for stream.Next() {
			events++
			done, err := st.event(stream.Current(), func(c provider.Chunk) bool { return yield(c, nil) })
			if err != nil {
				yield(provider.Chunk{}, err)
				return
			}
			if done {
				return
			}
		}
		if ctx.Err() != nil {
			yield(provider.Chunk{}, ctx.Err())
			return
		}
		if events == 0 {
			if e := provider.NotEventStream(res); e != nil {
				yield(provider.Chunk{}, e)
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(provider.Chunk{}, p.failure(err))
			return
		}
		yield(provider.Chunk{}, &provider.Error{Retryable: true, Code: CodeStreamCut,
			Message: "the stream ended before message_stop"})
	}
}
