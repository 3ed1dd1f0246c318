package client

import (
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// Error types the client raises itself, beside the workflows' application
// error types (wire.ErrType*) and the store's codes (jsonl.Code*).
const (
	// TypeNotRunning: no execution of the session's (or loop's) workflow
	// id is running, or none exists.
	TypeNotRunning = "WorkflowNotRunning"
	// TypeLoopAlreadyRunning: LoopStart of a loop id whose workflow runs.
	TypeLoopAlreadyRunning = "LoopAlreadyRunning"
	// TypeOwnerRunning: Unlock refused because the lease's owning workflow
	// is running.
	TypeOwnerRunning = "OwnerRunning"
	// TypeOwnerUnknown: Unlock refused because the lease names no owning
	// workflow that Temporal could check.
	TypeOwnerUnknown = "OwnerUnknown"
	// TypeLeaseChanged: Unlock found another lease than the one it checked.
	TypeLeaseChanged = "LeaseChanged"
	// TypeInputTooLarge: an update input larger than
	// wire.MaxUpdateInputBytes, refused before it is sent
	// (docs/API.md: Update input limit).
	TypeInputTooLarge = "InputTooLarge"
	// TypeInvalidInput is the earlier type of an input the client refuses
	// before calling Temporal; such inputs are now of type
	// wire.ErrTypeInvalidArgument ("InvalidArgument"), like the
	// requests a workflow refuses. An *Error of this type still matches
	// ErrInvalidArgument.
	//
	// Deprecated: match ErrInvalidArgument.
	TypeInvalidInput = "InvalidInput"
)

// Error is a sessionflow failure seen by the client: an application error
// returned by a workflow (its message is the text LIFECYCLE.md §12 gives,
// its type the class, see docs/API.md), or a failure the client detects
// itself. Error() is the message alone. Match a class with errors.Is against
// the sentinels below, against the store's sentinels (jsonl.ErrNotFound,
// jsonl.ErrAlreadyOwned, ...) for store errors reported by activities, or
// read Type through errors.As. The original error stays reachable through
// Unwrap (a *temporal.ApplicationError, a serviceerror, ...).
type Error struct {
	// Type is the class: an application error type (e.g. "SessionNotLive",
	// "SeqMismatch", "SessionNotFound") or one of the client's Type*
	// constants.
	Type string
	// Message is the reference text.
	Message string
	// SessionID is the session (or loop) concerned, when known.
	SessionID string
	// Errors lists the parts of an AggregateError (a disposal with several
	// failures), in order.
	Errors []wire.ErrorInfo
	// Outcome is, for an ApprovalSettled failure (ErrApprovalSettled), the
	// outcome that stands (wire.OutcomeAllowedOnce, ...).
	Outcome string
	// Err is the underlying error, if any.
	Err error
}

// Error returns the message (the type when there is no message).
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Type
	}
	return e.Message
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target names e's class: a sentinel *Error of the same
// Type, or a store error (*jsonl.Error) whose Code is e's Type. The earlier
// type TypeInvalidInput is the class InvalidArgument; TypeSessionDisposed
// also matches ErrNotRunning.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *Error:
		if t.Message != "" {
			return false
		}
		// A disposed session is a session that is not running.
		return currentType(t.Type) == currentType(e.Type) || (t.Type == TypeNotRunning && e.Type == TypeSessionDisposed)
	case *wire.StoreError:
		return t.Code != "" && string(t.Code) == e.Type
	}
	return false
}

// currentType maps an earlier error type to the one that replaced it.
func currentType(typ string) string {
	if typ == TypeInvalidInput {
		return wire.ErrTypeInvalidArgument
	}
	return typ
}

