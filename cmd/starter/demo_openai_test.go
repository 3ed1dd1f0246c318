package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// openAIDemoServer speaks the Chat Completions event stream the way the
// demo's story needs a model to: a request without a tool message streams
// a sentence slowly and then the run_command call; one with a tool message
// answers. It records each request's system message and tool message.
type openAIDemoServer struct {
	demoModelRequests
}

func (s *openAIDemoServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || r.Header.Get("Authorization") != "Bearer test-key" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	system, result := "", ""
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			system = string(m.Content)
		case "tool":
			result = string(m.Content)
		}
	}
	n := s.record(result, system)

	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
		w.(http.Flusher).Flush()
	}
	if result != "" {
		send(`{"role":"assistant","content":"The outcome of the test run is unknown; I will not run it again."}`, "null")
		send(`{}`, `"stop"`)
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	if !streamDemoSentence(r.Context(), n == 1, func(word string) {
		delta, _ := json.Marshal(map[string]string{"content": word})
		send(string(delta), "null")
	}) {
		return
	}
	args, _ := json.Marshal(`{"command":"sleep 5 && echo '42 tests passed' >> test-report.txt"}`)
	send(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"run_command","arguments":`+string(args)+`}}]}`, "null")
	send(`{}`, `"tool_calls"`)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestDemoOnOpenAI runs `starter demo --model` with OPENAI_API_KEY set,
// against an in-process server speaking Chat Completions (OPENAI_BASE_URL,
// inherited by the worker processes): the same story through the
// OpenAI-compatible provider.
func TestDemoOnOpenAI(t *testing.T) {
	srv := &openAIDemoServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("OPENAI_API_KEY", "test-key")
	t.Setenv("OPENAI_BASE_URL", hs.URL+"/v1")

	r := mustOK(t, runCLI(t, "", "demo", "--root", t.TempDir(), "--compression", "none", "--model", "gpt-demo"))
	for _, sys := range requireDemoStory(t, r.stdout, &srv.demoModelRequests, "openai", "gpt-demo", "call_1", 22, 34) {
		var text string
		require.NoError(t, json.Unmarshal([]byte(sys), &text), sys)
		require.Contains(t, text, "sleep 5 && echo '42 tests passed' >> test-report.txt")
	}
}
