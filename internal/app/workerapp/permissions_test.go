package workerapp

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
)

// --sandbox-mode, --approval-policy and --preset (or their variables) set
// the worker's permission defaults; a preset sets both and the others must
// agree with it; an unknown value is refused naming its source.
func TestParseArgsPermissionDefaults(t *testing.T) {
	cfg, err := ParseArgs(nil, nil)
	require.NoError(t, err)
	require.Equal(t, activities.PermissionDefaults{}, cfg.Permissions, "no defaults: the built-in ones apply")

	cfg, err = ParseArgs([]string{"--approval-policy", "ask"}, nil)
	require.NoError(t, err)
	require.Equal(t, activities.PermissionDefaults{ApprovalPolicy: "ask"}, cfg.Permissions)

	cfg, err = ParseArgs(nil, []string{"SESSIONFLOW_SANDBOX_MODE=read-only", "SESSIONFLOW_APPROVAL_POLICY=never"})
	require.NoError(t, err)
	require.Equal(t, activities.PermissionDefaults{SandboxMode: "read-only", ApprovalPolicy: "never"}, cfg.Permissions)

	cfg, err = ParseArgs([]string{"--preset", "read-only"}, nil)
	require.NoError(t, err)
	require.Equal(t, activities.PermissionDefaults{SandboxMode: "read-only", ApprovalPolicy: "ask"}, cfg.Permissions)

	cfg, err = ParseArgs([]string{"--preset", "danger-full-access", "--sandbox-mode", "danger-full-access"}, nil)
	require.NoError(t, err)
	require.Equal(t, activities.PermissionDefaults{SandboxMode: "danger-full-access", ApprovalPolicy: "never"}, cfg.Permissions)

	for _, c := range []struct {
		args, env []string
		want      string
	}{
		{[]string{"--sandbox-mode", "open"}, nil, `--sandbox-mode: "open" is not a sandbox mode (read-only, workspace-write or danger-full-access)`},
		{nil, []string{"SESSIONFLOW_APPROVAL_POLICY=always"}, `SESSIONFLOW_APPROVAL_POLICY: "always" is not an approval policy (ask or never)`},
		{[]string{"--preset", "custom"}, nil, `--preset: "custom" is not a permission preset (read-only, workspace-write or danger-full-access)`},
		{[]string{"--preset", "read-only", "--approval-policy", "never"}, nil,
			`--preset: the preset read-only is sandbox mode read-only and approval policy ask, which --sandbox-mode and --approval-policy contradict`},
	} {
		_, err := ParseArgs(c.args, c.env)
		require.EqualError(t, err, c.want)
	}
}

// --runtime-context (or its variable) turns on the runtime-context
// snapshot of the agent activities; it is off by default.
func TestParseArgsRuntimeContext(t *testing.T) {
	cfg, err := ParseArgs(nil, nil)
	require.NoError(t, err)
	require.False(t, cfg.Agent.RuntimeContext)
	cfg, err = ParseArgs([]string{"--runtime-context"}, nil)
	require.NoError(t, err)
	require.True(t, cfg.Agent.RuntimeContext)
	cfg, err = ParseArgs(nil, []string{"SESSIONFLOW_RUNTIME_CONTEXT=true"})
	require.NoError(t, err)
	require.True(t, cfg.Agent.RuntimeContext)
	acts, err := AgentActivities(nil, cfg.Agent)
	require.NoError(t, err)
	require.True(t, acts.RuntimeContext)
}
