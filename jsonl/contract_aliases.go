package jsonl

import (
	"github.com/sessionflow/sessionflow/wire"
)

// The declarations below moved to package wire, the contract between the
// workflows and their clients (docs/DECISIONS.md D83). These aliases keep
// this package's code and its callers compiling unchanged; unalias.sh
// rewrites their uses to wire's names and deletes this file.

// Error is wire.StoreError.
type Error = wire.StoreError

// ErrNotFound is wire.ErrNotFound.
var ErrNotFound = wire.ErrNotFound

// ErrAlreadyExists is wire.ErrAlreadyExists.
var ErrAlreadyExists = wire.ErrAlreadyExists

// ErrAlreadyOwned is wire.ErrAlreadyOwned.
var ErrAlreadyOwned = wire.ErrAlreadyOwned

// ErrReadOnly is wire.ErrReadOnly.
var ErrReadOnly = wire.ErrReadOnly

// ErrHandleClosed is wire.ErrHandleClosed.
var ErrHandleClosed = wire.ErrHandleClosed

// ErrOwnershipLost is wire.ErrOwnershipLost.
var ErrOwnershipLost = wire.ErrOwnershipLost

// ErrHandleRevoked is wire.ErrHandleRevoked.
var ErrHandleRevoked = wire.ErrHandleRevoked

// ErrCorrupt is wire.ErrCorrupt.
var ErrCorrupt = wire.ErrCorrupt

// ErrFormatUnsupported is wire.ErrFormatUnsupported.
var ErrFormatUnsupported = wire.ErrFormatUnsupported

// ErrSeqMismatch is wire.ErrSeqMismatch.
var ErrSeqMismatch = wire.ErrSeqMismatch

// ErrInvalidArgument is wire.ErrInvalidArgument.
var ErrInvalidArgument = wire.ErrInvalidArgument

// ErrLayout is wire.ErrLayout.
var ErrLayout = wire.ErrLayout

// Lease is wire.Lease.
type Lease = wire.Lease

// PendingSession is wire.PendingSession.
type PendingSession = wire.PendingSession
