package anthropic_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/anthropic"
)

// An error response becomes a *provider.Error: 408, 429, 5xx and 529
// retryable with the server's delay, any other refusal not; the SDK makes
// exactly one request (its retries are off).
func TestStreamErrorResponses(t *testing.T) {
	cases := []struct {
		name    string
		respond func(http.ResponseWriter, *http.Request)
		want    provider.Error
	}{
		{"429 retry-after seconds", errorResponse(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", map[string]string{"retry-after": "7"}),
			provider.Error{Retryable: true, Status: 429, Code: "rate_limit_error", Message: "Number of request tokens has exceeded your per-minute rate limit", RetryAfter: 7 * time.Second}},
		{"429 retry-after-ms wins", errorResponse(429, "rate_limit_error", "slow down", map[string]string{"retry-after": "7", "retry-after-ms": "1500"}),
			provider.Error{Retryable: true, Status: 429, Code: "rate_limit_error", Message: "slow down", RetryAfter: 1500 * time.Millisecond}},
		{"500", errorResponse(500, "api_error", "Internal server error", nil),
			provider.Error{Retryable: true, Status: 500, Code: "api_error", Message: "Internal server error"}},
		{"529 overloaded", errorResponse(529, "overloaded_error", "Overloaded", map[string]string{"retry-after": "2"}),
			provider.Error{Retryable: true, Status: 529, Code: "overloaded_error", Message: "Overloaded", RetryAfter: 2 * time.Second}},
		{"408", errorResponse(408, "timeout_error", "Request timed out", nil),
			provider.Error{Retryable: true, Status: 408, Code: "timeout_error", Message: "Request timed out"}},
		{"401", errorResponse(401, "authentication_error", "invalid x-api-key", map[string]string{"retry-after": "5"}),
			provider.Error{Status: 401, Code: "authentication_error", Message: "invalid x-api-key"}},
		{"403", errorResponse(403, "permission_error", "Your API key does not have permission to use the specified resource.", nil),
			provider.Error{Status: 403, Code: "permission_error", Message: "Your API key does not have permission to use the specified resource."}},
		{"400", errorResponse(400, "invalid_request_error", "messages: text content blocks must be non-empty", nil),
			provider.Error{Status: 400, Code: "invalid_request_error", Message: "messages: text content blocks must be non-empty"}},
		{"400 max_tokens over the model's output cap", errorResponse(400, "invalid_request_error", "max_tokens: 300000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5-20250929", nil),
			provider.Error{Status: 400, Code: "invalid_request_error", Message: "max_tokens: 300000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5-20250929"}},
		{"413 request too large", errorResponse(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.", nil),
			provider.Error{Status: 413, Code: "request_too_large", Message: "Request exceeds the maximum allowed number of bytes."}},
		{"400 prompt is too long", errorResponse(400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum", nil),
			provider.Error{Status: 400, Code: "CONTEXT_WINDOW_EXCEEDED", Message: "prompt is too long: 208310 tokens > 200000 maximum"}},
		{"400 input and max_tokens exceed the context limit", errorResponse(400, "invalid_request_error", "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again", nil),
			provider.Error{Status: 400, Code: "CONTEXT_WINDOW_EXCEEDED", Message: "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again"}},
		{"400 input and max_tokens, plain", errorResponse(400, "invalid_request_error", "input length and max_tokens exceed context limit: 195000 + 8192 > 200000, decrease input length or max_tokens and try again", nil),
			provider.Error{Status: 400, Code: "CONTEXT_WINDOW_EXCEEDED", Message: "input length and max_tokens exceed context limit: 195000 + 8192 > 200000, decrease input length or max_tokens and try again"}},
		{"500 from a proxy wrapping a refusal", errorResponse(500, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum", nil),
			provider.Error{Retryable: true, Status: 500, Code: "invalid_request_error", Message: "prompt is too long: 208310 tokens > 200000 maximum"}},
		{"529 whose message names the prompt", errorResponse(529, "overloaded_error", "prompt is too long to schedule now", nil),
			provider.Error{Retryable: true, Status: 529, Code: "overloaded_error", Message: "prompt is too long to schedule now"}},
		{"502 from a proxy, not JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			w.Write([]byte("<html>bad gateway</html>"))
		}, provider.Error{Retryable: true, Status: 502, Message: "<html>bad gateway</html>"}},
	}
	for _, tc := range cases {
		f := newFakeAPI(t, tc.respond)
		chunks, err := collect(t, f.provider(t), simpleRequest())
		var pe *provider.Error
		if !errors.As(err, &pe) {
			t.Fatalf("%s: error %v, want a *provider.Error", tc.name, err)
		}
		if *pe != tc.want {
			t.Fatalf("%s: error\n got %+v\nwant %+v", tc.name, *pe, tc.want)
		}
		if len(chunks) != 0 {
			t.Fatalf("%s: chunks %+v", tc.name, chunks)
		}
		if n := len(f.requests()); n != 1 {
			t.Fatalf("%s: the server got %d requests, want 1 (no SDK retries)", tc.name, n)
		}
	}
}

// A stream that ends before message_stop, cleanly or by a broken
// connection, fails retryable after the chunks that came.
func TestStreamCutMidway(t *testing.T) {
	partial := []event{messageStart(5, 0, 0), textStart(0), textDelta(0, "Hel"), textDelta(0, "lo")}
	t.Run("clean end", func(t *testing.T) {
		f := newFakeAPI(t, streamOf(partial...))
		chunks, err := collect(t, f.provider(t), simpleRequest())
		wantErr := provider.Error{Retryable: true, Code: "stream_cut", Message: "the stream ended before message_stop"}
		var pe *provider.Error
		if !errors.As(err, &pe) || *pe != wantErr {
			t.Fatalf("error %v, want %+v", err, wantErr)
		}
		want := []provider.Chunk{{Type: "text", Delta: "Hel"}, {Type: "text", Delta: "lo"}}
		if !reflect.DeepEqual(chunks, want) {
			t.Fatalf("chunks %+v", chunks)
		}
	})
	t.Run("connection broken inside an event", func(t *testing.T) {
		f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			writeEvents(w, partial...)
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			// Half a chunk of the chunked body, then the connection closes.
			buf.WriteString("40\r\nevent: content_block_delta\ndata: {\"type\":\"content")
			buf.Flush()
			conn.Close()
		})
		chunks, err := collect(t, f.provider(t), simpleRequest())
		var pe *provider.Error
		if !errors.As(err, &pe) || !pe.Retryable || pe.Code != "connection" || pe.Status != 0 {
			t.Fatalf("error %v (%+v), want a retryable connection error", err, pe)
		}
		if len(chunks) != 2 {
			t.Fatalf("chunks %+v", chunks)
		}
	})
}

// An error event mid-stream is retryable for the transient error types and
// not for the others.
func TestStreamErrorEvent(t *testing.T) {
	cases := []struct {
		data string
		want provider.Error
	}{
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			provider.Error{Retryable: true, Code: "overloaded_error", Message: "Overloaded"}},
		{`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			provider.Error{Retryable: true, Code: "api_error", Message: "Internal server error"}},
		{`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`,
			provider.Error{Code: "CONTEXT_WINDOW_EXCEEDED", Message: "prompt is too long: 208310 tokens > 200000 maximum"}},
		{`{"type":"error","error":{"type":"invalid_request_error","message":"messages: text content blocks must be non-empty"}}`,
			provider.Error{Code: "invalid_request_error", Message: "messages: text content blocks must be non-empty"}},
		{`{"type":"error","error":{"type":"api_error","message":"prompt is too long for the scheduler"}}`,
			provider.Error{Retryable: true, Code: "api_error", Message: "prompt is too long for the scheduler"}},
		{`Overloaded`, provider.Error{Code: "malformed_event", Message: "an error event's data is not an API error: Overloaded"}},
		{`{"type":"error","error":{"message":"no type"}}`, provider.Error{Code: "malformed_event", Message: `an error event's data is not an API error: {"type":"error","error":{"message":"no type"}}`}},
	}
	for _, tc := range cases {
		f := newFakeAPI(t, streamOf(messageStart(5, 0, 0), textStart(0), textDelta(0, "Hi"), ev("error", tc.data)))
		chunks, err := collect(t, f.provider(t), simpleRequest())
		var pe *provider.Error
		if !errors.As(err, &pe) || *pe != tc.want {
			t.Fatalf("%s: error %v, want %+v", tc.data, err, tc.want)
		}
		if !reflect.DeepEqual(chunks, []provider.Chunk{{Type: "text", Delta: "Hi"}}) {
			t.Fatalf("%s: chunks %+v", tc.data, chunks)
		}
	}
}

// Event data that is not the documented JSON, or events that contradict
// each other, end the call with a malformed_event error that is not
// retried.
func TestStreamMalformedEvents(t *testing.T) {
	cases := []struct {
		name  string
		event event
		want  string
	}{
		{"data not JSON", ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"`),
			"model call failed (malformed_event): an event's data does not decode: "},
		{"delta for a block never started", textDelta(3, "x"),
			"model call failed (malformed_event): a delta for content block 3, which is not open"},
		{"delta of another block type", jsonDelta(0, `{}`),
			"model call failed (malformed_event): a input_json_delta for content block 0, which is of another type"},
		{"block started twice", textStart(0),
			"model call failed (malformed_event): content block 0 started twice"},
		{"tool_use without id", ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"","name":"x","input":{}}}`),
			"model call failed (malformed_event): tool_use block 1 without an id or a name"},
	}
	for _, tc := range cases {
		f := newFakeAPI(t, streamOf(messageStart(5, 0, 0), textStart(0), textDelta(0, "ok"), tc.event, messageDelta("end_turn", 1, 0), messageStop()))
		chunks, err := collect(t, f.provider(t), simpleRequest())
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Retryable || pe.Code != "malformed_event" || !strings.HasPrefix(err.Error(), tc.want) {
			t.Fatalf("%s: error %v (%+v), want one starting %q", tc.name, err, pe, tc.want)
		}
		if !reflect.DeepEqual(chunks, []provider.Chunk{{Type: "text", Delta: "ok"}}) {
			t.Fatalf("%s: chunks %+v", tc.name, chunks)
		}
	}
}

// Unknown event types and delta types are skipped, as the API's versioning
// policy asks of clients.
func TestStreamSkipsUnknownEvents(t *testing.T) {
	f := newFakeAPI(t, streamOf(messageStart(5, 0, 0),
		ev("future_event", `{"type":"future_event","x":1}`),
		textStart(0), ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"c","document_index":0,"document_title":null,"start_char_index":0,"end_char_index":1}}}`),
		textDelta(0, "ok"), blockStop(0),
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy"}}`), blockStop(1),
		messageDelta("end_turn", 2, 0), messageStop()))
	chunks, err := collect(t, f.provider(t), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.Chunk{{Type: "text", Delta: "ok"}, {Type: "usage", Usage: &provider.Usage{InputTokens: 5, OutputTokens: 2}}, {Type: "finish", Finish: "stop"}}
	if !reflect.DeepEqual(chunks, want) {
		t.Fatalf("chunks %+v", chunks)
	}
}

