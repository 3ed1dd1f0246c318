package jsonl

import "github.com/sessionflow/sessionflow/wire"

// The handle references, lease owners and error codes are declared in
// package wire, which the workflows share without importing the store; the
// names below keep the store's API unchanged.

// Access is the access mode of a handle (wire.Access).
type Access = wire.Access

// Access modes.
const (
	AccessRead  = wire.AccessRead
	AccessWrite = wire.AccessWrite
)

// HandleRef identifies a handle independently of any process
// (wire.HandleRef).
type HandleRef = wire.HandleRef

// Owner names the durable owner of a write lease (wire.Owner).
type Owner = wire.Owner

// Code names a class of store error (wire.Code). Match a class with
// errors.Is against the sentinels ErrNotFound and friends.
type Code = wire.Code

// Error codes.
const (
	CodeNotFound          = wire.CodeNotFound
	CodeAlreadyExists     = wire.CodeAlreadyExists
	CodeAlreadyOwned      = wire.CodeAlreadyOwned
	CodeReadOnly          = wire.CodeReadOnly
	CodeHandleClosed      = wire.CodeHandleClosed
	CodeOwnershipLost     = wire.CodeOwnershipLost
	CodeHandleRevoked     = wire.CodeHandleRevoked
	CodeCorrupt           = wire.CodeCorrupt
	CodeFormatUnsupported = wire.CodeFormatUnsupported
	CodeSeqMismatch       = wire.CodeSeqMismatch
	CodeInvalidArgument   = wire.CodeInvalidArgument
	CodeLayout            = wire.CodeLayout
)
