package workerapp

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/tool"
)

func TestParseArgsAgentFlags(t *testing.T) {
	cfg, err := ParseArgs(nil, nil)
	require.NoError(t, err)
	lim := agent.DefaultModelLimits()
	compaction := agent.CompactionSettings{Threshold: 0.8, Retain: 0.16, SummaryMaxTokens: 8192}
	require.Equal(t, AgentConfig{Limits: lim, Compaction: compaction}, cfg.Agent, "no provider, no system prompt, run_command off, the default model limits and compaction by default")

	env := []string{EnvProviderScript + "=/env/script.json", EnvSystemPrompt + "=be brief", EnvEnableRunCommand + "=true"}
	cfg, err = ParseArgs(nil, env)
	require.NoError(t, err)
	require.Equal(t, AgentConfig{ProviderScript: "/env/script.json", SystemPrompt: "be brief", EnableRunCommand: true, Limits: lim, Compaction: compaction}, cfg.Agent)

	cfg, err = ParseArgs([]string{"--provider-script", "s.json", "--system-prompt", "flag", "--enable-run-command=false"}, env)
	require.NoError(t, err)
	require.Equal(t, AgentConfig{ProviderScript: "s.json", SystemPrompt: "flag", EnableRunCommand: false, Limits: lim, Compaction: compaction}, cfg.Agent, "flags beat the environment")

	_, err = ParseArgs(nil, []string{EnvEnableRunCommand + "=maybe"})
	require.EqualError(t, err, `SESSIONFLOW_ENABLE_RUN_COMMAND: "maybe" is not a boolean`)

	cfg, err = ParseArgs([]string{"--subagent-max-depth", "-1"}, []string{EnvSubagentMaxDepth + "=5"})
	require.NoError(t, err)
	require.Equal(t, -1, *cfg.Agent.SubagentMaxDepth, "the flag beats the environment")
	cfg, err = ParseArgs(nil, []string{EnvSubagentMaxDepth + "=0"})
	require.NoError(t, err)
	require.Equal(t, 0, *cfg.Agent.SubagentMaxDepth)
	_, err = ParseArgs(nil, []string{EnvSubagentMaxDepth + "=deep"})
	require.EqualError(t, err, `SESSIONFLOW_SUBAGENT_MAX_DEPTH: "deep" is not an integer`)
}

func TestAgentActivities(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[{"text":"hi"}]}`), 0o644))
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir()})
	require.NoError(t, err)
	rt := &activities.Runtime{Store: st}

	acts, err := AgentActivities(rt, AgentConfig{ProviderScript: script, SystemPrompt: "be brief"})
	require.NoError(t, err)
	require.Same(t, rt, acts.Runtime)
	require.Equal(t, "be brief", acts.System)
	_, err = acts.Providers.Get("scripted")
	require.NoError(t, err)
	names := func(a *agent.Activities) []string {
		var out []string
		for _, s := range a.Tools.Specs() {
			out = append(out, s.Name)
		}
		return out
	}
	require.Equal(t, []string{"list_dir", "read_file", "subagent", "write_file"}, names(acts), "the subagent tool by default")

	off := -1
	acts, err = AgentActivities(rt, AgentConfig{EnableRunCommand: true, SubagentMaxDepth: &off})
	require.NoError(t, err)
	require.Equal(t, []string{"list_dir", "read_file", "run_command", "write_file"}, names(acts), "no subagent tool at -1")
	_, err = acts.Providers.Get("scripted")
	require.ErrorIs(t, err, provider.ErrUnknownProvider, "no script, no scripted provider")

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"responses":[{"txt":"hi"}]}`), 0o644))
	_, err = AgentActivities(rt, AgentConfig{ProviderScript: bad})
	require.ErrorIs(t, err, scripted.ErrInvalidScript)
	require.ErrorContains(t, err, "--provider-script: "+bad)

	_, err = AgentActivities(rt, AgentConfig{ProviderScript: filepath.Join(dir, "absent.json")})
	require.ErrorIs(t, err, fs.ErrNotExist)

	_, err = AgentActivities(rt, AgentConfig{Tools: []tool.Tool{tool.Builtins(tool.BuiltinOptions{})[0]}})
	require.ErrorContains(t, err, "the agent's tools: ")
}

