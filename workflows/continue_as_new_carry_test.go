package workflows_test

// A session that continues as new keeps what its caller chose: the
// session's options (append path, batch limit, activity timeouts and
// attempts, search attributes), the run's timeouts, and its search
// attributes, which the next run sets again at every phase change.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// searchAttrUpserts records every upsert of the session's search
// attributes as "SessionId=…,SessionPhase=…,SessionCwd=…".
func searchAttrUpserts(h *sessiontest.Harness) *[]string {
	var out []string
	h.Env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		id, _ := sa.GetKeyword(workflows.SearchAttributeSessionID)
		phase, _ := sa.GetKeyword(workflows.SearchAttributeSessionPhase)
		cwd, _ := sa.GetKeyword(workflows.SearchAttributeSessionCwd)
		out = append(out, "SessionId="+id+",SessionPhase="+phase+",SessionCwd="+cwd)
	}).Return(nil)
	return &out
}

// storeCall is what an AppendBatch activity saw of its options.
type storeCall struct {
	heartbeat, startToClose time.Duration
}

func TestContinueAsNewKeepsOptionsTimeoutsAndSearchAttributes(t *testing.T) {
	opts := &wire.Options{
		MaxBatchBytes:      512 << 10,
		ActivityTimeoutMs:  123_000,
		HeartbeatTimeoutMs: 7_000,
		MaxAttempts:        3,
		SearchAttributes:   true,
		ActivityAppends:    true,
	}
	start := client.StartWorkflowOptions{
		ID:                  wire.WorkflowID("carry"),
		WorkflowRunTimeout:  90 * time.Hour,
		WorkflowTaskTimeout: 3 * time.Second,
	}
	h := sessiontest.NewHarness(t).WithID("carry")
	h.Env.SetStartWorkflowOptions(start)
	upserts := searchAttrUpserts(h)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	first := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	h.AtNoWait(3*time.Second, func() { h.Env.SetContinueAsNewSuggested(true) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{
		SessionID: "carry", Meta: &wire.SessionMeta{Cwd: "/work/carry"}, Options: opts,
	})
	err := h.Env.GetWorkflowError()
	ready.OK(t)
	first.OK(t)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	require.Equal(t, wire.LiveSessionName, can.WorkflowType.Name)
	require.Equal(t, 90*time.Hour, can.WorkflowRunTimeout, "the run timeout is the next run's")
	require.Equal(t, 3*time.Second, can.WorkflowTaskTimeout, "the workflow task timeout is the next run's")
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	require.Equal(t, &wire.Options{
		MaxBatchBytes:      524288,
		ActivityTimeoutMs:  123000,
		HeartbeatTimeoutMs: 7000,
		MaxAttempts:        3,
		SearchAttributes:   true,
		ActivityAppends:    true,
	}, state.Options)
	require.Equal(t, []string{
		"SessionId=carry,SessionPhase=setup,SessionCwd=/work/carry",
		"SessionId=carry,SessionPhase=committing,SessionCwd=/work/carry",
		"SessionId=carry,SessionPhase=live,SessionCwd=/work/carry",
	}, *upserts)

	// The next run, started as the server starts it: with the timeouts
	// the first run passed on.
	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("carry")
	start.WorkflowRunTimeout, start.WorkflowTaskTimeout = can.WorkflowRunTimeout, can.WorkflowTaskTimeout
	h2.Env.SetStartWorkflowOptions(start)
	upserts2 := searchAttrUpserts(h2)
	var calls []storeCall
	h2.Env.OnActivity(h2.Acts.AppendBatch, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			info := activity.GetInfo(ctx)
			calls = append(calls, storeCall{heartbeat: info.HeartbeatTimeout, startToClose: info.StartToCloseTimeout})
			return h2.Acts.AppendBatch(ctx, in)
		})
	ready2 := h2.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	// 400 KiB: above the default batch limit, within the one carried.
	big := h2.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{todo(t, 5, 400<<10)}})
	disp2 := h2.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.LiveSession, state)
	require.NoError(t, h2.Env.GetWorkflowError())
	ready2.OK(t)
	big.OK(t)
	disp2.OK(t)
	require.Zero(t, h2.LocalCount(wire.AppendBatchName), "ActivityAppends carried: no local store")
	require.Equal(t, []storeCall{{heartbeat: 7 * time.Second, startToClose: 123 * time.Second}}, calls, "the store activity's timeouts carried")
	require.Equal(t, []string{
		"SessionId=carry,SessionPhase=live,SessionCwd=/work/carry",
		"SessionId=carry,SessionPhase=disposing,SessionCwd=/work/carry",
		"SessionId=carry,SessionPhase=closed,SessionCwd=/work/carry",
	}, *upserts2, "the next run keeps the search attributes current")
	require.Len(t, sessiontest.Stored(t, h.Store, "carry"), 6)
}
