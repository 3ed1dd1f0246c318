package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/openai"
)

// testKey is the API key the tests configure; no output may contain it.
const testKey = "sk-test-0123456789abcdefSECRET"

// received is one request the fake service got.
type received struct {
	Method, Path, Auth, ContentType string
	Body                            map[string]any
	Raw                             []byte
}

// fakeService is an in-process Chat Completions endpoint. Each request is
// answered by the handler; every request is recorded.
type fakeService struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []received
	handler func(w http.ResponseWriter, r *http.Request)
}

func newService(t *testing.T, handler func(w http.ResponseWriter, r *http.Request)) *fakeService {
	t.Helper()
	s := &fakeService{t: t, handler: handler}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := received{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"),
			ContentType: r.Header.Get("Content-Type"), Raw: raw}
		_ = json.Unmarshal(raw, &rec.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, rec)
		s.mu.Unlock()
		s.handler(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *fakeService) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.reqs...)
}

// provider returns a Provider for the service, logging into logs.
func (s *fakeService) provider(t *testing.T, logs *bytes.Buffer, mutate ...func(*openai.Config)) *openai.Provider {
	t.Helper()
	cfg := openai.Config{BaseURL: s.srv.URL + "/v1", APIKey: testKey, Model: "default-model"}
	cfg.Logger = slog.New(slog.DiscardHandler)
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// sse writes the events as server-sent events, flushing after each.
func sse(w http.ResponseWriter, events ...string) {
	f := w.(http.Flusher)
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
		f.Flush()
	}
}

func streamHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

// chunk builds a chat.completion.chunk with one choice whose delta is the
// given JSON object and finish reason (empty for null).
func chunk(delta string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1760000000,"model":"m",` +
		`"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + fr + `}]}`
}

// usageChunk builds the final usage chunk of stream_options.include_usage.
func usageChunk(usage string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1760000000,"model":"m","choices":[],"usage":` + usage + `}`
}

// result is what a stream yielded.
type result struct {
	chunks []provider.Chunk
	err    error
	errs   int // number of errors yielded
	after  int // chunks yielded after an error
}

func collect(ctx context.Context, p provider.Provider, req provider.Request) result {
	var r result
	for c, err := range p.Stream(ctx, req) {
		if err != nil {
			r.err = err
			r.errs++
			continue
		}
		if r.errs > 0 {
			r.after++
		}
		r.chunks = append(r.chunks, c)
	}
	return r
}

func simpleRequest() provider.Request {
	return provider.Request{Provider: "openai", Model: "gpt-test",
		Messages: []provider.Message{{Role: "user", Content: []provider.Block{{Type: "text", Text: "hi"}}}}}
}

// providerError asserts err is a *provider.Error and returns it.
func providerError(t *testing.T, err error) *provider.Error {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *provider.Error", err, err)
	}
	return pe
}

// noKey asserts that none of the texts contains the API key.
func noKey(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, testKey) {
			t.Fatalf("%s contains the API key: %s", what, s)
		}
	}
}
