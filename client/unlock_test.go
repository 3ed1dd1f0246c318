package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// leasedStore returns a store holding session id under a write lease owned
// by owner, as a workflow that died while live leaves it.
func leasedStore(t *testing.T, id string, owner jsonl.Owner) *jsonl.Store {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	ctx := context.Background()
	h, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 1700000000000}, jsonl.CreateOptions{HandleID: "h-" + id, Owner: owner})
	require.NoError(t, err)
	require.NoError(t, h.Flush(ctx))
	return st
}

// describing answers DescribeWorkflow with status, or err.
func describing(status enumspb.WorkflowExecutionStatus, err error, gotRunID *string) *fakeTemporal {
	return &fakeTemporal{describe: func(wid, rid string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
		*gotRunID = rid
		if err != nil {
			return nil, err
		}
		return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: "run-now"}, Status: status}}, nil
	}}
}

func TestUnlockRefusesWhileOwnerRuns(t *testing.T) {
	ctx := context.Background()
	st := leasedStore(t, "s1", jsonl.Owner{WorkflowID: "session/s1", RunID: "run-old"})
	rid := "unset"
	f := describing(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil, &rid)
	_, err := New(f, Options{}).Unlock(ctx, st, "s1")
	require.ErrorIs(t, err, ErrOwnerRunning)
	require.EqualError(t, err, `session "s1" is owned by workflow "session/s1", which is running (run run-now); dispose or cancel it instead`)
	require.Empty(t, rid, "the owner is looked up without a run id: continue-as-new changes it")
	require.Equal(t, []string{"describe session/s1"}, f.recorded())
	l, err := st.LeaseOf(ctx, "s1")
	require.NoError(t, err)
	require.NotNil(t, l, "the lease is kept")
	require.Equal(t, "h-s1", l.HandleID)
}

func TestUnlockForfeitsWhenOwnerGone(t *testing.T) {
	for name, f := range map[string]struct {
		status enumspb.WorkflowExecutionStatus
		err    error
	}{
		"completed":  {status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED},
		"terminated": {status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED},
		"unknown":    {err: serviceerror.NewNotFound("workflow not found")},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := leasedStore(t, "s1", jsonl.Owner{WorkflowID: "session/s1", RunID: "run-old"})
			var rid string
			removed, err := New(describing(f.status, f.err, &rid), Options{}).Unlock(ctx, st, "s1")
			require.NoError(t, err)
			require.NotNil(t, removed)
			require.Equal(t, "h-s1", removed.HandleID)
			require.Equal(t, jsonl.Owner{WorkflowID: "session/s1", RunID: "run-old"}, removed.Owner)
			l, err := st.LeaseOf(ctx, "s1")
			require.NoError(t, err)
			require.Nil(t, l)

			// The old owner's handle id is revoked: it can never write again.
			_, err = st.Open(ctx, "s1", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "h-s1", Owner: removed.Owner})
			require.ErrorIs(t, err, wire.ErrHandleRevoked)
			// A new owner can take the session.
			h, err := st.Open(ctx, "s1", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "h-new", Owner: jsonl.Owner{WorkflowID: "session/s1", RunID: "run-new"}})
			require.NoError(t, err)
			require.NoError(t, h.Close(ctx))
		})
	}
}

