package workflows_test

// The agent loop over the real agent activities with the OpenAI-compatible
// provider, against an in-process server speaking the Chat Completions
// event stream.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/openai"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

const openAITestKey = "sk-turn-test-SECRET-7f3a"

// chatServer answers the i-th request with answers[i] and records every
// request body.
type chatServer struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func newChatServer(t *testing.T, answers ...func(w http.ResponseWriter)) (*chatServer, *httptest.Server) {
	t.Helper()
	cs := &chatServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		cs.mu.Lock()
		i := len(cs.bodies)
		cs.bodies = append(cs.bodies, body)
		cs.mu.Unlock()
		if i >= len(answers) {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		answers[i](w)
	}))
	t.Cleanup(srv.Close)
	return cs, srv
}

func (cs *chatServer) requests() []map[string]any {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]map[string]any(nil), cs.bodies...)
}

// sseAnswer writes a 200 event stream of the given data lines; cut closes the
// connection after them instead of ending the stream.
func sseAnswer(cut bool, data ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range data {
			fmt.Fprintf(w, "data: %s\n\n", d)
			w.(http.Flusher).Flush()
		}
		if cut {
			panic(http.ErrAbortHandler)
		}
	}
}

func delta(d, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":` + d + `,"finish_reason":` + fr + `}]}`
}

// useOpenAIAgent registers the agent activities with the provider
// "deepseek" at baseURL, logging into logs.
func useOpenAIAgent(h *sessiontest.Harness, baseURL string, logs *syncBuffer) {
	h.T.Helper()
	p, err := openai.New(openai.Config{BaseURL: baseURL, APIKey: openAITestKey, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(h.T, err)
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"deepseek": p}))
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// requireNoKeyStored reads every file of an uncompressed store.
func requireNoKeyStored(t *testing.T, root string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NotContains(t, string(b), openAITestKey, path)
		return nil
	}))
}

// A turn whose first model call is cut mid-stream and whose retry is
// rate-limited: the third attempt streams reasoning, text and two parallel
// tool calls; the tools run; the next step answers. One assistant message is
// stored per step, and the second step's request carries the tool results.
func TestOpenAITurnRetriesACutStreamAndARateLimit(t *testing.T) {
	cwd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("alpha\n"), 0o644))
	cs, srv := newChatServer(t,
		sseAnswer(true, delta(`{"role":"assistant","content":"Let me"}`, "")),
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After-Ms", "20")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
		},
		sseAnswer(false,
			delta(`{"role":"assistant","content":null,"reasoning_content":"Read a.txt and list."}`, ""),
			delta(`{"content":"Let me look."}`, ""),
			delta(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}`, ""),
			delta(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"list_dir","arguments":"{}"}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a.txt\"}"}}]}`, ""),
			delta(`{}`, "tool_calls"),
			`{"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`,
			"[DONE]"),
		sseAnswer(false, delta(`{"content":"a.txt says alpha."}`, "stop"), "[DONE]"),
	)
	h := sessiontest.NewHarnessOn(t, sessiontest.NewStore(t, jsonl.CompressionNone)).WithID("oa")
	var logs syncBuffer
	useOpenAIAgent(h, srv.URL+"/v1", &logs)
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "oa",
		AgentOptions: &wire.AgentOptions{Provider: "deepseek", Model: "deepseek-chat"}, Meta: &wire.SessionMeta{Cwd: cwd}}, sessiontest.Prompt("what is in a.txt?"))
	sessiontest.RequireBalanced(t, evs)
	var assistants []wire.AssistantMessage
	var results []string
	for _, e := range evs {
		switch e.Type {
		case wire.TypeAssistantMessage:
			assistants = append(assistants, assistantOf(t, e))
		case wire.TypeToolResult:
			r, err := e.ToolResult()
			require.NoError(t, err)
			results = append(results, r.Message.Source.CallID)
		}
	}
	require.Len(t, assistants, 2, "one assistant message per step, none for the failed attempts")
	require.Equal(t, []wire.ContentBlock{
		{Type: "reasoning", Text: "Read a.txt and list."},
		{Type: "text", Text: "Let me look."},
		{Type: "tool-call", ID: "call_a", Name: "read_file", Arguments: json.RawMessage(`"{\"path\":\"a.txt\"}"`)},
		{Type: "tool-call", ID: "call_b", Name: "list_dir", Arguments: json.RawMessage(`"{}"`)},
	}, assistants[0].Message.Content)
	require.JSONEq(t, `{"inputTokens":30,"outputTokens":12}`, string(assistants[0].Usage))
	require.Equal(t, "a.txt says alpha.", assistants[1].Message.Content[0].Text)
	require.Equal(t, []string{"call_a", "call_b"}, results)
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))

	reqs := cs.requests()
	require.Len(t, reqs, 4, "the cut call, the rate-limited one, the retry that streamed, the second step")
	msgs := reqs[3]["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		mm := m.(map[string]any)
		roles = append(roles, fmt.Sprint(mm["role"]))
		if mm["role"] == "tool" && mm["tool_call_id"] == "call_a" {
			require.Contains(t, mm["content"], "alpha")
		}
	}
	require.Equal(t, []string{"user", "assistant", "tool", "tool"}, roles)
	requireNoKeyStored(t, h.Store.Root())
	require.Contains(t, logs.String(), "model call failed")
	require.NotContains(t, logs.String(), openAITestKey)
}

