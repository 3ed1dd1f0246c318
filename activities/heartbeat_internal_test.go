package activities

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
)

// TestHeartbeatComputesDetailsOnlyToSend: the details function runs only
// for a heartbeat that is recorded, not at every step, and what is recorded
// is the state after the step that recorded it.
func TestHeartbeatComputesDetailsOnlyToSend(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	var mu sync.Mutex
	var beats []int
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var n int
		if d.HasValues() && d.Get(&n) == nil {
			mu.Lock()
			beats = append(beats, n)
			mu.Unlock()
		}
	})
	rt := &Runtime{HeartbeatInterval: time.Hour}
	var calls int
	env.RegisterActivityWithOptions(func(ctx context.Context) (int, error) {
		steps := 0
		hb := rt.Heartbeat(ctx, func() any { calls++; return steps })
		for range 200 {
			require.NoError(t, hb.Step(func() error { steps++; return nil }))
		}
		hb.Stop()
		return calls, nil
	}, activity.RegisterOptions{Name: "beat"})
	v, err := env.ExecuteActivity("beat")
	require.NoError(t, err)
	var got int
	require.NoError(t, v.Get(&got))
	require.Equal(t, 1, got, "details computed for heartbeats that were not sent")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1}, beats)
}
