package workerapp

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/wire"
)

// TestRunUsesStoreFS runs a worker whose store works through a
// fault-injecting filesystem: an error injected there fails the session's
// create, and a create without the fault stores its log through that
// filesystem.
func TestRunUsesStoreFS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ffs := faultfs.New(nil)
	cfg := testConfig(t, uniqueID("run-storefs"))
	cfg.Client = srv.Client()
	cfg.MetricsAddress = ""
	cfg.Compression = jsonl.CompressionNone
	cfg.StoreFS = ffs
	startRun(t, cfg)
	c := srv.Client()
	opts := &wire.Options{MaxAttempts: 1, AppendWindowMs: 10}

	// The store's mkdir goes through StoreFS: EACCES there fails the create.
	ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpMkdir, Err: syscall.EACCES})
	refused := uniqueID("storefs-refused")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wire.WorkflowID(refused), TaskQueue: cfg.TaskQueue},
		wire.CreateSessionName, workflows.CreateSessionRequest{SessionID: refused, Options: opts})
	require.NoError(t, err)
	// WaitReady answers with the creation failure (a live session would
	// answer at once too, without one).
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: wire.WorkflowID(refused), UpdateName: wire.UpdateWaitReady,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	require.Contains(t, app.Message(), "permission denied")
	require.Contains(t, ffs.String(), "mkdir ", "the injected mkdir is recorded")
	require.Error(t, run.Get(ctx, nil), "the refused create rolled back")

	// Without the fault, the log is published (fsynced temp file, then a
	// link) through StoreFS.
	ffs.Reset()
	id := uniqueID("storefs")
	wid := wire.WorkflowID(id)
	run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: cfg.TaskQueue},
		wire.CreateSessionName, workflows.CreateSessionRequest{SessionID: id, Options: opts})
	require.NoError(t, err)
	var info wire.SessionInfo
	update(t, ctx, c, wid, wire.UpdateWaitReady, &info)
	var ar wire.AppendResult
	update(t, ctx, c, wid, wire.UpdateAppend, &ar, workflows.AppendRequest{Events: turnEvents(t, info.NextSeq, info.LastTurn+1)})
	var dr wire.DisposeResult
	update(t, ctx, c, wid, wire.UpdateDispose, &dr)
	require.NoError(t, run.Get(ctx, nil))

	st, err := jsonl.NewStore(jsonl.Options{Root: cfg.StoreRoot, Compression: cfg.Compression})
	require.NoError(t, err)
	snap, err := st.Stat(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, snap)
	logPath := filepath.Clean(snap.Path)
	var linked bool
	for _, r := range ffs.Records() {
		if r.Op == faultfs.OpLink && filepath.Clean(r.Path) == logPath {
			linked = true
		}
		require.True(t, strings.HasPrefix(r.Path, cfg.StoreRoot), "operation outside the store root: %+v", r)
	}
	require.True(t, linked, "the log %s was not published through StoreFS:\n%s", logPath, ffs)
}
