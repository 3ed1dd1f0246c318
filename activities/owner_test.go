package activities_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// execution is one execution the fake Temporal knows.
type execution struct {
	wid, rid string
	status   enumspb.WorkflowExecutionStatus
}

// fakeTemporal answers DescribeWorkflow from its executions (the
// last one of a workflow id is the latest); other calls panic.
type fakeTemporal struct {
	sdkclient.Client
	execs []execution
	err   error
	calls []string
}

func (f *fakeTemporal) DescribeWorkflow(_ context.Context, wid, rid string) (*sdkclient.WorkflowExecutionDescription, error) {
	f.calls = append(f.calls, wid+"@"+rid)
	if f.err != nil {
		return nil, f.err
	}
	var found *execution
	for i := range f.execs {
		e := &f.execs[i]
		if e.wid == wid && (rid == "" || e.rid == rid) {
			found = e
		}
	}
	if found == nil {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &sdkclient.WorkflowExecutionDescription{RawResponse: &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: found.wid, RunId: found.rid}, Status: found.status}}}, nil
}

const (
	running    = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	terminated = enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED
	canned     = enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
)

func TestLookupOwner(t *testing.T) {
	owner := jsonl.Owner{WorkflowID: "session/s", RunID: "r1"}
	self := jsonl.Owner{WorkflowID: "session/s", RunID: "r9"}
	for name, c := range map[string]struct {
		execs []execution
		owner jsonl.Owner
		self  jsonl.Owner
		want  activities.OwnerState
		runID string
	}{
		"terminated, resume runs":          {execs: []execution{{"session/s", "r1", terminated}, {"session/s", "r9", running}}, owner: owner, self: self, want: activities.OwnerGone},
		"continued as new, chain ended":    {execs: []execution{{"session/s", "r1", canned}, {"session/s", "r2", terminated}, {"session/s", "r9", running}}, owner: owner, self: self, want: activities.OwnerGone},
		"chain still runs (operator)":      {execs: []execution{{"session/s", "r1", canned}, {"session/s", "r2", running}}, owner: owner, want: activities.OwnerRunning, runID: "r2"},
		"owner runs (operator)":            {execs: []execution{{"session/s", "r1", running}}, owner: owner, want: activities.OwnerRunning, runID: "r1"},
		"owner closed (operator)":          {execs: []execution{{"session/s", "r1", terminated}}, owner: owner, want: activities.OwnerGone},
		"other workflow id runs":           {execs: []execution{{"loop/x", "r5", running}, {"session/s", "r9", running}}, owner: jsonl.Owner{WorkflowID: "loop/x", RunID: "r5"}, self: self, want: activities.OwnerRunning, runID: "r5"},
		"unknown workflow id":              {execs: []execution{{"session/s", "r9", running}}, owner: jsonl.Owner{WorkflowID: "cli", RunID: "123-ab"}, self: self, want: activities.OwnerUnknown},
		"no workflow id":                   {owner: jsonl.Owner{}, self: self, want: activities.OwnerUnknown},
		"run unknown here, resume runs":    {execs: []execution{{"session/s", "r9", running}}, owner: owner, self: self, want: activities.OwnerUnknown},
		"lease names the resume's own run": {execs: []execution{{"session/s", "r9", running}}, owner: self, self: self, want: activities.OwnerUnknown},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := activities.LookupOwner(context.Background(), &fakeTemporal{execs: c.execs}, c.owner, c.self)
			require.NoError(t, err)
			require.Equal(t, c.want, got.State)
			require.Equal(t, c.runID, got.RunID)
		})
	}
	_, err := activities.LookupOwner(context.Background(), &fakeTemporal{err: serviceerror.NewUnavailable("down")}, owner, self)
	require.ErrorContains(t, err, "down")
}

// leased stores session id, still leased by owner's handle h-old.
func leased(t *testing.T, a *activities.Activities, id string, owner jsonl.Owner) {
	t.Helper()
	info, err := a.CreateHandle(context.Background(), activities.CreateHandleInput{
		Header: wire.Header{ID: id, CreatedAt: 1}, HandleID: "h-old", Owner: owner})
	require.NoError(t, err)
	// Materialized, as a session that went live is.
	require.NoError(t, a.Flush(context.Background(), activities.HandleInput{Ref: info.Ref}))
}

