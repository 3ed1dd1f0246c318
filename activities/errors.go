package activities

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// MapError converts an error of the store or of the session model into the
// error an activity returns: a *jsonl.Error becomes a non-retryable
// application error typed by its code; a session validation error becomes a
// non-retryable InvalidArgument, and so does a file name the file system
// refuses as too long (ENAMETOOLONG); context errors and application errors
// pass through; anything else is a retryable IOError.
//
// A non-retryable error carries no cause: the Go error it was made from
// would travel as a nested failure that every SDK decodes as a retryable
// ApplicationFailure typed after the Go type ("*wire.StoreError"), inside
// an outer failure that is not retryable. The outer failure is the whole
// answer (docs/API.md, Errors); its message is the Go error's text.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	if code := jsonl.ErrorCode(err); code != "" {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(code), nil)
	}
	var seq *session.SeqMismatchError
	if errors.As(err, &seq) {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(jsonl.CodeSeqMismatch), nil)
	}
	if isValidation(err) || errors.Is(err, syscall.ENAMETOOLONG) {
		// A name the file system cannot hold fails the same way on every
		// attempt: the request is at fault, not the disk.
		return temporal.NewNonRetryableApplicationError(err.Error(), wire.ErrTypeInvalidArgument, nil)
	}
	return temporal.NewApplicationErrorWithCause(err.Error(), wire.ErrTypeIO, err)
}

// validationError marks an error of the session model or of a request.
type validationError struct{ err error }

func (e *validationError) Error() string { return e.err.Error() }

func (e *validationError) Unwrap() error { return e.err }

func invalid(format string, args ...any) error {
	return &validationError{err: fmt.Errorf(format, args...)}
}

func asInvalid(err error) error {
	if err == nil {
		return nil
	}
	return &validationError{err: err}
}

func isValidation(err error) bool {
	var v *validationError
	return errors.As(err, &v) ||
		errors.Is(err, session.ErrNotLossless) ||
		errors.Is(err, session.ErrInvalidEvent) ||
		errors.Is(err, wire.ErrEmptyID) ||
		errors.Is(err, wire.ErrInvalidUTF8ID)
}
