package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// storeActivityOptions returns the activity options storeCtx gives the
// store activities of a session started with o.
func storeActivityOptions(t *testing.T, o *wire.Options) workflow.ActivityOptions {
	t.Helper()
	set, err := resolveOptions(o)
	require.NoError(t, err)
	var got workflow.ActivityOptions
	env := (&testsuite.WorkflowTestSuite{}).NewTestWorkflowEnvironment()
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		got = workflow.GetActivityOptions(set.storeCtx(ctx))
		return nil
	})
	require.NoError(t, env.GetWorkflowError())
	return got
}

// By default a store activity lost with a killed worker is retried soon: a
// 5 s heartbeat timeout and a first backoff of 200 ms, growing threefold
// up to a minute over ten attempts; a session's HeartbeatTimeoutMs still
// sets the heartbeat timeout of every activity.
func TestStoreActivitiesRetryALostAttemptSoon(t *testing.T) {
	got := storeActivityOptions(t, nil)
	require.Equal(t, 5*time.Second, got.HeartbeatTimeout)
	require.Equal(t, 10*time.Minute, got.StartToCloseTimeout)
	require.True(t, got.WaitForCancellation)
	require.Equal(t, 200*time.Millisecond, got.RetryPolicy.InitialInterval)
	require.Equal(t, 3.0, got.RetryPolicy.BackoffCoefficient)
	require.Equal(t, time.Minute, got.RetryPolicy.MaximumInterval)
	require.Equal(t, int32(10), got.RetryPolicy.MaximumAttempts)
	require.Equal(t, []string{"InvalidArgument"}, got.RetryPolicy.NonRetryableErrorTypes)

	got = storeActivityOptions(t, &wire.Options{HeartbeatTimeoutMs: 4000, MaxAttempts: 3})
	require.Equal(t, 4*time.Second, got.HeartbeatTimeout)
	require.Equal(t, int32(3), got.RetryPolicy.MaximumAttempts)

	set, err := resolveOptions(nil)
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, set.heartbeat, "the agent's activities keep the 10 s heartbeat timeout")
}
