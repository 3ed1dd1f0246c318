package workflows_test

// The live phase's appends stored with a local activity run by the
// workflow's own worker, and the cases that store them with the
// AppendBatch activity instead (docs/DECISIONS.md D45, D46).

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// appendTwice runs a session through two appends of one turn each and a
// Dispose, and returns the stored events.
func appendTwice(t *testing.T, h *sessiontest.Harness, id string, opts *wire.Options) []session.Event {
	t.Helper()
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	a := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	b := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 5, 2, "y")})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, Options: opts})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	var ra, rb wire.AppendResult
	a.Decode(t, &ra)
	b.Decode(t, &rb)
	disp.OK(t)
	require.Equal(t, int64(5), ra.NextSeq)
	require.Equal(t, int64(10), rb.NextSeq)
	evs := sessiontest.Stored(t, h.Store, id)
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 10)
	return evs
}

// By default every append is stored by the local activity: no AppendBatch
// activity is scheduled.
func TestAppendStoredByLocalActivity(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("local")
	appendTwice(t, h, "local", nil)
	require.Equal(t, 2, h.LocalCount(wire.AppendBatchName), "each append sessiontest.Stored by the local activity")
	require.Equal(t, 2, h.Count(wire.AppendBatchName), "and by no AppendBatch activity")
}

// A run recorded before the change (GetVersion answers the default
// version) keeps scheduling the AppendBatch activity.
func TestAppendBeforeLocalChangeUsesActivity(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("old")
	h.Env.OnGetVersion("append-local-activity", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	appendTwice(t, h, "old", nil)
	require.Zero(t, h.LocalCount(wire.AppendBatchName))
	require.Equal(t, 2, h.Count(wire.AppendBatchName))
}

// Options.ActivityAppends stores every append with the activity.
func TestActivityAppendsOption(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("act")
	appendTwice(t, h, "act", &wire.Options{ActivityAppends: true})
	require.Zero(t, h.LocalCount(wire.AppendBatchName))
	require.Equal(t, 2, h.Count(wire.AppendBatchName))
}

// Store activities routed to another task queue run where the store is:
// the workflow's worker may not hold it, so no local activity.
func TestAppendStoreOnOtherTaskQueueUsesActivity(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tq")
	appendTwice(t, h, "tq", &wire.Options{TaskQueue: "store-elsewhere"})
	require.Zero(t, h.LocalCount(wire.AppendBatchName))
	require.Equal(t, 2, h.Count(wire.AppendBatchName))
}

// A batch above workflows.LocalAppendMaxBytes (256 KiB) goes to the
// activity; the batch at the line stays local.
func TestLargeAppendUsesActivity(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("big")
	// One todo/write event of about 300 KiB, then one of 100 KiB.
	big := todo(t, 0, 300<<10)
	small := todo(t, 1, 100<<10)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	a := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{big}})
	b := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{small}})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "big", Options: &wire.Options{MaxBatchBytes: 1 << 20}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	a.OK(t)
	b.OK(t)
	disp.OK(t)
	require.Equal(t, 1, h.LocalCount(wire.AppendBatchName), "only the 100 KiB batch is sessiontest.Stored locally")
	require.Equal(t, 2, h.Count(wire.AppendBatchName))
	var in activities.AppendBatchInput
	h.StartedArg(wire.AppendBatchName, 0, &in)
	require.Len(t, in.Events, 1)
	require.Equal(t, int64(0), in.Events[0].Seq, "the large batch went first, to the activity")
	require.Len(t, sessiontest.Stored(t, h.Store, "big"), 2)
}

// A local attempt that stored the batch and then failed (as a worker
// that dies after the write) falls back to the activity, whose re-append
// of the same batch the store accepts without writing it again.
func TestLocalAppendFailureFallsBackToActivity(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("fb")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			if _, err := h.Acts.AppendBatch(ctx, in); err != nil {
				return activities.AppendResult{}, err
			}
			return activities.AppendResult{}, temporal.NewApplicationError("connection reset", wire.ErrTypeIO)
		}).Once()
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(h.Acts.AppendBatch)
	evs := appendTwice(t, h, "fb", nil)
	require.Equal(t, int64(9), evs[9].Seq, "nothing sessiontest.Stored twice")
	require.Equal(t, 2, h.LocalCount(wire.AppendBatchName))
	require.Equal(t, 3, h.Count(wire.AppendBatchName), "the failed local attempt, the activity after it, the second append locally")
	require.Len(t, h.Logs.Warnings("local append failed"), 1)
}

// A refusal of the batch by the store is the append's failure: the
// activity would only refuse it again.
func TestLocalAppendRefusalIsNotRetried(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ref")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(
		activities.AppendResult{}, temporal.NewNonRetryableApplicationError("seq 0 does not continue the log", "SeqMismatch", nil)).Once()
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(h.Acts.AppendBatch)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	failed := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ref"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	app := sessiontest.RequireMessage(t, failed.Failure(t), "seq 0 does not continue the log")
	require.Equal(t, "SeqMismatch", app.Type())
	require.Equal(t, 1, h.Count(wire.AppendBatchName), "no activity after the refusal")
}

// todo returns a todo/write event at seq carrying n bytes of text.
func todo(t *testing.T, seq int64, n int) session.Event {
	t.Helper()
	e, err := session.NewEvent(wire.TypeTodoWrite, seq, 1_700_000_000_000+seq, map[string]any{"text": strings.Repeat("x", n)})
	require.NoError(t, err)
	return e
}
