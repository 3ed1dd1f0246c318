package sessiontest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
)

// AppErr extracts the application error of a workflow or update failure.
func AppErr(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	return app
}

// RequireMessage asserts the exact application error message.
func RequireMessage(t *testing.T, err error, msg string) *temporal.ApplicationError {
	t.Helper()
	app := AppErr(t, err)
	require.Equal(t, msg, app.Message())
	return app
}

// CloseErr wraps the real CloseHandle so that it really closes and then
// rejects, as the seed's rejecting close does.
func CloseErr(a *activities.Activities, msg string) func(context.Context, activities.HandleInput) error {
	return func(ctx context.Context, in activities.HandleInput) error {
		if err := a.CloseHandle(ctx, in); err != nil {
			return err
		}
		return temporal.NewNonRetryableApplicationError(msg, "Error", nil)
	}
}

// PlainErr is a non-retryable application error of type Error.
func PlainErr(msg string) error { return temporal.NewNonRetryableApplicationError(msg, "Error", nil) }

// F64 returns a pointer to v.
func F64(v float64) *float64 { return &v }
