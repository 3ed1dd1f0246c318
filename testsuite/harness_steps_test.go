package testsuite

// The harness's step sequencing, which the deterministic cases rely on.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/workflows"
)

// While an activity runs the environment's clock follows the wall clock: a
// create that takes 300 ms of real time lets the 10 ms and 20 ms offsets
// pass before the session is live. The Append still reaches a live session
// because it waits for the WaitReady before it.
func TestStepsWaitForTheEarlierUpdates(t *testing.T) {
	h := newHarness(t).withID("slow")
	h.env.OnActivity(h.acts.CreateHandle, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.CreateHandleInput) (activities.HandleInfo, error) {
			time.Sleep(300 * time.Millisecond)
			return h.acts.CreateHandle(ctx, in)
		})
	ready := h.updateAt(10*time.Millisecond, "", workflows.UpdateWaitReady)
	app := h.updateAt(20*time.Millisecond, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	disp := h.updateAt(30*time.Millisecond, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "slow"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	var ar workflows.AppendResult
	app.decode(t, &ar)
	require.Equal(t, int64(5), ar.NextSeq)
	disp.ok(t)
	require.Len(t, stored(t, h.store, "slow"), 5)
}

// Steps run in the order they were registered, even when a later one is
// due first.
func TestStepsRunInRegistrationOrder(t *testing.T) {
	h := newHarness(t).withID("order")
	var order []string
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	h.at(3*time.Second, func() { order = append(order, "first") })
	h.at(2*time.Second, func() { order = append(order, "second") })
	disp := h.updateAt(time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "order"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	disp.ok(t)
	require.Equal(t, []string{"first", "second"}, order)
}
