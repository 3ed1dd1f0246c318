package agent_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/anthropic"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// sseEvents writes Messages API events (JSON objects with a "type") as
// server-sent events.
func sseEvents(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		var typ struct{ Type string }
		if err := json.Unmarshal([]byte(e), &typ); err != nil {
			panic(err)
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, e)
	}
}

// TestAnthropicTurn: a turn on the Anthropic provider against an
// in-process Messages API. An overloaded answer is retried after the
// service's delay, storing nothing; a stream cut mid-way is retried and
// stores one message; the signed thinking block of the first step is
// stored and sent back, with the tool call and its result, on the second.
func TestAnthropicTurn(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	const start = `{"type":"message_start","message":{"id":"msg","type":"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":20,"output_tokens":1}}}`
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) {
			w.Header().Set("retry-after", "3")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(529)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		},
		func(w http.ResponseWriter) {
			sseEvents(w, start,
				`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Read it."}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG=="}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"a.txt\"}"}}`,
				`{"type":"content_block_stop","index":1}`,
				`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}`,
				`{"type":"message_stop"}`)
		},
		func(w http.ResponseWriter) { // cut after the first text delta
			sseEvents(w, start,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The file "}}`)
		},
		func(w http.ResponseWriter) {
			sseEvents(w, start,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The file says hello."}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":6}}`,
				`{"type":"message_stop"}`)
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(bodies)
		bodies = append(bodies, body)
		mu.Unlock()
		answers[n](w)
	}))
	defer srv.Close()
	p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: srv.URL})
	require.NoError(t, err)

	f := newFixture(t, newTools(t, tool.Builtins(tool.BuiltinOptions{})...))
	f.acts.Providers = provider.Set{"anthropic": p}
	require.NoError(t, os.WriteFile(filepath.Join(f.cwd, "a.txt"), []byte("hello\n"), 0o600))
	in := f.modelInput(1, 1)
	in.Provider, in.Model = "anthropic", "claude"

	_, err = f.callModel(f.acts, in)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "ProviderUnavailable", app.Type())
	require.Equal(t, int64(3000), app.NextRetryDelay().Milliseconds())
	require.Len(t, f.log(), 3)

	res, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, []agent.CallRef{{ID: "toolu_1", Name: "read_file", Parallel: true, Hint: "a.txt"}}, res.ToolCalls)
	out, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 0, "toolu_1", "read_file"))
	require.NoError(t, err)
	require.False(t, out.IsError)
	f.append(ev(t, wire.TypeStepEnd, out.NextSeq, `{"turn":1,"step":1}`), ev(t, wire.TypeStepStart, out.NextSeq+1, `{"turn":1,"step":2}`))

	in.Step = 2
	_, err = f.callModel(f.acts, in)
	require.ErrorAs(t, err, &app)
	require.Equal(t, "ProviderUnavailable", app.Type(), "a cut stream is retried")
	res2, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, provider.FinishStop, res2.Finish)
	require.Equal(t, []string{"turn/start", "user/message", "step/start", "assistant/message", "tool/call", "tool/result",
		"step/end", "step/start", "assistant/message"}, withoutRecords(t, f.log()), "one message per model call")

	// The second step's request sends the first step back as Anthropic
	// requires: the signed thinking block, the tool_use, the tool_result.
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	mu.Lock()
	require.NoError(t, json.Unmarshal(bodies[3], &body))
	mu.Unlock()
	require.Len(t, body.Messages, 3)
	require.JSONEq(t, `{"role":"assistant","content":[
		{"type":"thinking","thinking":"Read it.","signature":"SIG=="},
		{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a.txt"}}]}`, string(body.Messages[1]))
	var result struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			IsError   bool   `json:"is_error"`
			Content   []struct{ Text string }
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(body.Messages[2], &result))
	require.Equal(t, "user", result.Role)
	require.Len(t, result.Content, 1)
	require.Equal(t, "tool_result", result.Content[0].Type)
	require.Equal(t, "toolu_1", result.Content[0].ToolUseID)
	require.False(t, result.Content[0].IsError)
	require.Contains(t, result.Content[0].Content[0].Text, "hello")
}
