package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// notReady is the server's refusal of an update while the workflow's task
// is failing, as the history service words it.
func notReady() error {
	return serviceerror.NewWorkflowNotReady("Unable to perform workflow execution update due to Workflow Task in failed state.")
}

func TestAppendSendsTheUpdateAgainWhileTheWorkflowIsNotReady(t *testing.T) {
	refusals := 2
	f := &fakeTemporal{
		update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			if refusals > 0 {
				refusals--
				return nil, notReady()
			}
			return &fakeUpdate{result: AppendResult{NextSeq: 5}}, nil
		},
	}
	c := New(f, Options{TaskQueue: "tq"})
	res, err := c.Append(context.Background(), "s1", session.WireEvents([]session.Event{{Seq: 4, Type: "turn/start"}}))
	require.NoError(t, err)
	require.Equal(t, int64(5), res.NextSeq)
	require.Equal(t, []string{"update session/s1 Append", "update session/s1 Append", "update session/s1 Append"}, f.recorded())
}

func TestAppendStopsAskingWhenTheContextEnds(t *testing.T) {
	f := &fakeTemporal{
		update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			return nil, notReady()
		},
	}
	c := New(f, Options{TaskQueue: "tq"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Append(ctx, "s1", session.WireEvents([]session.Event{{Seq: 4, Type: "turn/start"}}))
	require.Error(t, err)
	var nr *serviceerror.WorkflowNotReady
	require.True(t, errors.As(err, &nr), "the last refusal is returned: %v", err)
	require.Greater(t, len(f.recorded()), 1, "the update was sent again before the context ended")
}

func TestCreateWaitsReadyAgainWhenTheFirstTaskFailed(t *testing.T) {
	info := wire.SessionInfo{SessionID: "s1", WorkflowID: "session/s1", RunID: "run-1", NextSeq: 1}
	calls := 0
	f := &fakeTemporal{
		execute: func(opts temporalclient.StartWorkflowOptions, wf any, args []any) (temporalclient.WorkflowRun, error) {
			return &fakeRun{id: opts.ID, runID: "run-1"}, nil
		},
		update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			calls++
			if calls == 1 {
				return nil, notReady()
			}
			return &fakeUpdate{result: info}, nil
		},
	}
	c := New(f, Options{TaskQueue: "tq"})
	s, err := c.Create(context.Background(), wire.CreateSessionRequest{SessionID: "s1", Meta: &wire.SessionMeta{Cwd: "/w"}})
	require.NoError(t, err)
	require.Equal(t, info, s.SessionInfo)
	require.Equal(t, []string{"update-with-start session/s1 WaitReady", "update session/s1 WaitReady"}, f.recorded(), "one start, then WaitReady alone")
}