// A cancelled context ends the call with the context's error.
func TestStreamCancel(t *testing.T) {
	release := make(chan struct{})
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		streamOf(messageStart(5, 0, 0), textStart(0), textDelta(0, "Hi"))(w, r)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chunks []provider.Chunk
	var err error
	for c, e := range f.provider(t).Stream(ctx, simpleRequest()) {
		if e != nil {
			err = e
			break
		}
		chunks = append(chunks, c)
		cancel()
	}
	if !errors.Is(err, context.Canceled) || len(chunks) != 1 {
		t.Fatalf("error %v after %d chunks, want context.Canceled after 1", err, len(chunks))
	}
}

// A consumer that stops early ends the call without waiting for the
// stream.
func TestStreamConsumerStops(t *testing.T) {
	release := make(chan struct{})
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		streamOf(messageStart(5, 0, 0), textStart(0), textDelta(0, "Hi"), textDelta(0, "!"))(w, r)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	n := 0
	for range f.provider(t).Stream(context.Background(), simpleRequest()) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("%d chunks", n)
	}
}

// The API key appears in no error, chunk or log line, even when the
// service echoes it.
func TestAPIKeyNeverLeaks(t *testing.T) {
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)

	echo := func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		errorResponse(401, "authentication_error", "invalid x-api-key: "+key, nil)(w, r)
	}
	echoEvent := func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		streamOf(messageStart(1, 0, 0), ev("error", `{"type":"error","error":{"type":"api_error","message":"key `+key+`"}}`))(w, r)
	}
	echoBody := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		w.Write([]byte("upstream saw " + r.Header.Get("x-api-key")))
	}
	echoMalformed := func(w http.ResponseWriter, r *http.Request) {
		streamOf(messageStart(1, 0, 0), ev("message_delta", `{"type":"message_delta","bad":"`+r.Header.Get("x-api-key")))(w, r)
	}
	for name, respond := range map[string]func(http.ResponseWriter, *http.Request){
		"401 body": echo, "error event": echoEvent, "503 text": echoBody, "malformed event": echoMalformed,
	} {
		f := newFakeAPI(t, respond)
		chunks, err := collect(t, f.provider(t), simpleRequest())
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if got := f.requests()[0].Header.Get("x-api-key"); got != testKey {
			t.Fatalf("%s: the server got key %q", name, got)
		}
		js, _ := json.Marshal(err)
		cj, _ := json.Marshal(chunks)
		if containsKey(err.Error()) || containsKey(string(js)) || containsKey(string(cj)) {
			t.Fatalf("%s: the key leaked: %v / %s / %s", name, err, js, cj)
		}
		if name != "malformed event" && !strings.Contains(err.Error(), "[redacted]") {
			t.Fatalf("%s: error %q does not show where the key was removed", name, err)
		}
	}
	// A connection that fails before any response.
	f := newFakeAPI(t, streamOf())
	f.srv.Close()
	p, err := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(t, p, simpleRequest())
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Retryable || pe.Code != "connection" || containsKey(err.Error()) {
		t.Fatalf("refused connection: %v (%+v)", err, pe)
	}
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		if containsKey(sc.Text()) {
			t.Fatalf("the key leaked into a log line: %s", sc.Text())
		}
	}
}

