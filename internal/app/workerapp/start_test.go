package workerapp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Start returns once the worker polls, calls the caller's OnStarted too,
// and Stop stops it (idempotently) with Run's result.
func TestStartWaitsUntilPollingAndStops(t *testing.T) {
	cfg := testConfig(t, "start")
	cfg.MetricsAddress = ""
	called := false
	cfg.OnStarted = func(Started) { called = true }
	r, err := Start(context.Background(), cfg, testLogger(t))
	require.NoError(t, err)
	assert.True(t, called, "the caller's OnStarted ran before Start returned")
	require.NoError(t, r.Stop())
	require.NoError(t, r.Stop())
}

// A worker that cannot start returns Run's error from Start.
func TestStartReturnsRunsError(t *testing.T) {
	_, err := Start(context.Background(), Config{}, nil)
	require.ErrorContains(t, err, "invalid worker configuration")
}
