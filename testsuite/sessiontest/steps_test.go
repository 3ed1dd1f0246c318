package sessiontest_test

// The harness's step sequencing, which the deterministic cases rely on.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// While an activity runs the environment's clock follows the wall clock: a
// create that takes 300 ms of real time lets the 10 ms and 20 ms offsets
// pass before the session is live. The Append still reaches a live session
// because it waits for the WaitReady before it.
func TestStepsWaitForTheEarlierUpdates(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("slow")
	h.Env.OnActivity(h.Acts.CreateHandle, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.CreateHandleInput) (activities.HandleInfo, error) {
			time.Sleep(300 * time.Millisecond)
			return h.Acts.CreateHandle(ctx, in)
		})
	ready := h.UpdateAt(10*time.Millisecond, "", wire.UpdateWaitReady)
	app := h.UpdateAt(20*time.Millisecond, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateAt(30*time.Millisecond, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "slow"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	var ar wire.AppendResult
	app.Decode(t, &ar)
	require.Equal(t, int64(5), ar.NextSeq)
	disp.OK(t)
	require.Len(t, sessiontest.Stored(t, h.Store, "slow"), 5)
}

// Steps run in the order they were registered, even when a later one is
// due first.
func TestStepsRunInRegistrationOrder(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("order")
	var order []string
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	h.At(3*time.Second, func() { order = append(order, "first") })
	h.At(2*time.Second, func() { order = append(order, "second") })
	disp := h.UpdateAt(time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "order"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	require.Equal(t, []string{"first", "second"}, order)
}
