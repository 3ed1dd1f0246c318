package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// maxTokens must be a positive safe integer: 1 and 2^53-1 pass; 0, a
// fraction and 2^53 are refused with the reference text.
func TestValidateAgentOptionsMaxTokens(t *testing.T) {
	tokens := func(v float64) *wire.AgentOptions { return &wire.AgentOptions{MaxTokens: &v} }
	require.NoError(t, validateAgentOptions(nil))
	require.NoError(t, validateAgentOptions(&wire.AgentOptions{}))
	require.NoError(t, validateAgentOptions(tokens(1)))
	require.NoError(t, validateAgentOptions(tokens(1<<53-1)))
	for _, v := range []float64{0, -1, 1.5, 1 << 53} {
		requireInvalidType(t, validateAgentOptions(tokens(v)), "agent maxTokens must be a positive safe integer")
	}
}

// sandboxMode is one of the harness's three modes, or absent; any other
// value is refused with the reference text.
func TestValidateAgentOptionsSandboxMode(t *testing.T) {
	for _, m := range []string{"", "read-only", "workspace-write", "danger-full-access"} {
		require.NoError(t, validateAgentOptions(&wire.AgentOptions{SandboxMode: m, NetworkAccess: true}), m)
	}
	for _, m := range []string{"full", "READ-ONLY", "workspace_write", " read-only"} {
		requireInvalidType(t, validateAgentOptions(&wire.AgentOptions{SandboxMode: m}),
			`agent sandboxMode must be "read-only", "workspace-write" or "danger-full-access"`)
	}
}
