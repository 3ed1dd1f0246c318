package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// Absent or zero options take the defaults; positive ones are used as
// given; negative ones and a batch limit above 1 MiB are refused.
func TestResolveOptions(t *testing.T) {
	defaults := settings{
		window:         200 * time.Millisecond,
		maxBatchBytes:  256 << 10,
		timeout:        10 * time.Minute,
		heartbeat:      10 * time.Second,
		storeHeartbeat: 5 * time.Second,
		attempts:       10,
		canEvents:      1000,
	}
	for _, o := range []*wire.Options{nil, {}} {
		s, err := resolveOptions(o)
		require.NoError(t, err)
		assert.Equal(t, defaults, s)
	}

	s, err := resolveOptions(&wire.Options{AppendWindowMs: 1, MaxBatchBytes: 1 << 20, ActivityTimeoutMs: 2, HeartbeatTimeoutMs: 3, MaxAttempts: 1, TaskQueue: "q", HookTaskQueue: "h"})
	require.NoError(t, err)
	assert.Equal(t, settings{
		window:         time.Millisecond,
		maxBatchBytes:  1 << 20,
		taskQueue:      "q",
		hookTaskQueue:  "h",
		timeout:        2 * time.Millisecond,
		heartbeat:      3 * time.Millisecond,
		storeHeartbeat: 3 * time.Millisecond,
		attempts:       1,
		canEvents:      1000,
	}, s)

	for _, o := range []wire.Options{{AppendWindowMs: -1}, {MaxBatchBytes: -1}, {ActivityTimeoutMs: -1}, {HeartbeatTimeoutMs: -1}, {MaxAttempts: -1}} {
		_, err := resolveOptions(&o)
		requireInvalidArgument(t, err, "session options must not be negative")
	}
	_, err = resolveOptions(&wire.Options{MaxBatchBytes: 1<<20 + 1})
	requireInvalidArgument(t, err, "maxBatchBytes must be at most 1048576")
}

func requireInvalidArgument(t *testing.T, err error, msg string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	assert.Equal(t, "InvalidArgument", app.Type())
	assert.True(t, app.NonRetryable())
	assert.Equal(t, msg, app.Message())
}

func requireInvalidType(t *testing.T, err error, msg string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	assert.Equal(t, "TypeError", app.Type())
	assert.True(t, app.NonRetryable())
	assert.Equal(t, msg, app.Message())
}
