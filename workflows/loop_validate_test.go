package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// maxParallelToolCalls must be a positive safe integer.
func TestValidateLoopMaxParallelToolCalls(t *testing.T) {
	calls := func(v float64) wire.SessionLoopInput { return wire.SessionLoopInput{MaxParallelToolCalls: &v} }
	for _, v := range []float64{1, 8, 1<<53 - 1} {
		_, err := validateLoop(calls(v))
		require.NoError(t, err, v)
	}
	for _, v := range []float64{0, -3, 2.5, 1 << 53} {
		_, err := validateLoop(calls(v))
		requireInvalidArgument(t, err, "maxParallelToolCalls must be a positive integer")
	}
}
