package workerapp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
)

const workerTestKey = "sk-worker-test-SECRET-42"

// chatService is a Chat Completions endpoint that answers "hi" and records
// the Authorization header of each request.
func chatService(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), auths...)
	}
}

func providerNames(s provider.Set) []string {
	var out []string
	for name := range s {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// streamText calls the named provider and returns its text.
func streamText(t *testing.T, s provider.Set, name string) string {
	t.Helper()
	p, err := s.Get(name)
	require.NoError(t, err)
	var b strings.Builder
	req := provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Content: []provider.Block{{Type: "text", Text: "hello"}}}}}
	for c, err := range p.Stream(context.Background(), req) {
		require.NoError(t, err)
		b.WriteString(c.Delta)
	}
	return b.String()
}

// agentProviders builds the agent activities of cfg and returns their
// providers.
func agentProviders(t *testing.T, cfg AgentConfig) provider.Set {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir()})
	require.NoError(t, err)
	rt := &activities.Runtime{Store: st}
	acts, err := AgentActivities(rt, cfg)
	require.NoError(t, err)
	return acts.Providers
}

func TestParseArgsOpenAIFlags(t *testing.T) {
	srv, auths := chatService(t)
	env := []string{
		"OPENAI_API_KEY=" + workerTestKey, "OPENAI_BASE_URL=" + srv.URL + "/v1",
		"LOCAL_KEY=sk-local",
	}
	cfg, err := ParseArgs(nil, env)
	require.NoError(t, err)
	require.Equal(t, OpenAIConfig{}, cfg.Agent.OpenAI, "off unless asked for, even with a key in the environment")

	cfg, err = ParseArgs([]string{
		"--openai",
		"--openai-compatible", "deepseek=" + srv.URL + "/v1,key-env=LOCAL_KEY,model=deepseek-chat",
		"--openai-compatible", "ollama=" + srv.URL + "/v1,max-tokens-field=max_tokens,send-reasoning",
	}, env)
	require.NoError(t, err)
	require.Equal(t, OpenAIConfig{Enabled: true, BaseURL: srv.URL + "/v1", APIKey: workerTestKey, Compatible: []OpenAIEndpoint{
		{Name: "deepseek", BaseURL: srv.URL + "/v1", APIKey: "sk-local", Model: "deepseek-chat"},
		{Name: "ollama", BaseURL: srv.URL + "/v1", MaxTokensField: "max_tokens", SendReasoning: true},
	}}, cfg.Agent.OpenAI)
	require.NotContains(t, fmt.Sprintf("%v %+v %#v", cfg, cfg.Agent, cfg.Agent.OpenAI), workerTestKey)
	require.NotContains(t, fmt.Sprintf("%v %+v %#v", cfg, cfg.Agent, cfg.Agent.OpenAI), "sk-local")
	js, err := json.Marshal(cfg.Agent.OpenAI)
	require.NoError(t, err)
	require.NotContains(t, string(js), workerTestKey)
	require.NotContains(t, string(js), "sk-local")

	// The agent activities offer them, each with its own key; a compatible
	// endpoint without key-env gets none.
	providers := agentProviders(t, cfg.Agent)
	require.Equal(t, []string{"deepseek", "ollama", "openai"}, providerNames(providers))
	for _, name := range []string{"openai", "deepseek", "ollama"} {
		require.Equal(t, "hi", streamText(t, providers, name), name)
	}
	require.Equal(t, []string{"Bearer " + workerTestKey, "Bearer sk-local", ""}, auths())
	require.NotContains(t, fmt.Sprintf("%v %+v %#v", providers, providers, providers), workerTestKey)

	// From the environment when the flags are not given; flags win.
	cfg, err = ParseArgs(nil, append(env, EnvOpenAI+"=true", EnvOpenAICompatible+"=a="+srv.URL+" b="+srv.URL+",key-env=LOCAL_KEY"))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "openai"}, providerNames(agentProviders(t, cfg.Agent)))
	cfg, err = ParseArgs([]string{"--openai=false", "--openai-compatible", "c=" + srv.URL}, append(env, EnvOpenAI+"=true", EnvOpenAICompatible+"=a="+srv.URL))
	require.NoError(t, err)
	require.Equal(t, []string{"c"}, providerNames(agentProviders(t, cfg.Agent)))
}

func TestParseArgsOpenAIFlagsRefusals(t *testing.T) {
	cases := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--openai"}, nil, "--openai: openai: OPENAI_API_KEY is not set"},
		{[]string{"--openai"}, []string{"OPENAI_BASE_URL=localhost:1"},
			"--openai: OPENAI_BASE_URL: openai: invalid configuration: base URL must be an absolute http or https URL"},
		{nil, []string{EnvOpenAI + "=yes please"}, `SESSIONFLOW_OPENAI: "yes please" is not a boolean`},
		{[]string{"--openai", "--openai-compatible", "openai=http://h"}, []string{"OPENAI_API_KEY=" + workerTestKey},
			`--openai-compatible: provider "openai" is given twice`},
		{[]string{"--openai-compatible", "a=http://h", "--openai-compatible", "a=http://g"}, nil,
			`--openai-compatible: provider "a" is given twice`},
		{[]string{"--openai-compatible", "x=http://h,key-env=NOPE"}, nil,
			`--openai-compatible: openai: invalid compatible-endpoint spec: provider "x": the environment variable NOPE is not set`},
		{nil, []string{EnvOpenAICompatible + "=x=localhost:8080"},
			`SESSIONFLOW_OPENAI_COMPATIBLE: provider "x": openai: invalid configuration: base URL must be an absolute http or https URL`},
	}
	for _, tc := range cases {
		_, err := ParseArgs(tc.args, tc.env)
		require.EqualError(t, err, tc.want, "%v %v", tc.args, tc.env)
		require.NotContains(t, err.Error(), workerTestKey)
	}
}

// A name another provider has is refused when the activities are built.
func TestAgentActivitiesRefuseAnOpenAINameTaken(t *testing.T) {
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir()})
	require.NoError(t, err)
	rt := &activities.Runtime{Store: st}
	cfg := AgentConfig{
		Anthropic: AnthropicConfig{Enabled: true, APIKey: "sk-ant"},
		OpenAI:    OpenAIConfig{Compatible: []OpenAIEndpoint{{Name: "anthropic", BaseURL: "http://h"}}},
	}
	_, err = AgentActivities(rt, cfg)
	require.EqualError(t, err, `--openai-compatible: provider "anthropic" is given twice: by another flag or the embedding application`)
}
