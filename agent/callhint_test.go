package agent_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
)

// A tool call's hint is the first line of its first telling argument, cut
// to 64 bytes on a character boundary; none when the arguments hold none.
func TestCallHint(t *testing.T) {
	require.Equal(t, "go test ./...", agent.CallHint(`{"command":"go test ./..."}`))
	require.Equal(t, "a.txt", agent.CallHint(`{"path":"a.txt","content":"x"}`))
	require.Equal(t, "make…", agent.CallHint(`{"command":"  make\nmake install"}`))
	require.Equal(t, "go", agent.CallHint(`{"path":"","cmd":"go"}`))
	require.Equal(t, "", agent.CallHint(`{"content":"x"}`))
	require.Equal(t, "", agent.CallHint(`{"command":`))
	require.Equal(t, "", agent.CallHint(`{"command":3}`))
	got := agent.CallHint(`{"command":"` + strings.Repeat("é", 40) + `"}`)
	require.Equal(t, strings.Repeat("é", 30)+"…", got)
	require.LessOrEqual(t, len(got), agent.MaxCallHint)
}
