package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// anthropicDemoServer speaks the Messages API's event stream the way the
// demo's story needs a model to: a request without a tool result streams a
// sentence slowly and then the run_command call; one with a tool result
// answers. It records each request's system prompt and tool results.
type anthropicDemoServer struct {
	demoModelRequests
}

func (s *anthropicDemoServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || r.Header.Get("x-api-key") != "test-key" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	result := ""
	for _, m := range req.Messages {
		if bytes.Contains(m.Content, []byte(`"tool_result"`)) {
			result = string(m.Content)
		}
	}
	var system []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(req.System, &system)
	var texts []string
	for _, b := range system {
		texts = append(texts, b.Text)
	}
	n := s.record(result, texts...)

	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(e string) {
		var typ struct{ Type string }
		_ = json.Unmarshal([]byte(e), &typ)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, e)
		flusher.Flush()
	}
	send(`{"type":"message_start","message":{"id":"msg","type":"message","role":"assistant","content":[],"model":"claude-demo","usage":{"input_tokens":20,"output_tokens":1}}}`)
	send(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	if result != "" {
		send(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The outcome of the test run is unknown; I will not run it again."}}`)
		send(`{"type":"content_block_stop","index":0}`)
		send(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}`)
		send(`{"type":"message_stop"}`)
		return
	}
	if !streamDemoSentence(r.Context(), n == 1, func(word string) {
		delta, _ := json.Marshal(word)
		send(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + string(delta) + `}}`)
	}) {
		return
	}
	send(`{"type":"content_block_stop","index":0}`)
	send(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"run_command","input":{}}}`)
	send(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"sleep 5 && echo '42 tests passed' >> test-report.txt\"}"}}`)
	send(`{"type":"content_block_stop","index":1}`)
	send(`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}`)
	send(`{"type":"message_stop"}`)
}

// TestDemoOnAnthropic runs `starter demo --model` with ANTHROPIC_API_KEY
// set, against an in-process server speaking the Messages API
// (ANTHROPIC_BASE_URL, inherited by the worker processes): the same story
// through the real provider, the system prompt asking for the command, the
// model call re-run after the first kill, TOOL_OUTCOME_UNKNOWN sent back
// to the model after the second.
func TestDemoOnAnthropic(t *testing.T) {
	srv := &anthropicDemoServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	t.Setenv("ANTHROPIC_BASE_URL", hs.URL)
	t.Setenv("OPENAI_API_KEY", "")

	r := mustOK(t, runCLI(t, "", "demo", "--root", t.TempDir(), "--compression", "none", "--model", "claude-demo"))
	for _, sys := range requireDemoStory(t, r.stdout, &srv.demoModelRequests, "anthropic", "claude-demo", "toolu_1", 24, 37) {
		require.Contains(t, sys, "sleep 5 && echo '42 tests passed' >> test-report.txt")
	}
}
