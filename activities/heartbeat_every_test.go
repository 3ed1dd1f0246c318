package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// heartbeatEveryIn returns what HeartbeatEvery(every) gives inside an
// activity scheduled with the heartbeat timeout hb.
func heartbeatEveryIn(t *testing.T, hb, every time.Duration) time.Duration {
	t.Helper()
	env := (&testsuite.WorkflowTestSuite{}).NewTestWorkflowEnvironment()
	probe := func(ctx context.Context) (time.Duration, error) { return HeartbeatEvery(ctx, every), nil }
	env.RegisterActivity(probe)
	env.ExecuteWorkflow(func(ctx workflow.Context) (time.Duration, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: hb})
		var d time.Duration
		err := workflow.ExecuteActivity(ctx, probe).Get(ctx, &d)
		return d, err
	})
	require.NoError(t, env.GetWorkflowError())
	var d time.Duration
	require.NoError(t, env.GetWorkflowResult(&d))
	return d
}

// An activity heartbeats every second, or as configured, but at least four
// times per heartbeat timeout, so that a short timeout does not expire
// while it works.
func TestHeartbeatEveryFitsTheTimeout(t *testing.T) {
	require.Equal(t, time.Second, heartbeatEveryIn(t, 0, 0), "no heartbeat timeout")
	require.Equal(t, time.Second, heartbeatEveryIn(t, 10*time.Second, 0))
	require.Equal(t, time.Second, heartbeatEveryIn(t, 5*time.Second, 0), "the store activities' default timeout")
	require.Equal(t, 750*time.Millisecond, heartbeatEveryIn(t, 3*time.Second, 0), "the model call's timeout")
	require.Equal(t, 250*time.Millisecond, heartbeatEveryIn(t, time.Second, 0))
	require.Equal(t, 100*time.Millisecond, heartbeatEveryIn(t, time.Second, 100*time.Millisecond), "a shorter interval is kept")
	require.Equal(t, 10*time.Millisecond, heartbeatEveryIn(t, 20*time.Millisecond, 0), "at least 10 ms apart")
	require.Equal(t, time.Second, HeartbeatEvery(context.Background(), 0), "outside an activity")
}
