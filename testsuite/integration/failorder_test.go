package integration

// A failed create reaches the caller with its type on both documented paths,
// and only once the run has closed, so a retry may start at once.

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// updateWithStartReady sends a start and WaitReady in one request, as a
// client in any language does, and returns the update's outcome.
func (w *world) updateWithStartReady(req wire.CreateSessionRequest) (wire.SessionInfo, error) {
	w.t.Helper()
	wid := wire.WorkflowID(req.SessionID)
	w.track(wid)
	op := w.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: wid, TaskQueue: w.taskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}, wire.CreateSessionName, req)
	var info wire.SessionInfo
	h, err := w.c.UpdateWithStartWorkflow(w.ctx(), client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions:          client.UpdateWorkflowOptions{WorkflowID: wid, UpdateName: wire.UpdateWaitReady, WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err == nil {
		err = h.Get(w.ctx(), &info)
	}
	return info, err
}

func TestFailedCreateAnswersOnceClosed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	w.startWorker()
	id := w.id("failclosed")
	wid := wire.WorkflowID(id)
	w.hooks.failSetup(id, temporal.NewNonRetryableApplicationError("setup refused", "SetupRefused", nil))
	req := wire.CreateSessionRequest{SessionID: id, Hooks: wire.Hooks{SetupActivity: hookSetup, DisposeActivity: hookDispose}}

	_, err := w.updateWithStartReady(req)
	requireAppError(t, err, "setup refused", "SetupRefused")
	// WaitReady answered after the rollback, with the run's completion:
	// the run is closed already and the rollback ran.
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, w.status(wid))
	require.Equal(t, []string{"setup", "dispose:rollback"}, w.hooks.log(id))
	w.requireNothingStored(id)

	// So a retry may start at once.
	w.hooks.todoSetup(id)
	info, err := w.updateWithStartReady(req)
	require.NoError(t, err)
	require.Equal(t, id, info.SessionID)
	w.dispose(id)
}

func TestWaitReadyAfterTheRunFailed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	w.startWorker()
	id := w.id("failthenwait")
	w.hooks.failSetup(id, temporal.NewNonRetryableApplicationError("setup refused", "SetupRefused", nil))
	run := w.create(wire.CreateSessionRequest{SessionID: id, Hooks: wire.Hooks{SetupActivity: hookSetup}})
	requireAppError(t, run.Get(w.ctx(), nil), "setup refused", "SetupRefused")

	// WaitReady sent after the run failed finds no run to update; the
	// client answers with the run's failure.
	c := sfclient.New(w.c, sfclient.Options{TaskQueue: w.taskQueue})
	_, err := c.WaitReady(w.ctx(), id)
	var e *sfclient.Error
	require.True(t, errors.As(err, &e), "not a typed error: %v", err)
	require.Equal(t, "SetupRefused", e.Type)
	require.Equal(t, "setup refused", e.Message)

	// A disposed session's completed run is not a failure, but not live.
	id2 := w.id("disposedthenwait")
	w.create(wire.CreateSessionRequest{SessionID: id2})
	w.waitReady(id2)
	w.dispose(id2)
	require.NoError(t, w.c.GetWorkflow(w.ctx(), wire.WorkflowID(id2), "").Get(w.ctx(), nil))
	_, err = c.WaitReady(w.ctx(), id2)
	require.ErrorIs(t, err, sfclient.ErrNotRunning)
	require.ErrorIs(t, err, sfclient.ErrSessionDisposed)
	require.Equal(t, `wait for session "`+id2+`": the session's run has completed (it was disposed)`, err.Error())
}
