package workerapp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseArgsAgentFlags(t *testing.T) {
	cfg, err := ParseArgs(nil, nil)
	require.NoError(t, err)
	require.Equal(t, AgentConfig{}, cfg.Agent, "no provider, no system prompt, run_command off by default")

	env := []string{EnvProviderScript + "=/env/script.json", EnvSystemPrompt + "=be brief", EnvEnableRunCommand + "=true"}
	cfg, err = ParseArgs(nil, env)
	require.NoError(t, err)
	require.Equal(t, AgentConfig{ProviderScript: "/env/script.json", SystemPrompt: "be brief", EnableRunCommand: true}, cfg.Agent)

	cfg, err = ParseArgs([]string{"--provider-script", "s.json", "--system-prompt", "flag", "--enable-run-command=false"}, env)
	require.NoError(t, err)
	require.Equal(t, AgentConfig{ProviderScript: "s.json", SystemPrompt: "flag", EnableRunCommand: false}, cfg.Agent, "flags beat the environment")

	_, err = ParseArgs(nil, []string{EnvEnableRunCommand + "=maybe"})
	require.EqualError(t, err, `SESSIONFLOW_ENABLE_RUN_COMMAND: "maybe" is not a boolean`)
}