func TestParseArgsToolDeny(t *testing.T) {
	cfg, err := ParseArgs(nil, []string{EnvToolDeny + "=/env/a, /env/b ,"})
	require.NoError(t, err)
	require.Equal(t, []string{"/env/a", "/env/b"}, cfg.Agent.DenyPaths)
	cfg, err = ParseArgs([]string{"--tool-deny", "secrets"}, []string{EnvToolDeny + "=/env/a"})
	require.NoError(t, err)
	require.Equal(t, []string{"secrets"}, cfg.Agent.DenyPaths, "the flag beats the environment")
}

// The built-in tools of AgentActivities refuse the provider script and the
// DenyPaths, and the worker's own paths include the store root and the TLS
// files.
func TestAgentActivitiesDenyTheWorkersFiles(t *testing.T) {
	cwd := t.TempDir()
	script := filepath.Join(cwd, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[{"text":"hi"}]}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "secret.txt"), []byte("secret"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "open.txt"), []byte("open"), 0o644))
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir()})
	require.NoError(t, err)
	rt := &activities.Runtime{Store: st}
	acts, err := AgentActivities(rt, AgentConfig{ProviderScript: script, DenyPaths: []string{filepath.Join(cwd, "secret.txt")}})
	require.NoError(t, err)
	read := func(p string) tool.Result {
		return acts.Tools.Execute(t.Context(), "read_file", tool.Call{Cwd: cwd, Arguments: []byte(`{"path":"` + p + `"}`)})
	}
	for _, p := range []string{"script.json", "secret.txt"} {
		res := read(p)
		require.True(t, res.IsError, p)
		require.Equal(t, "PATH_DENIED", res.Error.Code, p)
	}
	require.False(t, read("open.txt").IsError)

	cfg := DefaultConfig()
	cfg.StoreRoot = "./root"
	cfg.Connection.TLS = &envconfig.ClientConfigTLS{ClientCertPath: "c.pem", ClientKeyPath: "k.pem"}
	exe, err := os.Executable()
	require.NoError(t, err)
	require.Equal(t, []string{"./root", exe, "c.pem", "k.pem", ""}, ownPaths(cfg))
}

func TestParseArgsCompactionFlags(t *testing.T) {
	cfg, err := ParseArgs([]string{"--context-window", "16000", "--compact-threshold", "0.7", "--compact-retain", "0.1", "--summary-max-tokens", "512"}, nil)
	require.NoError(t, err)
	require.Equal(t, agent.CompactionSettings{ContextWindow: 16000, Threshold: 0.7, Retain: 0.1, SummaryMaxTokens: 512}, cfg.Agent.Compaction)
	cfg, err = ParseArgs(nil, []string{EnvContextWindow + "=9000", EnvCompactThreshold + "=0.9"})
	require.NoError(t, err)
	require.Equal(t, int64(9000), cfg.Agent.Compaction.ContextWindow)
	require.Equal(t, 0.9, cfg.Agent.Compaction.Threshold)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--compact-threshold", "1.5"}, `--compact-threshold: "1.5" is not a number in (0, 1]`},
		{[]string{"--compact-threshold", "0"}, `--compact-threshold: "0" is not a number in (0, 1]`},
		{[]string{"--compact-retain", "0.9"}, "--compact-retain (0.9) must be less than --compact-threshold (0.8)"},
		{[]string{"--context-window", "-3"}, "--context-window: -3 is negative"},
	} {
		_, err := ParseArgs(c.args, nil)
		require.ErrorContains(t, err, c.want, c.args)
	}
}
