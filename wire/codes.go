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
