package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/workflows"
)

func TestEmptySessionIDSaysWhatIsMissing(t *testing.T) {
	c := New(nil, Options{})
	ctx := context.Background()
	_, err := c.Resume(ctx, "", workflows.ResumeSessionRequest{})
	require.ErrorIs(t, err, ErrInvalidInput)
	require.EqualError(t, err, "resume: the session id is required")
	_, err = c.Create(ctx, workflows.CreateSessionRequest{})
	require.ErrorIs(t, err, ErrInvalidInput)
	require.EqualError(t, err, "create: the session id is required")
	_, err = c.WaitReady(ctx, "")
	require.ErrorIs(t, err, ErrInvalidInput)
	require.EqualError(t, err, "wait for session: the session id is required")
}
