package workerapp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTraceContentSetting: --trace-content and SESSIONFLOW_TRACE_CONTENT
// opt in to content in spans; off by default; the flag beats the
// environment; a value that is not a boolean is refused.
func TestTraceContentSetting(t *testing.T) {
	cfg, err := ParseArgs(nil, nil)
	require.NoError(t, err)
	require.False(t, cfg.TraceContent)

	cfg, err = ParseArgs(nil, []string{"SESSIONFLOW_TRACE_CONTENT=true"})
	require.NoError(t, err)
	require.True(t, cfg.TraceContent)

	cfg, err = ParseArgs([]string{"--trace-content=false"}, []string{"SESSIONFLOW_TRACE_CONTENT=true"})
	require.NoError(t, err)
	require.False(t, cfg.TraceContent)

	cfg, err = ParseArgs([]string{"--trace-content"}, nil)
	require.NoError(t, err)
	require.True(t, cfg.TraceContent)

	_, err = ParseArgs(nil, []string{"SESSIONFLOW_TRACE_CONTENT=sometimes"})
	require.EqualError(t, err, `SESSIONFLOW_TRACE_CONTENT: "sometimes" is not a boolean`)
}
