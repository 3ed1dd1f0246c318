package client

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	temporalclient "go.temporal.io/sdk/client"
)

// TypeOutcomeUnknown: an Append call ended (its deadline passed, or it was
// cancelled) before the session answered. The batch may still be stored,
// once a worker runs the session; retrying the same batch is safe.
const TypeOutcomeUnknown = "OutcomeUnknown"

// ErrOutcomeUnknown: an Append whose outcome is unknown; retry the same
// batch.
var ErrOutcomeUnknown = &Error{Type: TypeOutcomeUnknown}

// unanswered reports whether err is a call that ended without the
// session's answer: the server or the call's own deadline gave up waiting
// (no worker answered in time, as while a worker restarts), or the call
// was cancelled.
func unanswered(err error) bool {
	var waiting *temporalclient.WorkflowUpdateServiceTimeoutOrCanceledError
	var deadline *serviceerror.DeadlineExceeded
	var canceled *serviceerror.Canceled
	return errors.As(err, &waiting) || errors.As(err, &deadline) || errors.As(err, &canceled) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// appendError maps the error of an Append call: a call that ended without
// the session's answer is ErrOutcomeUnknown, anything else callError's.
func appendError(id string, err error) error {
	if err == nil {
		return nil
	}
	if unanswered(err) {
		return &Error{Type: TypeOutcomeUnknown, SessionID: id, Err: err, Message: fmt.Sprintf(
			"append to session %q: outcome unknown: no answer before the call ended (is a worker running?); "+
				"the batch may still be stored once a worker runs the session. Retrying the same batch is safe: "+
				"a batch already stored or already accepted is not stored twice", id)}
	}
	return callError("append to session", id, err)
}
