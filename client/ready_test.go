package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/wire"
)

func TestEmptySessionIDSaysWhatIsMissing(t *testing.T) {
	c := New(nil, Options{})
	ctx := context.Background()
	_, err := c.Resume(ctx, "", wire.ResumeSessionRequest{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.EqualError(t, err, "resume: the session id is required")
	_, err = c.Create(ctx, wire.CreateSessionRequest{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.EqualError(t, err, "create: the session id is required")
	_, err = c.WaitReady(ctx, "")
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.EqualError(t, err, "wait for session: the session id is required")
}

func TestResumeOfARunningSessionSaysItIsResumedOrLive(t *testing.T) {
	f := &fakeTemporal{execute: func(temporalclient.StartWorkflowOptions, any, []any) (temporalclient.WorkflowRun, error) {
		return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "", "run-0")
	}}
	_, err := New(f, Options{}).Resume(context.Background(), "K2", wire.ResumeSessionRequest{})
	require.EqualError(t, err, `session "K2" is already being resumed or is live: its workflow session/K2 is running (dispose it, or wait for its resume to finish)`)
	require.ErrorIs(t, err, ErrAlreadyExists)
}