// Sentinels matched with errors.Is. Store classes reported by activities
// (SessionNotFound, SessionAlreadyOwned, SessionCorrupt, ...) match the
// jsonl sentinels instead.
var (
	// ErrAlreadyExists: `session "<id>" already exists`: Create of an id
	// whose workflow runs, or of an id already stored.
	ErrAlreadyExists = &Error{Type: wire.ErrTypeAlreadyExists}
	// ErrNotLive: `session "<id>" is not live (phase <p>)`.
	ErrNotLive = &Error{Type: wire.ErrTypeNotLive}
	// ErrLifecycleDisposed: `agent "<id>" lifecycle disposed`.
	ErrLifecycleDisposed = &Error{Type: wire.ErrTypeLifecycleDisposed}
	// ErrBatchTooLarge: `append batch of N bytes exceeds the batch limit of
	// M bytes`.
	ErrBatchTooLarge = &Error{Type: wire.ErrTypeBatchTooLarge}
	// ErrSeqMismatch: `append seq mismatch for "<id>": ...`.
	ErrSeqMismatch = &Error{Type: string(wire.CodeSeqMismatch)}
	// ErrInvalidArgument: a request the workflow refused, or an input the
	// client refuses before calling Temporal (a malformed JSONL line, an
	// event larger than the batch limit, an inconsistent request).
	ErrInvalidArgument = &Error{Type: wire.ErrTypeInvalidArgument}
	// ErrAborted: `agent "<id>" creation aborted`.
	ErrAborted = &Error{Type: wire.ErrTypeAbort}
	// ErrOwnerDisposed: `agent "<id>" setup aborted: owner disposed during
	// setup`.
	ErrOwnerDisposed = &Error{Type: wire.ErrTypeOwnerDisposed}
	// ErrLoopInactive: `agent loop is not active`.
	ErrLoopInactive = &Error{Type: wire.ErrTypeLoopInactive}
	// ErrAggregate: `agent "<id>" disposal failed: <m1>; <m2>`; the parts
	// are in Error.Errors.
	ErrAggregate = &Error{Type: wire.ErrTypeAggregate}
	// ErrNotRunning: the session's workflow is not running.
	ErrNotRunning = &Error{Type: TypeNotRunning}
	// ErrLoopAlreadyRunning: LoopStart of a running loop id.
	ErrLoopAlreadyRunning = &Error{Type: TypeLoopAlreadyRunning}
	// ErrOwnerRunning: Unlock refused, the owning workflow runs.
	ErrOwnerRunning = &Error{Type: TypeOwnerRunning}
	// ErrOwnerUnknown: Unlock refused, the lease names no workflow.
	ErrOwnerUnknown = &Error{Type: TypeOwnerUnknown}
	// ErrLeaseChanged: Unlock found another lease than the one it checked.
	ErrLeaseChanged = &Error{Type: TypeLeaseChanged}
	// ErrInputTooLarge: `<Update> input of N bytes exceeds the update input
	// limit of 1310720 bytes (...); nothing was sent`.
	ErrInputTooLarge = &Error{Type: TypeInputTooLarge}
	// ErrInvalidInput is the earlier sentinel of an input the client
	// refuses; it matches the same errors as ErrInvalidArgument.
	//
	// Deprecated: use ErrInvalidArgument.
	ErrInvalidInput = &Error{Type: TypeInvalidInput}
)

// alreadyExistsError is the reference error of a duplicate session id.
func alreadyExistsError(id string, cause error) *Error {
	return &Error{Type: wire.ErrTypeAlreadyExists, Message: wire.AlreadyExistsMessage(id), SessionID: id, Err: cause}
}

// startError maps the error of starting a session workflow: an execution of
// the id already running is `session "<id>" already exists`.
func startError(id string, err error) error {
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return alreadyExistsError(id, err)
	}
	return callError("start the workflow of session", id, err)
}

// callError maps the error of a call about session (or loop) id: an
// application error becomes an *Error carrying its message and type, a
// missing or closed execution an *Error of TypeNotRunning; anything else is
// wrapped with what was attempted.
func callError(what, id string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		// Raised by the client itself (checkUpdateInput).
		return e
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		e := &Error{Type: ae.Type(), Message: ae.Message(), SessionID: id, Err: err}
		if ae.Type() == wire.ErrTypeAggregate && ae.HasDetails() {
			var parts []wire.ErrorInfo
			if ae.Details(&parts) == nil {
				e.Errors = parts
			}
		}
		return e
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return &Error{Type: TypeNotRunning, Message: fmt.Sprintf("%s %q: not running: %s", what, id, nf.Message), SessionID: id, Err: err}
	}
	return fmt.Errorf("%s %q: %w", what, id, err)
}

// invalidArgument is an *Error of type InvalidArgument raised by the client
// before any call.
func invalidArgument(id, format string, args ...any) *Error {
	return &Error{Type: wire.ErrTypeInvalidArgument, Message: fmt.Sprintf(format, args...), SessionID: id}
}
