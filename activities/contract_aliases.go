package activities

import (
	"github.com/sessionflow/sessionflow/wire"
)

// The declarations below moved to package wire, the contract between the
// workflows and their clients (docs/DECISIONS.md D83). These aliases keep
// this package's code and its callers compiling unchanged; unalias.sh
// rewrites their uses to wire's names and deletes this file.

// CreateHandleName is wire.CreateHandleName.
const CreateHandleName = wire.CreateHandleName

// OpenHandleName is wire.OpenHandleName.
const OpenHandleName = wire.OpenHandleName

// ScanLogName is wire.ScanLogName.
const ScanLogName = wire.ScanLogName

// RepairName is wire.RepairName.
const RepairName = wire.RepairName

// AppendBatchName is wire.AppendBatchName.
const AppendBatchName = wire.AppendBatchName

// StoreSeedName is wire.StoreSeedName.
const StoreSeedName = wire.StoreSeedName

// FlushName is wire.FlushName.
const FlushName = wire.FlushName

// CloseHandleName is wire.CloseHandleName.
const CloseHandleName = wire.CloseHandleName

// StatName is wire.StatName.
const StatName = wire.StatName

// LegacyReadSummaryName is wire.LegacyReadSummaryName.
const LegacyReadSummaryName = wire.LegacyReadSummaryName

// LegacyRepairAndMarkName is wire.LegacyRepairAndMarkName.
const LegacyRepairAndMarkName = wire.LegacyRepairAndMarkName

// ForfeitDeadOwnerName is wire.ForfeitDeadOwnerName.
const ForfeitDeadOwnerName = wire.ForfeitDeadOwnerName

// ErrTypeInvalidArgument is wire.ErrTypeInvalidArgument.
const ErrTypeInvalidArgument = wire.ErrTypeInvalidArgument

// ErrTypeIO is wire.ErrTypeIO.
const ErrTypeIO = wire.ErrTypeIO

// ErrTypePersistenceNotConfigured is wire.ErrTypePersistenceNotConfigured.
const ErrTypePersistenceNotConfigured = wire.ErrTypePersistenceNotConfigured

// LeaseStore is wire.LeaseStore.
type LeaseStore = wire.LeaseStore

// LeaseChangedError is wire.LeaseChangedError.
type LeaseChangedError = wire.LeaseChangedError

// ErrLeaseChanged is wire.ErrLeaseChanged.
var ErrLeaseChanged = wire.ErrLeaseChanged

// ForfeitLease is wire.ForfeitLease.
var ForfeitLease = wire.ForfeitLease