func TestForfeitDeadOwner(t *testing.T) {
	ctx := context.Background()
	self := jsonl.Owner{WorkflowID: "session/s", RunID: "r9"}
	old := jsonl.Owner{WorkflowID: "session/s", RunID: "r1"}

	t.Run("closed owner: forfeited, then the open succeeds", func(t *testing.T) {
		a := newActs(t)
		leased(t, a, "s", old)
		a.Temporal = &fakeTemporal{execs: []execution{{"session/s", "r1", terminated}, {"session/s", "r9", running}}}
		_, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "s", Access: jsonl.AccessWrite, HandleID: "h-new", Owner: self})
		typ, nonRetryable := appType(t, err)
		require.Equal(t, "SessionAlreadyOwned", typ)
		require.True(t, nonRetryable)
		res, err := a.ForfeitDeadOwner(ctx, activities.ForfeitInput{SessionID: "s", Self: self})
		require.NoError(t, err)
		require.NotNil(t, res.Forfeited)
		require.Equal(t, "h-old", res.Forfeited.HandleID)
		require.Equal(t, old, res.Forfeited.Owner)
		_, err = a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "s", Access: jsonl.AccessWrite, HandleID: "h-new", Owner: self})
		require.NoError(t, err)
		// Nothing left to forfeit: the new lease is the caller's own run.
		_, err = a.ForfeitDeadOwner(ctx, activities.ForfeitInput{SessionID: "s", Self: self})
		typ, nonRetryable = appType(t, err)
		require.Equal(t, "SessionAlreadyOwned", typ)
		require.True(t, nonRetryable)
	})
	t.Run("running owner: refused, naming it", func(t *testing.T) {
		a := newActs(t)
		owner := jsonl.Owner{WorkflowID: "session/other", RunID: "r5"}
		leased(t, a, "s", owner)
		a.Temporal = &fakeTemporal{execs: []execution{{"session/other", "r5", running}}}
		_, err := a.ForfeitDeadOwner(ctx, activities.ForfeitInput{SessionID: "s", Self: self})
		typ, nonRetryable := appType(t, err)
		require.Equal(t, "SessionAlreadyOwned", typ)
		require.True(t, nonRetryable)
		require.ErrorContains(t, err, `session "s" is already owned by an active write handle (handle "h-old" of workflow "session/other" run "r5"`)
		require.ErrorContains(t, err, "that workflow is running (run r5); dispose or cancel it, then resume")
		l, err := a.Runtime.Store.LeaseOf(ctx, "s")
		require.NoError(t, err)
		require.Equal(t, "h-old", l.HandleID, "the lease is kept")
	})
	t.Run("unknown owner: refused with the way out", func(t *testing.T) {
		a := newActs(t)
		leased(t, a, "s", jsonl.Owner{WorkflowID: "cli", RunID: "42-ab"})
		a.Temporal = &fakeTemporal{}
		_, err := a.ForfeitDeadOwner(ctx, activities.ForfeitInput{SessionID: "s", Self: self})
		require.ErrorContains(t, err, "Temporal cannot tell whether that owner is gone")
		require.ErrorContains(t, err, "starter unlock --id \"s\" --force")
	})
	t.Run("no Temporal client: refused", func(t *testing.T) {
		a := newActs(t)
		leased(t, a, "s", old)
		_, err := a.ForfeitDeadOwner(ctx, activities.ForfeitInput{SessionID: "s", Self: self})
		typ, _ := appType(t, err)
		require.Equal(t, "SessionAlreadyOwned", typ)
		require.ErrorContains(t, err, "this worker has no Temporal client to check the owner")
	})
	t.Run("lookup fails: retryable", func(t *testing.T) {
		a := newActs(t)
		leased(t, a, "s", old)
		a.Temporal = &fakeTemporal{err: serviceerror.NewUnavailable("server down")}
		_, err := a.ForfeitDeadOwner(ctx, activities.ForfeitInput{SessionID: "s", Self: self})
		typ, nonRetryable := appType(t, err)
		require.Equal(t, "IOError", typ)
		require.False(t, nonRetryable)
		require.ErrorContains(t, err, `look up the owner "session/s" of session "s": server down`)
	})
	t.Run("unreadable lease: refused with the way out", func(t *testing.T) {
		a := newActs(t)
		leased(t, a, "s", old)
		matches, err := filepath.Glob(filepath.Join(a.Runtime.Store.Root(), "*", "s", "session.lock"))
		require.NoError(t, err)
		require.Len(t, matches, 1)
		require.NoError(t, os.WriteFile(matches[0], nil, 0o600))
		f := &fakeTemporal{}
		a.Temporal = f
		_, err = a.ForfeitDeadOwner(ctx, activities.ForfeitInput{SessionID: "s", Self: self})
		typ, nonRetryable := appType(t, err)
		require.Equal(t, "SessionAlreadyOwned", typ)
		require.True(t, nonRetryable)
		require.ErrorContains(t, err, "its lease cannot be read (corrupt session lease: ")
		require.ErrorContains(t, err, "starter unlock --id \"s\" --force")
		require.Empty(t, f.calls, "nothing to ask Temporal")
		require.FileExists(t, matches[0])
	})
	t.Run("no lease: nothing forfeited", func(t *testing.T) {
		a := newActs(t)
		a.Temporal = &fakeTemporal{}
		res, err := a.ForfeitDeadOwner(ctx, activities.ForfeitInput{SessionID: "s", Self: self})
		require.NoError(t, err)
		require.Nil(t, res.Forfeited)
	})
}

func TestMapErrorNameTooLong(t *testing.T) {
	err := activities.MapError(&fs.PathError{Op: "lstat", Path: "/root/x", Err: syscall.ENAMETOOLONG})
	typ, nonRetryable := appType(t, err)
	require.Equal(t, "InvalidArgument", typ)
	require.True(t, nonRetryable, "a name too long fails the same way on every attempt")
}

func TestIDTooLongRefusedBeforeTheStore(t *testing.T) {
	ctx := context.Background()
	a := newActs(t)
	long := strings.Repeat("x", 256)
	_, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: long, CreatedAt: 1}, HandleID: "h1"})
	typ, nonRetryable := appType(t, err)
	require.Equal(t, "InvalidArgument", typ)
	require.True(t, nonRetryable)
	require.ErrorContains(t, err, "session id is too long: it encodes to a 256-byte directory name and the store's limit is 255 bytes")
	err = a.CloseHandle(ctx, activities.HandleInput{Ref: jsonl.HandleRef{SessionID: long, HandleID: "h1", Access: jsonl.AccessWrite}})
	typ, nonRetryable = appType(t, err)
	require.Equal(t, "InvalidArgument", typ)
	require.True(t, nonRetryable)
	// 255 bytes is the limit itself.
	_, err = a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: strings.Repeat("x", 255), CreatedAt: 1}, HandleID: "h2"})
	require.NoError(t, err)
}
