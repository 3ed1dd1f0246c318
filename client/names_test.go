package client

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// An input the client refuses before any call is of type InvalidArgument,
// the type of the requests a workflow refuses; the earlier sentinel and type
// InvalidInput still match it.
func TestRefusedInputIsInvalidArgumentAndTheOldNameStillMatches(t *testing.T) {
	_, err := New(nil, Options{}).WaitReady(context.Background(), "")
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, "InvalidArgument", e.Type)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, ErrInvalidInput)

	old := &Error{Type: "InvalidInput", Message: "from an earlier client"}
	require.ErrorIs(t, old, ErrInvalidArgument)
	require.NotErrorIs(t, &Error{Type: wire.ErrTypeNotLive}, ErrInvalidInput)
}
