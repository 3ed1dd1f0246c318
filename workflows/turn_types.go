package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// recentTurns is the number of ended turns LoopState lists.
const recentTurns = 16

// PendingInput is one queued input, as carried across continue-as-new.
type PendingInput struct {
	// Message is the user message (the data of its user/message event).
	Message json.RawMessage `json:"message"`
	// ID is the message's id.
	ID string `json:"id"`
	// Stored reports that an agent/inbox/spliced event holds it (an idle
	// Inject), so its claim is stored as a deletion splice.
	Stored bool `json:"stored,omitempty"`
	// Trace is the trace context of the update that queued it (empty when
	// the caller was not traced): the parent of the span of the turn it
	// starts.
	Trace map[string]string `json:"trace,omitempty"`
}

// InboxState is the loop's pending inputs, carried across
// continue-as-new.
type InboxState struct {
	NextTurn []PendingInput `json:"nextTurn,omitempty"`
	NextStep []PendingInput `json:"nextStep,omitempty"`
	// Wake reports that a waking input is pending.
	Wake bool `json:"wake,omitempty"`
	// StoredAhead are inputs a turn stored before their updates were
	// admitted (docs/DECISIONS.md D77): their updates are answered without
	// queuing them again.
	StoredAhead []AheadInput `json:"storedAhead,omitempty"`
	// Claimed are the latest inputs turns stored, whose updates delivered
	// again are answered without storing them twice (D77).
	Claimed []ClaimedInput `json:"claimed,omitempty"`
}

// TurnRunningError is the refusal of an Append while turn runs.
func TurnRunningError(id string, turn int64) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("agent %s is running turn %d; append between turns", quoteID(id), turn), wire.ErrTypeTurnRunning, nil)
}

// CompactingError is the refusal of an Append while a manual compaction of
// session id runs: its events take the log's next seqs.
func CompactingError(id string) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("agent %s is compacting its conversation; append between turns and compactions", quoteID(id)), wire.ErrTypeTurnRunning, nil)
}

// CompactionLeftOpenError is the refusal of an Append batch whose event at
// index k (seq seq) opens a compaction the batch does not end, while the
// agent of session id runs its own turns.
func CompactionLeftOpenError(id string, k int, seq int64) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"agent %s runs its own turns: the append batch leaves a compaction open (its compaction/start at index %d, seq %d, has no compaction/end); append whole compactions",
		quoteID(id), k, seq), wire.ErrTypeTurnLeftOpen, nil)
}

// TurnLeftOpenError is the refusal of an Append batch whose event at index
// k (seq seq) opens turn turn and which does not end it, while the agent of
// session id runs its own turns.
func TurnLeftOpenError(id string, turn int64, k int, seq int64) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"agent %s runs its own turns: the append batch leaves turn %d open (its turn/start at index %d, seq %d, has no turn/end); append whole turns",
		quoteID(id), turn, k, seq), wire.ErrTypeTurnLeftOpen, nil)
}

// MaxStepsText is the error text of an invalid maxSteps.
const MaxStepsText = "agent maxSteps must be a positive safe integer"

// MaxParallelToolCallsText is the error text of an invalid
// maxParallelToolCalls.
const MaxParallelToolCallsText = "agent maxParallelToolCalls must be a positive safe integer"

// ContextWindowText is the error text of an invalid contextWindow.
const ContextWindowText = "agent contextWindow must be a positive safe integer"

// SandboxModeText is the error text of an unknown sandboxMode.
const SandboxModeText = `agent sandboxMode must be "read-only", "workspace-write" or "danger-full-access"`
