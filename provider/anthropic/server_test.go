package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/anthropic"
)

// testKey is the API key of every test provider.
const testKey = "sk-ant-test-5ecret-KEY-0123456789"

// received is one request the fake Messages API received.
type received struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// fakeAPI is an in-process Messages API: it records every request and
// answers with respond.
type fakeAPI struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []received
	respond func(w http.ResponseWriter, r *http.Request)
}

func newFakeAPI(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) *fakeAPI {
	t.Helper()
	f := &fakeAPI{respond: respond}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the request body: %v", err)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, received{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		f.respond(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.reqs...)
}

func (f *fakeAPI) provider(t *testing.T) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// event is one server-sent event: its name and its data (JSON text).
type event struct{ name, data string }

func ev(name, data string) event { return event{name, data} }

// writeEvents writes the events as the Messages API streams them, flushing
// after each.
func writeEvents(w http.ResponseWriter, events ...event) {
	for _, e := range events {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, e.data)
		w.(http.Flusher).Flush()
	}
}

// streamOf answers every request with a 200 event stream of events.
func streamOf(events ...event) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		writeEvents(w, events...)
	}
}

// errorResponse answers every request with status, the headers and the
// API's error body of type typ and message msg.
func errorResponse(status int, typ, msg string, header map[string]string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011"}`, typ, msg)
	}
}

// Events in the shapes the Messages streaming documentation shows.
func messageStart(input, cacheRead, cacheWrite int64) event {
	return ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`, input, cacheWrite, cacheRead))
}
func textStart(i int) event {
	return ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
}
func textDelta(i int, s string) event {
	return ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, jsonString(s)))
}
func thinkingStart(i int) event {
	return ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, i))
}
func thinkingDelta(i int, s string) event {
	return ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, i, jsonString(s)))
}
func signatureDelta(i int, s string) event {
	return ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%s}}`, i, jsonString(s)))
}
func toolStart(i int, id, name string) event {
	return ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, i, id, name))
}
func jsonDelta(i int, s string) event {
	return ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, jsonString(s)))
}
func blockStop(i int) event {
	return ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}
func messageDelta(stop string, output, thinking int64) event {
	return ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d,"output_tokens_details":{"thinking_tokens":%d}}}`, stop, output, thinking))
}
func messageStop() event { return ev("message_stop", `{"type":"message_stop"}`) }
func ping() event        { return ev("ping", `{"type": "ping"}`) }

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// collect runs one call and returns its chunks and its error.
func collect(t *testing.T, p provider.Provider, req provider.Request) ([]provider.Chunk, error) {
	t.Helper()
	return collectCtx(context.Background(), p, req)
}

func collectCtx(ctx context.Context, p provider.Provider, req provider.Request) ([]provider.Chunk, error) {
	var chunks []provider.Chunk
	for c, err := range p.Stream(ctx, req) {
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
	}
	return chunks, nil
}

// simpleRequest is a one-message request.
func simpleRequest() provider.Request {
	return provider.Request{Provider: "anthropic", Model: "claude-sonnet-4-5",
		Messages: []provider.Message{{Role: "user", Content: []provider.Block{{Type: "text", Text: "hi"}}}}}
}

// canonical re-encodes JSON text with sorted keys, for comparisons.
func canonical(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func containsKey(s string) bool { return strings.Contains(s, testKey) }

func mustUnmarshal(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
