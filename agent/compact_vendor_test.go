package agent_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/anthropic"
	"github.com/sessionflow/sessionflow/wire"
)

// vendorServer answers its requests in order with answers, keeping the
// bodies.
func vendorServer(t *testing.T, answers ...func(w http.ResponseWriter)) (func() [][]byte, string) {
	t.Helper()
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(bodies)
		bodies = append(bodies, body)
		mu.Unlock()
		if n >= len(answers) {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		answers[n](w)
	}))
	t.Cleanup(srv.Close)
	return func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return append([][]byte(nil), bodies...)
	}, srv.URL
}

// The step of a long conversation on the Anthropic provider, against an
// in-process Messages API: the service refuses the request with its real
// "prompt is too long" error; the refusal is stored as the call's finish,
// a compaction summarises the span with one more Messages call, and the
// step's call made again sends the checkpoint instead of the span.
func TestAnthropicContextExceededIsRecovered(t *testing.T) {
	const start = `{"type":"message_start","message":{"id":"msg","type":"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":20,"output_tokens":1}}}`
	text := func(s string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			sseEvents(w, start,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+s+`"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":6}}`,
				`{"type":"message_stop"}`)
		}
	}
	bodies, url := vendorServer(t,
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`)
		},
		text("the gist of the questions"),
		text("The answer."),
	)
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-test-key", BaseURL: url})
	require.NoError(t, err)
	s := &summarizer{}
	f := turnsFixture(t, 3, s)
	f.acts.Providers = provider.Set{"anthropic": p}
	next := int64(len(f.log()))
	f.append(
		ev(t, wire.TypeTurnStart, next, `{"turn":5}`),
		ev(t, wire.TypeStepStart, next+1, `{"turn":5,"step":1}`),
		surface(t, wire.TypeUserMessage, next+2, `{"id":"u-5","role":"user","content":[{"type":"text","text":"and now?"}],"source":{"kind":"user"}}`),
	)
	in := f.modelInput(5, 1)
	in.Provider, in.Model, in.Compacts = "anthropic", "claude-sonnet-4-5", true
	res, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, agent.TriggerOverflow, res.Compact)
	require.Equal(t, &provider.Error{Status: 400, Code: "CONTEXT_WINDOW_EXCEEDED", Message: "prompt is too long: 208310 tokens > 200000 maximum"}, res.Failure)
	evs := f.log()
	require.Equal(t, `{"provider":"anthropic","model":"claude-sonnet-4-5"}`, string(evs[next+3].Data), "the table knows no window without Windows set")
	require.Contains(t, string(evs[next+4].Data), `"failure":{"message":"prompt is too long: 208310 tokens > 200000 maximum","code":"CONTEXT_WINDOW_EXCEEDED"}`)

	cres, err := f.compact(f.acts, agent.CompactInput{Ref: f.hd.Ref(), Turn: 5, Trigger: agent.TriggerOverflow, Provider: "anthropic", Model: "claude-sonnet-4-5", After: res.NextSeq})
	require.NoError(t, err)
	require.GreaterOrEqual(t, cres.SummarySeq, int64(0))
	in.Overflows = 1
	res, err = f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Empty(t, res.Compact)
	require.Equal(t, provider.FinishStop, res.Finish)

	all := bodies()
	require.Len(t, all, 3)
	var summary, retried struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(all[1], &summary))
	last := summary.Messages[len(summary.Messages)-1]
	require.True(t, strings.HasPrefix(last.Content[0].Text, "You are now acting as a compaction engine"), "the summarisation request ends with the instruction")
	require.NoError(t, json.Unmarshal(all[2], &retried))
	require.True(t, strings.HasPrefix(retried.Messages[0].Content[0].Text, "This is an automatically generated checkpoint"))
	require.Equal(t, "the gist of the questions", retried.Messages[0].Content[1].Text)
	require.Equal(t, "and now?", retried.Messages[len(retried.Messages)-1].Content[0].Text)
}
