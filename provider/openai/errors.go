package openai

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/sessionflow/sessionflow/provider"
)

// maxBodyMessage bounds the message taken from an error body the service
// did not shape as {"error": {...}} (a proxy's HTML page, say).
const maxBodyMessage = 512

// classify maps a failure of the SDK's stream to a provider error. res is
// the HTTP response, nil when none arrived.
func (p *Provider) classify(err error, res *http.Response) *provider.Error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		e := statusError(apiErr.StatusCode, apiErr.Response)
		e.Code = apiErr.Code
		if e.Code == "" {
			e.Code = apiErr.Type
		}
		if apiErr.Message != "" {
			e.Message = apiErr.Message
		} else {
			// Not shaped {"error": {...}}: vLLM's {"message", "type",
			// "code"}, a proxy's page. The SDK keeps the body on the
			// response.
			bodyMessage(e, apiErr.Response)
		}
		refusedForContext(e, apiErr.Type)
		return e
	}
	if res != nil && res.StatusCode >= 400 {
		// The SDK returns its decoding error for a body it cannot decode;
		// the status and the body are still the service's answer.
		e := statusError(res.StatusCode, res)
		bodyMessage(e, res)
		refusedForContext(e, "")
		return e
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return eventError(streamErr.Event.Data)
	}
	if res == nil {
		return &provider.Error{Retryable: true, Code: CodeConnection, Message: err.Error()}
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return &provider.Error{Code: CodeMalformedChunk,
			Message: "a streamed chunk is not valid JSON: " + err.Error()}
	}
	return &provider.Error{Retryable: true, Code: CodeStreamInterrupted,
		Message: "the stream broke before the response was finished: " + err.Error()}
}

// refusedForContext gives e, an HTTP refusal whose error type was typ,
// the code provider.CodeContextWindowExceeded when it is a 400 whose code,
// type or message says the request exceeds the model's context window:
// OpenAI's code "context_length_exceeded", DeepSeek's and vLLM's "This
// model's maximum context length is ..." (provider.IsContextWindowExceeded,
// the published harness's classifier, which it applies to 400s alone). The
// status and the service's message are kept.
func refusedForContext(e *provider.Error, typ string) {
	if e.Status == http.StatusBadRequest && provider.IsContextWindowExceeded(e.Code, typ, e.Message) {
		e.Code = provider.CodeContextWindowExceeded
		e.Retryable = false
	}
}

// bodyMessage sets e's message (and code, when e has none) from an error
// body that is not {"error": {...}}: a JSON object's "message", "detail" or
// "error" text (and "code" or "type"), else the body's text, at most
// maxBodyMessage bytes.
func bodyMessage(e *provider.Error, res *http.Response) {
	if res == nil || res.Body == nil {
		return
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxBodyMessage))
	var obj struct {
		Message, Detail, Type string
		Code, Error           json.RawMessage
	}
	if json.Unmarshal(b, &obj) == nil {
		var text, code string
		_ = json.Unmarshal(obj.Error, &text)
		if m := cmp.Or(obj.Message, obj.Detail, text); m != "" {
			e.Message = m
		}
		_ = json.Unmarshal(obj.Code, &code)
		e.Code = cmp.Or(e.Code, code, obj.Type)
		return
	}
	if s := strings.TrimSpace(strings.ToValidUTF8(string(b), "")); s != "" {
		e.Message = s
	}
}

// statusError is the error for an HTTP status: 408, 409, 429 and 5xx are
// retryable, after the delay the response asks for.
func statusError(status int, res *http.Response) *provider.Error {
	e := &provider.Error{Status: status, Retryable: retryableStatus(status), Message: http.StatusText(status)}
	if e.Message == "" {
		e.Message = "HTTP status " + strconv.Itoa(status)
	}
	if e.Retryable && res != nil {
		e.RetryAfter = provider.RetryAfter(res.Header, time.Now())
	}
	return e
}

func retryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// eventError maps an error event inside a stream, {"error": {"message",
// "code", "type"}} or {"error": "text"}. A numeric code of a client error
// other than 408, 409 and 429 is a refusal; anything else failed on the
// service's side and is retryable, but for an error that says the request
// exceeds the model's context window (see streamedError).
func eventError(data []byte) *provider.Error {
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(data, &ev)
	var text string
	if json.Unmarshal(ev.Error, &text) == nil {
		return streamedError(text, nil, "")
	}
	var obj struct {
		Message string          `json:"message"`
		Code    json.RawMessage `json:"code"`
		Type    string          `json:"type"`
	}
	if json.Unmarshal(ev.Error, &obj) != nil {
		return streamedError("", nil, "")
	}
	return streamedError(obj.Message, obj.Code, obj.Type)
}

// responsesError maps an error event in the shape of the Responses API,
// {"type": "error", "code", "message", "param", "sequence_number"}, which
// the SDK decodes as a chunk (it has no "error" member), as eventError maps
// {"error": {"code", "message"}}.
func responsesError(data []byte) *provider.Error {
	var obj struct {
		Message string          `json:"message"`
		Code    json.RawMessage `json:"code"`
	}
	_ = json.Unmarshal(data, &obj)
	return streamedError(obj.Message, obj.Code, "")
}

// streamedError is the error of an error event whose message, code (a JSON
// string or number, nil for none) and type are given. It is retryable
// unless the code is a number that is a client error other than 408, 409
// and 429, or the code, type or message says the request exceeds the
// model's context window: that is provider.CodeContextWindowExceeded, not
// retryable (the same request meets the same window).
func streamedError(message string, code json.RawMessage, typ string) *provider.Error {
	e := &provider.Error{Retryable: true, Message: "the service reported an error in the stream", Code: typ}
	if message != "" {
		e.Message = message
	}
	var text string
	var num int
	switch {
	case json.Unmarshal(code, &text) == nil && text != "":
		e.Code = text
	case json.Unmarshal(code, &num) == nil && num >= 400 && num < 600:
		e.Status = num
		e.Retryable = retryableStatus(num)
	}
	if provider.IsContextWindowExceeded(e.Code, typ, message) {
		e.Code = provider.CodeContextWindowExceeded
		e.Retryable = false
	}
	return e
}
