package wire

// Code names a class of store error. Codes are stable: the Temporal
// activities use them as application error types, and callers branch on them
// with errors.Is against the store's sentinels.
type Code string

// Error codes.
const (
	CodeNotFound          Code = "SessionNotFound"
	CodeAlreadyExists     Code = "SessionAlreadyExists"
	CodeAlreadyOwned      Code = "SessionAlreadyOwned"
	CodeReadOnly          Code = "ReadOnlyHandle"
	CodeHandleClosed      Code = "HandleClosed"
	CodeOwnershipLost     Code = "SessionOwnershipLost"
	CodeHandleRevoked     Code = "HandleRevoked"
	CodeCorrupt           Code = "SessionCorrupt"
	CodeFormatUnsupported Code = "SessionFormatUnsupported"
	CodeSeqMismatch       Code = "SeqMismatch"
	CodeInvalidArgument   Code = "InvalidArgument"
	CodeLayout            Code = "SessionLayoutConflict"
)

// StoreError is a named store error (jsonl.Error). Its Error() text is the
// text FORMAT.md states (the codes are in FORMAT.md §7.1). Match a class
// with errors.Is(err, ErrNotFound) and friends, or read Code through
// errors.As.
type StoreError struct {
	// Code is the error class.
	Code Code
	// SessionID is the session concerned, when there is one.
	SessionID string
	// Path is the raw log or artifact the error is about, when known.
	Path string
	// Message is the full error text.
	Message string
	// Err is the underlying cause, if any.
	Err error
}

// Sentinels of the store errors for errors.Is. They match any *StoreError
// with the same Code.
var (
	ErrNotFound          = &StoreError{Code: CodeNotFound}
	ErrAlreadyExists     = &StoreError{Code: CodeAlreadyExists}
	ErrAlreadyOwned      = &StoreError{Code: CodeAlreadyOwned}
	ErrReadOnly          = &StoreError{Code: CodeReadOnly}
	ErrHandleClosed      = &StoreError{Code: CodeHandleClosed}
	ErrOwnershipLost     = &StoreError{Code: CodeOwnershipLost}
	ErrHandleRevoked     = &StoreError{Code: CodeHandleRevoked}
	ErrCorrupt           = &StoreError{Code: CodeCorrupt}
	ErrFormatUnsupported = &StoreError{Code: CodeFormatUnsupported}
	ErrSeqMismatch       = &StoreError{Code: CodeSeqMismatch}
	ErrInvalidArgument   = &StoreError{Code: CodeInvalidArgument}
	ErrLayout            = &StoreError{Code: CodeLayout}
)

// Error returns the reference text.
func (e *StoreError) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *StoreError) Unwrap() error { return e.Err }

// Is matches a sentinel of the same Code.
func (e *StoreError) Is(target error) bool {
	t, ok := target.(*StoreError)
	return ok && t.Message == "" && t.Code == e.Code
}