// A refused call (401 whose message echoes the key) ends the turn "error"
// with the service's message, without a retry, and the key is stored
// nowhere.
func TestOpenAITurnRefusedEndsInError(t *testing.T) {
	cs, srv := newChatServer(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"invalid_api_key"}}`, openAITestKey)
	})
	h := sessiontest.NewHarnessOn(t, sessiontest.NewStore(t, jsonl.CompressionNone)).WithID("or")
	var logs syncBuffer
	useOpenAIAgent(h, srv.URL+"/v1", &logs)
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "or",
		AgentOptions: &wire.AgentOptions{Provider: "deepseek", Model: "deepseek-chat"}}, sessiontest.Prompt("hi"))
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	te, err := evs[4].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "error", te.Reason.Kind)
	require.Contains(t, string(te.Reason.Error), "Incorrect API key provided: [redacted].")
	require.NotContains(t, string(te.Reason.Error), openAITestKey)
	require.Len(t, cs.requests(), 1, "a refused call is not retried")
	requireNoKeyStored(t, h.Store.Root())
	require.False(t, strings.Contains(fmt.Sprint(evs), openAITestKey))
}

// A turn on the OpenAI-compatible provider whose request the service
// refuses with its real context_length_exceeded error: the workflow
// compacts (one more Chat Completions call, the summarisation) and makes
// the step's call again, which carries the checkpoint; the turn completes.
func TestOpenAITurnRecoversFromContextLengthExceeded(t *testing.T) {
	long := strings.Repeat("many words ", 50)
	cs, srv := newChatServer(t,
		sseAnswer(false, delta(`{"role":"assistant","content":"first answer `+long+`"}`, "stop"), "[DONE]"),
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
		},
		sseAnswer(false, delta(`{"role":"assistant","content":"the gist"}`, "stop"), "[DONE]"),
		sseAnswer(false, delta(`{"role":"assistant","content":"second answer"}`, "stop"), "[DONE]"),
	)
	h := sessiontest.NewHarnessOn(t, sessiontest.NewStore(t, jsonl.CompressionNone)).WithID("ox")
	var logs syncBuffer
	useOpenAIAgent(h, srv.URL+"/v1", &logs)
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "ox", AgentOptions: &wire.AgentOptions{Provider: "deepseek", Model: "deepseek-chat"}},
		sessiontest.Prompt("first "+long), sessiontest.Prompt("second"))
	sessiontest.RequireBalanced(t, evs)
	bs := brackets(t, evs)
	require.Len(t, bs, 1)
	require.Equal(t, int64(2), *bs[0].turn)
	fin := evs[bs[0].start-1]
	require.Contains(t, string(fin.Data), `"failure":{"message":"This model's maximum context length is 128000 tokens.`)
	require.Equal(t, []string{"completed", "completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	reqs := cs.requests()
	require.Len(t, reqs, 4)
	msgs := reqs[3]["messages"].([]any)
	first := fmt.Sprint(msgs[0].(map[string]any)["content"])
	require.Contains(t, first, "This is an automatically generated checkpoint")
	require.Contains(t, first, "the gist")
	require.Equal(t, "second", fmt.Sprint(msgs[len(msgs)-1].(map[string]any)["content"]))
}