func TestNewAndFromEnv(t *testing.T) {
	if _, err := anthropic.New(anthropic.Config{BaseURL: "http://127.0.0.1:1"}); !errors.Is(err, anthropic.ErrNoAPIKey) {
		t.Fatalf("New without a key: %v", err)
	}
	t.Setenv("ANTHROPIC_API_KEY", "")
	if _, err := anthropic.FromEnv(); !errors.Is(err, anthropic.ErrNoAPIKey) || err.Error() != "anthropic: no API key (set ANTHROPIC_API_KEY)" {
		t.Fatalf("FromEnv without a key: %v", err)
	}
	f := newFakeAPI(t, streamOf(okStream()...))
	t.Setenv("ANTHROPIC_API_KEY", "env-key")
	t.Setenv("ANTHROPIC_BASE_URL", f.srv.URL)
	p, err := anthropic.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, p, simpleRequest()); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[0].Header.Get("x-api-key"); got != "env-key" {
		t.Fatalf("x-api-key %q, want the environment's", got)
	}
}

// countingTransport counts the requests it carries.
type countingTransport struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func TestConfigHTTPClientAndMaxTokens(t *testing.T) {
	f := newFakeAPI(t, streamOf(okStream()...))
	tr := &countingTransport{next: http.DefaultTransport}
	p, err := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: f.srv.URL, MaxTokens: 777, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, p, simpleRequest()); err != nil {
		t.Fatal(err)
	}
	if tr.n.Load() != 1 {
		t.Fatalf("the configured client carried %d requests, want 1", tr.n.Load())
	}
	var body map[string]any
	mustUnmarshal(t, f.requests()[0].Body, &body)
	if body["max_tokens"] != float64(777) {
		t.Fatalf("max_tokens %v, want the configured default 777", body["max_tokens"])
	}
}
