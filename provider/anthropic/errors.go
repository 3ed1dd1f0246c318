package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/sessionflow/sessionflow/provider"
)

// Codes of the failures this package detects itself, in provider.Error.Code.
// Failures the service reports carry the service's error type instead
// (e.g. "rate_limit_error", "overloaded_error", "authentication_error").
const (
	// CodeStreamCut: the stream ended before message_stop. Retryable.
	CodeStreamCut = "stream_cut"
	// CodeConnection: the connection failed. Retryable.
	CodeConnection = "connection"
	// CodeMalformedEvent: an event's data is not the JSON the API
	// documents, or the events contradict each other. Not retryable.
	CodeMalformedEvent = "malformed_event"
	// CodeInvalidRequest: the request cannot be expressed in the Messages
	// API. Not retryable; no call is made.
	CodeInvalidRequest = "invalid_request"
)

// maxBodyText bounds the part of an error body without a message that goes
// into provider.Error.Message.
const maxBodyText = 300

// retryableTypes are the error types of an error event that a later call
// may not meet.
var retryableTypes = map[string]bool{
	string(sdk.ErrorTypeOverloadedError): true,
	string(sdk.ErrorTypeAPIError):        true,
	string(sdk.ErrorTypeRateLimitError):  true,
	string(sdk.ErrorTypeTimeoutError):    true,
}

// failure converts an error of the SDK's stream into a *provider.Error
// whose message does not hold the API key.
func (p *Provider) failure(err error) *provider.Error {
	e := classify(err)
	e.Message = provider.Redact(e.Message, p.key)
	return e
}

// classify converts an error of the SDK's stream into a *provider.Error.
func classify(err error) *provider.Error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return apiFailure(apiErr)
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) {
		return &provider.Error{Code: CodeMalformedEvent, Message: "an event's data does not decode: " + err.Error()}
	}
	return &provider.Error{Retryable: true, Code: CodeConnection, Message: err.Error()}
}

// apiFailure classifies an error response or an error event.
func apiFailure(e *sdk.Error) *provider.Error {
	typ := string(e.Type())
	msg := e.Message
	if msg == "" {
		if raw := strings.TrimSpace(e.RawJSON()); raw != "" {
			msg = truncate(raw, maxBodyText)
		} else {
			msg = http.StatusText(e.StatusCode)
		}
	}
	out := &provider.Error{Code: typ, Message: msg}
	if e.StatusCode >= 200 && e.StatusCode < 300 {
		// An error event in a stream whose response was a success.
		if typ == "" {
			out.Code = CodeMalformedEvent
			out.Message = "an error event's data is not an API error: " + truncate(strings.TrimSpace(e.RawJSON()), maxBodyText)
			return out
		}
		out.Retryable = retryableTypes[typ]
		if contextExceeded(typ, e.Message) {
			out.Code, out.Retryable = provider.CodeContextWindowExceeded, false
		}
		return out
	}
	out.Status = e.StatusCode
	if e.StatusCode == http.StatusBadRequest && contextExceeded(typ, e.Message) {
		out.Code = provider.CodeContextWindowExceeded
		return out
	}
	out.Retryable = e.StatusCode == http.StatusRequestTimeout || e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
	if out.Retryable && e.Response != nil {
		out.RetryAfter = provider.RetryAfter(e.Response.Header, time.Now())
	}
	return out
}

// contextExceeded reports whether an invalid_request_error with message
// msg refuses a request for not fitting the model's context window: "prompt
// is too long: 208310 tokens > 200000 maximum", "input length and
// max_tokens exceed context limit: ...", or any other wording the published
// harness's classifier recognises (provider.IsContextWindowExceeded).
func contextExceeded(typ, msg string) bool {
	if typ != string(sdk.ErrorTypeInvalidRequestError) {
		return false
	}
	return strings.HasPrefix(msg, "prompt is too long") || provider.IsContextWindowExceeded(msg)
}

// truncate cuts s to at most n bytes at a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// malformedEvent is the error of events that contradict each other.
func malformedEvent(format string, args ...any) *provider.Error {
	return &provider.Error{Code: CodeMalformedEvent, Message: fmt.Sprintf(format, args...)}
}

// invalidRequest is the error of a request the API cannot be given.
func invalidRequest(format string, args ...any) *provider.Error {
	return &provider.Error{Code: CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}