func TestUnlockOtherCases(t *testing.T) {
	ctx := context.Background()
	t.Run("no lease", func(t *testing.T) {
		st := leasedStore(t, "s1", jsonl.Owner{WorkflowID: "session/s1"})
		require.NoError(t, st.CloseHandle(ctx, jsonl.HandleRef{SessionID: "s1", HandleID: "h-s1", Access: jsonl.AccessWrite}))
		f := &fakeTemporal{}
		removed, err := New(f, Options{}).Unlock(ctx, st, "s1")
		require.NoError(t, err)
		require.Nil(t, removed)
		require.Empty(t, f.recorded(), "nothing to check")
	})
	t.Run("owner unknown", func(t *testing.T) {
		st := leasedStore(t, "s1", jsonl.Owner{})
		f := &fakeTemporal{}
		_, err := New(f, Options{}).Unlock(ctx, st, "s1")
		require.ErrorIs(t, err, ErrOwnerUnknown)
		require.Empty(t, f.recorded())
		l, err := st.LeaseOf(ctx, "s1")
		require.NoError(t, err)
		require.NotNil(t, l)
	})
	t.Run("lookup fails", func(t *testing.T) {
		st := leasedStore(t, "s1", jsonl.Owner{WorkflowID: "session/s1"})
		var rid string
		_, err := New(describing(0, serviceerror.NewUnavailable("connection refused"), &rid), Options{}).Unlock(ctx, st, "s1")
		require.ErrorContains(t, err, `look up the owner "session/s1" of session "s1"`)
		var ce *Error
		require.False(t, errors.As(err, &ce), "an unreachable server is not a verdict")
		l, err := st.LeaseOf(ctx, "s1")
		require.NoError(t, err)
		require.NotNil(t, l, "nothing is removed without a verdict")
	})
	t.Run("lease taken during the check", func(t *testing.T) {
		st := leasedStore(t, "s1", jsonl.Owner{WorkflowID: "session/s1", RunID: "run-old"})
		f := &fakeTemporal{describe: func(wid, rid string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
			// The old owner closes and a new one takes the lease meanwhile.
			require.NoError(t, st.CloseHandle(ctx, jsonl.HandleRef{SessionID: "s1", HandleID: "h-s1", Access: jsonl.AccessWrite}))
			h, err := st.Open(ctx, "s1", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "h-next", Owner: jsonl.Owner{WorkflowID: "session/s1", RunID: "run-next"}})
			require.NoError(t, err)
			t.Cleanup(func() { _ = h.Close(ctx) })
			return nil, serviceerror.NewNotFound("not found")
		}}
		_, err := New(f, Options{}).Unlock(ctx, st, "s1")
		require.ErrorIs(t, err, ErrLeaseChanged)
		l, err := st.LeaseOf(ctx, "s1")
		require.NoError(t, err)
		require.NotNil(t, l)
		require.Equal(t, "h-next", l.HandleID, "the new owner's lease survives")
	})
}

// TestUnlockUnreadableLease: a lease that cannot be decoded names no owner
// Temporal could check, so Unlock refuses it (pointing to the forced unlock)
// without contacting Temporal; the store's forced unlock removes it.
func TestUnlockUnreadableLease(t *testing.T) {
	ctx := context.Background()
	for name, body := range map[string]string{"empty": "", "corrupt": `{"handle":`} {
		t.Run(name, func(t *testing.T) {
			st := leasedStore(t, "s1", jsonl.Owner{WorkflowID: "session/s1"})
			matches, err := filepath.Glob(filepath.Join(st.Root(), "*", "s1", "session.lock"))
			require.NoError(t, err)
			require.Len(t, matches, 1)
			require.NoError(t, os.WriteFile(matches[0], []byte(body), 0o600))

			f := &fakeTemporal{}
			_, err = New(f, Options{}).Unlock(ctx, st, "s1")
			require.ErrorIs(t, err, ErrOwnerUnknown)
			require.ErrorIs(t, err, wire.ErrCorrupt)
			require.ErrorContains(t, err, `session "s1": its lease cannot be read (corrupt session lease: `)
			require.ErrorContains(t, err, "remove the lease with a forced unlock")
			require.Empty(t, f.recorded(), "nothing to ask Temporal")
			require.FileExists(t, matches[0])

			removed, err := st.ForceUnlock(ctx, "s1")
			require.NoError(t, err)
			require.Contains(t, removed.Unreadable, "corrupt session lease: ")
			l, err := st.LeaseOf(ctx, "s1")
			require.NoError(t, err)
			require.Nil(t, l)
		})
	}
}
