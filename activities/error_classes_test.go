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

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
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
// InvalidArgument.
func TestMapErrorRequestRefusalIsInvalidArgument(t *testing.T) {
	err := MapError(invalid("batch of %d events is empty", 0))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	assert.Equal(t, "InvalidArgument", app.Type())
	assert.True(t, app.NonRetryable())
	assert.Equal(t, "batch of 0 events is empty", app.Message())

	wrapped := asInvalid(fs.ErrInvalid)
	assert.ErrorIs(t, wrapped, fs.ErrInvalid)
	// The refusal carries no cause: a foreign SDK would decode the Go
	// error as a retryable inner failure (docs/API.md, Errors).
	require.True(t, errors.As(MapError(wrapped), &app))
	assert.Equal(t, "InvalidArgument", app.Type())
	assert.Nil(t, errors.Unwrap(app))
}

// A store refusal (SessionNotFound, ...) is one non-retryable failure of
// the store's type: no cause travels with it, so a client in any SDK reads
// one failure, not a non-retryable one wrapping a retryable one.
func TestMapErrorStoreRefusalHasNoCause(t *testing.T) {
	for _, err := range []error{
		&wire.StoreError{Code: wire.CodeNotFound, Message: `session "x" not found`},
		&session.SeqMismatchError{},
	} {
		var app *temporal.ApplicationError
		require.True(t, errors.As(MapError(err), &app))
		assert.True(t, app.NonRetryable(), app.Type())
		assert.Nil(t, errors.Unwrap(app), app.Type())
	}
}
