package workerapp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
)

func TestParseArgsModelLimits(t *testing.T) {
	cfg, err := ParseArgs(nil, nil)
	require.NoError(t, err)
	require.Equal(t, agent.ModelLimits{IdleTimeout: 90 * time.Second, CallTimeout: 8 * time.Minute, MaxOutputBytes: 4 << 20}, cfg.Agent.Limits)

	env := []string{EnvModelIdleTimeout + "=30s", EnvModelCallTimeout + "=2m", EnvMaxModelOutput + "=1000"}
	cfg, err = ParseArgs(nil, env)
	require.NoError(t, err)
	require.Equal(t, agent.ModelLimits{IdleTimeout: 30 * time.Second, CallTimeout: 2 * time.Minute, MaxOutputBytes: 1000}, cfg.Agent.Limits)

	cfg, err = ParseArgs([]string{"--model-idle-timeout", "5s", "--model-call-timeout", "1m", "--max-model-output", "64"}, env)
	require.NoError(t, err)
	require.Equal(t, agent.ModelLimits{IdleTimeout: 5 * time.Second, CallTimeout: time.Minute, MaxOutputBytes: 64}, cfg.Agent.Limits, "flags beat the environment")

	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--model-idle-timeout", "-1s"}, "--model-idle-timeout: -1s is negative"},
		{[]string{"--model-call-timeout", "soon"}, `--model-call-timeout: time: invalid duration "soon"`},
		{[]string{"--max-model-output", "-1"}, "--max-model-output: -1 is negative"},
	} {
		_, err := ParseArgs(c.args, nil)
		require.EqualError(t, err, c.err, "%v", c.args)
	}
}
