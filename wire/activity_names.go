package wire

// Activity names, as registered by a worker (the method names of
// *Activities).
const (
	CallModelActivity = "CallModel"
	RunToolActivity   = "RunTool"
	EndTurnActivity   = "EndTurn"
	// CloseCallsActivity closes a step's calls without a result (D40).
	CloseCallsActivity = "CloseCalls"
	// CompactActivity compacts a session's conversation (docs/FORMAT.md §9).
	CompactActivity = "Compact"
)

// ModelProgress is the heartbeat detail of a streaming model call: clients
// read it from the workflow's pending activities to show the text as it
// streams. Text is a bounded window that ends at the shown text's end and
// starts at byte TextOffset of it.
type ModelProgress struct {
	Turn       int64  `json:"turn"`
	Step       int64  `json:"step"`
	Chunks     int64  `json:"chunks"`
	TextOffset int64  `json:"textOffset"`
	Text       string `json:"text"`
	// Reasoning reports that the model is still reasoning (no text yet).
	Reasoning bool `json:"reasoning,omitempty"`
	// Attempt is the activity attempt streaming (1 for the first): a
	// retried call streams its text again from offset 0, and the text an
	// earlier attempt showed was discarded.
	Attempt int32 `json:"attempt,omitempty"`
}

// Activity names, as registered by RegisterActivity(&Activities{...}). They
// are part of the public contract (docs/API.md).
const (
	CreateHandleName = "CreateHandle"
	OpenHandleName   = "OpenHandle"
	ScanLogName      = "ScanLog"
	RepairName       = "Repair"
	AppendBatchName  = "AppendBatch"
	StoreSeedName    = "StoreSeed"
	// ResolveForkName resolves a fork's turn to the parent's prefix length.
	ResolveForkName = "ResolveFork"
	FlushName       = "Flush"
	CloseHandleName = "CloseHandle"
	StatName        = "Stat"
)

// Earlier activity names, still registered by RegisterLegacyNames so that
// workflows recorded before the rename (which schedule these types) keep
// running and replaying.
const (
	// LegacyReadSummaryName is the earlier name of ScanLog.
	LegacyReadSummaryName = "ReadSummary"
	// LegacyRepairAndMarkName is the earlier name of Repair.
	LegacyRepairAndMarkName = "RepairAndMark"
)

// ForfeitDeadOwnerName is the activity that forfeits the lease of a session
// whose owning workflow is closed (docs/API.md: Dead-owner recovery).
const ForfeitDeadOwnerName = "ForfeitDeadOwner"
