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
		// A heartbeat is due (an interval has passed since the start).
		hb.last = time.Time{}
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

// TestHeartbeatNotBeforeAnInterval: an activity that ends within an interval
// of its start sends no heartbeat, however many steps it takes, and computes
// no details.
func TestHeartbeatNotBeforeAnInterval(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	var mu sync.Mutex
	beats := 0
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		beats++
		mu.Unlock()
	})
	rt := &Runtime{HeartbeatInterval: time.Hour}
	env.RegisterActivityWithOptions(func(ctx context.Context) (int, error) {
		calls := 0
		hb := rt.Heartbeat(ctx, func() any { calls++; return calls })
		for range 200 {
			require.NoError(t, hb.Step(func() error { return nil }))
		}
		hb.Stop()
		return calls, nil
	}, activity.RegisterOptions{Name: "quick"})
	v, err := env.ExecuteActivity("quick")
	require.NoError(t, err)
	var got int
	require.NoError(t, v.Get(&got))
	require.Equal(t, 0, got, "details computed within the first interval")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 0, beats, "heartbeats sent within the first interval")
}
