package workerapp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/anthropic"
)

const testAnthropicKey = "sk-ant-worker-test-KEY-987"

func TestParseArgsAnthropic(t *testing.T) {
	keyEnv := []string{"ANTHROPIC_API_KEY=" + testAnthropicKey}
	cfg, err := ParseArgs(nil, keyEnv)
	require.NoError(t, err)
	require.Equal(t, AnthropicConfig{}, cfg.Agent.Anthropic, "off unless asked for, even with a key in the environment")

	cfg, err = ParseArgs([]string{"--anthropic"}, keyEnv)
	require.NoError(t, err)
	require.Equal(t, AnthropicConfig{Enabled: true, APIKey: testAnthropicKey}, cfg.Agent.Anthropic)

	env := append([]string{"SESSIONFLOW_ANTHROPIC=true", "ANTHROPIC_BASE_URL=http://env.example"}, keyEnv...)
	cfg, err = ParseArgs(nil, env)
	require.NoError(t, err)
	require.Equal(t, AnthropicConfig{Enabled: true, BaseURL: "http://env.example", APIKey: testAnthropicKey}, cfg.Agent.Anthropic)

	cfg, err = ParseArgs([]string{"--anthropic-base-url", "http://flag.example"}, env)
	require.NoError(t, err)
	require.Equal(t, "http://flag.example", cfg.Agent.Anthropic.BaseURL, "the flag beats the environment")

	cfg, err = ParseArgs([]string{"--anthropic=false"}, env)
	require.NoError(t, err)
	require.Equal(t, AnthropicConfig{}, cfg.Agent.Anthropic)

	_, err = ParseArgs(nil, []string{"SESSIONFLOW_ANTHROPIC=yes please"})
	require.EqualError(t, err, `SESSIONFLOW_ANTHROPIC: "yes please" is not a boolean`)
}

// A worker configuration holding the key can be printed, marshalled and
// logged whole without showing it.
func TestAnthropicKeyIsRedactedInTheConfig(t *testing.T) {
	cfg, err := ParseArgs([]string{"--anthropic"}, []string{"ANTHROPIC_API_KEY=" + testAnthropicKey})
	require.NoError(t, err)
	require.Equal(t, Secret(testAnthropicKey), cfg.Agent.Anthropic.APIKey)
	js, err := json.Marshal(cfg.Agent.Anthropic)
	require.NoError(t, err)
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "agent", cfg.Agent, "key", cfg.Agent.Anthropic.APIKey)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "agent", cfg.Agent, "key", cfg.Agent.Anthropic.APIKey)
	for _, s := range []string{
		fmt.Sprintf("%v", cfg.Agent), fmt.Sprintf("%+v", cfg.Agent), fmt.Sprintf("%#v", cfg.Agent),
		fmt.Sprint(cfg.Agent.Anthropic.APIKey), string(js), logs.String(),
	} {
		require.NotContains(t, s, testAnthropicKey)
		require.Contains(t, s, "[redacted]")
	}
}

func TestAgentActivitiesAnthropic(t *testing.T) {
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir()})
	require.NoError(t, err)
	rt := &activities.Runtime{Store: st}

	var mu sync.Mutex
	var gotKey string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotKey = r.Header.Get("x-api-key")
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []string{
			`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":3,"output_tokens":1}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`,
			`{"type":"message_stop"}`,
		} {
			var typ struct{ Type string }
			require.NoError(t, json.Unmarshal([]byte(e), &typ))
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, e)
		}
	}))
	defer srv.Close()

	acts, err := AgentActivities(rt, AgentConfig{Anthropic: AnthropicConfig{Enabled: true, BaseURL: srv.URL, APIKey: testAnthropicKey}})
	require.NoError(t, err)
	p, err := acts.Providers.Get("anthropic")
	require.NoError(t, err)
	require.IsType(t, &anthropic.Provider{}, p)
	var text strings.Builder
	for c, err := range p.Stream(context.Background(), provider.Request{Model: "claude", Messages: []provider.Message{{Role: "user", Content: []provider.Block{{Type: "text", Text: "hello"}}}}}) {
		require.NoError(t, err)
		text.WriteString(c.Delta)
	}
	require.Equal(t, "hi", text.String())
	mu.Lock()
	require.Equal(t, testAnthropicKey, gotKey)
	mu.Unlock()

	_, err = AgentActivities(rt, AgentConfig{Anthropic: AnthropicConfig{Enabled: true}})
	require.ErrorIs(t, err, anthropic.ErrNoAPIKey)
	require.EqualError(t, err, "--anthropic: anthropic: no API key (set ANTHROPIC_API_KEY)")

	_, err = AgentActivities(rt, AgentConfig{Anthropic: AnthropicConfig{Enabled: true, APIKey: "k"}, Providers: provider.Set{"anthropic": p}})
	require.EqualError(t, err, `provider "anthropic" is given twice: by --anthropic and by the embedding application`)

	acts, err = AgentActivities(rt, AgentConfig{})
	require.NoError(t, err)
	_, err = acts.Providers.Get("anthropic")
	require.ErrorIs(t, err, provider.ErrUnknownProvider, "not offered unless enabled")
}
