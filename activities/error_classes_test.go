package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// Both context errors pass through MapError unchanged, so the workflow
// sees a cancellation or a timeout rather than an IOError to retry.
func TestMapErrorPassesBothContextErrors(t *testing.T) {
	for _, cause := range []error{context.Canceled, context.DeadlineExceeded, fmt.Errorf("read: %w", context.DeadlineExceeded)} {
		err := MapError(cause)
		assert.True(t, err == cause, "%v was replaced by %v", cause, err)
		var app *temporal.ApplicationError
		assert.False(t, errors.As(err, &app), "%v became an application error", cause)
	}
}

// A request refused by the activity itself is a non-retryable
// InvalidArgument, and the refusal keeps its cause for errors.Is.
func TestMapErrorRequestRefusalIsInvalidArgument(t *testing.T) {
	err := MapError(invalid("batch of %d events is empty", 0))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	assert.Equal(t, "InvalidArgument", app.Type())
	assert.True(t, app.NonRetryable())
	assert.Equal(t, "batch of 0 events is empty", app.Message())

	wrapped := asInvalid(fs.ErrInvalid)
	assert.ErrorIs(t, wrapped, fs.ErrInvalid)
	assert.ErrorIs(t, MapError(wrapped), fs.ErrInvalid)
}
