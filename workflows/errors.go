package workflows

import (
	"errors"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// invalidArgument is a non-retryable InvalidArgument application error.
func invalidArgument(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, wire.ErrTypeInvalidArgument, nil)
}

// quoteID writes an id between double quotes verbatim, as the reference
// texts do.
func quoteID(id string) string { return `"` + id + `"` }

// CreationAbortedError is the normalized error of an abort whose reason is
// not an error (LIFECYCLE.md §3); the raw reason is its detail.
func CreationAbortedError(id, reason string) error {
	return temporal.NewNonRetryableApplicationError("agent "+quoteID(id)+" creation aborted", wire.ErrTypeAbort, nil, reason)
}

// OwnerDisposedError is the error of an owner that went away during setup.
func OwnerDisposedError(id string) error {
	return temporal.NewNonRetryableApplicationError("agent "+quoteID(id)+" setup aborted: owner disposed during setup", wire.ErrTypeOwnerDisposed, nil)
}

// LoopInactiveText is the error text of work refused by an inactive loop.
const LoopInactiveText = "agent loop is not active"

// LoopInactiveError is the error of a session aborted by loop deactivation.
func LoopInactiveError() error {
	return temporal.NewNonRetryableApplicationError(LoopInactiveText, wire.ErrTypeLoopInactive, nil)
}

// AlreadyExistsError is the error of a duplicate live session id.
func AlreadyExistsError(id string) error {
	return temporal.NewNonRetryableApplicationError(wire.AlreadyExistsMessage(id), wire.ErrTypeAlreadyExists, nil)
}

// MaxTokensText is the error text of an invalid maxTokens (LIFECYCLE.md §4 step 4).
const MaxTokensText = "agent maxTokens must be a positive safe integer"

// unwrapActivity returns the error an activity or child workflow failed
// with, without Temporal's wrapper, so the original error is what the
// workflow returns.
func unwrapActivity(err error) error {
	if err == nil {
		return nil
	}
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		if cause := errors.Unwrap(actErr); cause != nil {
			return cause
		}
	}
	var childErr *temporal.ChildWorkflowExecutionError
	if errors.As(err, &childErr) {
		if cause := errors.Unwrap(childErr); cause != nil {
			return cause
		}
	}
	return err
}

// errorMessage is an error's message without Temporal's decorations.
func errorMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return "canceled"
	}
	return err.Error()
}

// errorType is an application error's type, or "".
func errorType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

func errorInfo(err error) wire.ErrorInfo {
	return wire.ErrorInfo{Message: errorMessage(err), Type: errorType(err)}
}

// aggregate settles a disposal: no failure, one as-is, or several as
// `agent "<id>" disposal failed` with the members in order.
func aggregate(id string, errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	infos := make([]wire.ErrorInfo, len(errs))
	msgs := make([]string, len(errs))
	for i, err := range errs {
		infos[i] = errorInfo(err)
		msgs[i] = infos[i].Message
	}
	return temporal.NewNonRetryableApplicationError(
		"agent "+quoteID(id)+" disposal failed: "+strings.Join(msgs, "; "), wire.ErrTypeAggregate, nil, infos)
}

// notLiveError is the error of work refused by a session that is not live,
// naming its phase.
func notLiveError(id string, phase wire.Phase) error {
	return temporal.NewNonRetryableApplicationError("session "+quoteID(id)+" is not live (phase "+string(phase)+")", wire.ErrTypeNotLive, nil)
}
