package jsonl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sessionflow/sessionflow/wire"
)

func newError(code Code, id, format string, args ...any) *wire.StoreError {
	return &wire.StoreError{Code: code, SessionID: id, Message: fmt.Sprintf(format, args...)}
}

func notFound(id string) *wire.StoreError {
	return newError(CodeNotFound, id, "session %q not found", id)
}

func alreadyExists(id string) *wire.StoreError {
	return newError(CodeAlreadyExists, id, "session %q already exists", id)
}

func alreadyOwned(id string) *wire.StoreError {
	return newError(CodeAlreadyOwned, id, "session %q is already owned by an active write handle", id)
}

func readOnly(id, op string) *wire.StoreError {
	return newError(CodeReadOnly, id, "session %q: %s is not available on a read handle", id, op)
}

func handleClosed(id, op string) *wire.StoreError {
	return newError(CodeHandleClosed, id, "session %q: %s on a closed handle", id, op)
}

func ownershipLost(id string) *wire.StoreError {
	return newError(CodeOwnershipLost, id, "session %q: write ownership was lost; close this handle and reopen", id)
}

func revoked(id, handle string) *wire.StoreError {
	return newError(CodeHandleRevoked, id, "session %q: handle %q was closed before its open completed", id, handle)
}

func invalidArgument(id string, err error) *wire.StoreError {
	return &wire.StoreError{Code: CodeInvalidArgument, SessionID: id, Message: err.Error(), Err: err}
}

// AggregateError carries a message of its own and ordered member errors, as
// in `failed to roll back append to "<path>"` (errors.Join would lose the
// message). errors.Is and errors.As see every member.
type AggregateError struct {
	// Message is the aggregate's own text.
	Message string
	// Errors are the members, in order.
	Errors []error
}

// Error returns the message followed by the members.
func (e *AggregateError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, err := range e.Errors {
		parts[i] = err.Error()
	}
	return e.Message + ": " + strings.Join(parts, "; ")
}

// Unwrap exposes the members to errors.Is and errors.As.
func (e *AggregateError) Unwrap() []error { return e.Errors }

// ErrorCode returns the Code of the first *Error in err's tree, or "".
func ErrorCode(err error) Code {
	var e *wire.StoreError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
