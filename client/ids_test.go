package client

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/wire"
)

func TestStartRefusesAnIDTheStoreCannotHold(t *testing.T) {
	f := &fakeTemporal{}
	c := New(f, Options{})
	ctx := context.Background()
	long := strings.Repeat("x", 300)
	_, err := c.Create(ctx, wire.CreateSessionRequest{SessionID: long})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "session id is too long: it encodes to a 300-byte directory name and the store's limit is 255 bytes")
	_, err = c.Resume(ctx, long, wire.ResumeSessionRequest{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Empty(t, f.recorded(), "nothing reaches Temporal")
}

func TestStartEncodesNonASCIIIDs(t *testing.T) {
	var started []string
	f := &fakeTemporal{
		execute: func(opts temporalclient.StartWorkflowOptions, _ any, _ []any) (temporalclient.WorkflowRun, error) {
			started = append(started, opts.ID)
			return &fakeRun{id: opts.ID, runID: "r"}, nil
		},
		update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			return &fakeUpdate{result: wire.SessionInfo{SessionID: "é"}}, nil
		},
	}
	c := New(f, Options{})
	_, err := c.Create(context.Background(), wire.CreateSessionRequest{SessionID: "é"})
	require.NoError(t, err)
	_, err = c.Resume(context.Background(), "日本", wire.ResumeSessionRequest{})
	require.NoError(t, err)
	require.Equal(t, []string{"session/%C3%A9", "session/%E6%97%A5%E6%9C%AC"}, started)
	require.Equal(t, "loop/%C3%A9", LoopWorkflowID("é"))
}

func TestListDecodesTheWorkflowID(t *testing.T) {
	info := func(wid string) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: "r"}}
	}
	s := listedFromInfo(info("session/%E6%97%A5%E6%9C%AC"))
	require.Equal(t, "日本", s.SessionID)
	require.Empty(t, s.Error)
	s = listedFromInfo(info("session/50%"))
	require.Equal(t, "50%", s.SessionID, "shown as it stands")
	require.Equal(t, `not a session workflow id: "session/50%": truncated escape at offset 2`, s.Error)
}
