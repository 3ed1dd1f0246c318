package wire

import "encoding/json"

// Update and query names of the agent loop of a live session.
const (
	// UpdateFollowup queues a user message for the next turn and wakes the
	// loop; it takes an InputRequest and returns an InputResult.
	UpdateFollowup = "Followup"
	// UpdateSteer queues a user message for the next step (of the running
	// turn, or of a new turn when idle) and wakes the loop.
	UpdateSteer = "Steer"
	// UpdateInject queues a user message for the next step without waking
	// the loop; while idle it is stored as an agent/inbox/spliced event.
	UpdateInject = "Inject"
	// UpdateCancel aborts the running turn (a CancelRequest); it returns a
	// CancelResult once the turn has ended.
	UpdateCancel = "Cancel"
	// QueryLoopState returns the loop's LoopState.
	QueryLoopState = "LoopState"
)

// ErrTypeTurnRunning is the type of the refusal of an Append while a turn
// runs (or is about to start).
const ErrTypeTurnRunning = "TurnRunning"

// ErrTypeTurnLeftOpen is the type of the refusal of an Append that would
// leave a turn open while the session's agent has a model route: the agent's
// next turn would nest inside it (docs/DECISIONS.md D76).
const ErrTypeTurnLeftOpen = "TurnLeftOpen"

// ErrTypeInboxFull is the type of the refusal of an input when the loop
// already holds MaxPendingInputs pending inputs.
const ErrTypeInboxFull = "InboxFull"

// Inbox targets, as stored on agent/inbox/spliced.
const (
	TargetNextTurn = InboxNextTurn
	TargetNextStep = InboxNextStep
)

// Loop states reported by LoopState.
const (
	LoopIdle    = "idle"
	LoopRunning = "running"
)

// Cancel causes. CauseDisposed is used by disposal only.
const (
	CauseUser     = "user"
	CauseParent   = "parent"
	CauseDisposed = "disposed"
)

// InputRequest is the argument of Followup, Steer and Inject: one user
// message.
type InputRequest struct {
	// MessageID is the message's id; empty lets the workflow choose
	// "msg-<update id>". It must be unique among the pending inputs.
	MessageID string `json:"messageId,omitempty"`
	// Content is a non-empty string (one text block) or a non-empty array
	// of content blocks (JSON objects with a string "type"), stored as
	// given.
	Content json.RawMessage `json:"content"`
	// Source is the message's source object; default {"kind":"user"}.
	Source json.RawMessage `json:"source,omitempty"`
	// Wait makes the update complete when the turn that claims the
	// message has ended (InputResult.Ended), as WaitTurn does.
	Wait bool `json:"wait,omitempty"`
}

// InputResult is the result of Followup, Steer and Inject.
type InputResult struct {
	// MessageID is the id of the queued message; LoopState lists it under
	// the turn that claims it.
	MessageID string `json:"messageId"`
	// Target is "next-turn" or "next-step".
	Target string `json:"target"`
	// SplicedSeq is the seq of the agent/inbox/spliced event of an idle
	// Inject; -1 when nothing was stored.
	SplicedSeq int64 `json:"splicedSeq"`
	// Turn is the running turn when the input was queued, 0 when idle.
	Turn int64 `json:"turn"`
	// Ended is the turn that claimed the message, once ended: set when
	// the request asked to Wait.
	Ended *TurnInfo `json:"ended,omitempty"`
}

// CancelRequest is the argument of Cancel.
type CancelRequest struct {
	// Cause is "user" or "parent"; it is recorded as the aborted turn's
	// reason {kind: cause}.
	Cause string `json:"cause"`
	// KeepInbox keeps the pending inputs; by default a cancel of a running
	// turn discards them.
	KeepInbox bool `json:"keepInbox,omitempty"`
}

// CancelResult is the result of Cancel.
type CancelResult struct {
	// Cancelled reports that a turn was running and is now ended; false
	// when the loop was idle (a no-op).
	Cancelled bool `json:"cancelled"`
	// Turn is the cancelled turn.
	Turn int64 `json:"turn,omitempty"`
	// Reason is how it ended (aborted, unless it had ended otherwise
	// before the cancel reached it).
	Reason *TurnEndReason `json:"reason,omitempty"`
	// Discarded lists the ids of the pending inputs the cancel discarded.
	Discarded []string `json:"discarded,omitempty"`
}

// PendingInputs lists the ids of the inputs waiting, by target.
type PendingInputs struct {
	NextTurn []string `json:"nextTurn"`
	NextStep []string `json:"nextStep"`
}

// TurnInfo describes one turn of the loop.
type TurnInfo struct {
	// Turn is the turn number.
	Turn int64 `json:"turn"`
	// StartSeq is the seq of its turn/start.
	StartSeq int64 `json:"startSeq"`
	// EndSeq is the seq after its turn/end (the log's next seq then); 0
	// while it runs.
	EndSeq int64 `json:"endSeq,omitempty"`
	// Steps is the number of steps opened so far.
	Steps int64 `json:"steps"`
	// Claimed lists the ids of the inputs the turn claimed, in order.
	Claimed []string `json:"claimed"`
	// Reason is how the turn ended; nil while it runs.
	Reason *TurnEndReason `json:"reason,omitempty"`
}

// LoopState is the result of the LoopState query.
type LoopState struct {
	// State is "idle" or "running".
	State string `json:"state"`
	// Turn and Step are the running turn and its open step (0 when idle).
	Turn int64 `json:"turn"`
	Step int64 `json:"step"`
	// Pending lists the inputs waiting.
	Pending PendingInputs `json:"pending"`
	// LastTurn is the last turn number stored.
	LastTurn int64 `json:"lastTurn"`
	// NextSeq is the workflow's stored cursor.
	NextSeq int64 `json:"nextSeq"`
	// Recent lists the latest turns of this session's loop, oldest first,
	// the running one last (at most 16 ended ones).
	Recent []TurnInfo `json:"recent"`
	// Calls are the tool calls of the running step, in model order, once
	// its model call returned them.
	Calls []CallState `json:"calls,omitempty"`
	// Compacting is the trigger of the compaction running ("pressure",
	// "context-overflow" or "manual"), "" when none is.
	Compacting string `json:"compacting,omitempty"`
	// CompactionsQueued counts the Compact requests waiting for their turn.
	CompactionsQueued int `json:"compactionsQueued,omitempty"`
	// Approvals are the running turn's calls waiting for a Decide, in
	// the order asked.
	Approvals []PendingApproval `json:"approvals,omitempty"`
	// Permissions are the session's sandbox and approval settings.
	Permissions *Permissions `json:"permissions,omitempty"`
}

// Tool call states reported by LoopState.
const (
	CallPending = "pending"
	CallRunning = "running"
	CallDone    = "done"
	CallFailed  = "failed"
	CallSkipped = "skipped"
	// CallAwaitingApproval: its tool/call and approval/asked are stored;
	// it waits for a Decide.
	CallAwaitingApproval = "awaiting-approval"
)

// CallState is one tool call of the running step.
type CallState struct {
	// ID and Name are the model's call id and the tool's name.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Index is the call's position in model order.
	Index int `json:"index"`
	// State is "pending", "running", "done", "failed" (its activity
	// failed) or "skipped" (not dispatched before a cancel).
	State string `json:"state"`
	// IsError and Code classify a done call's result.
	IsError bool   `json:"isError,omitempty"`
	Code    string `json:"code,omitempty"`
	// ChildSessionID is the child session a subagent call runs, once
	// started (docs/API.md "Subagents").
	ChildSessionID string `json:"childSessionId,omitempty"`
}

// UpdateWaitTurn waits for a turn to end (a WaitTurnRequest); it returns
// the ended turn's TurnInfo.
const UpdateWaitTurn = "WaitTurn"

// ErrTypeNoSuchTurn is the type of a wait for a turn the loop cannot
// answer: the message is neither pending nor claimed by a recent turn
// (discarded by a cancel, never sent, or older than the recent turns), or
// the turn ended before the recent turns.
const ErrTypeNoSuchTurn = "NoSuchTurn"

// ErrTypeTurnWaitMoved is the type of the answer to a wait the run gave up
// to continue as new: the wait is to be sent again (it reaches the next
// run, which answers it).
const ErrTypeTurnWaitMoved = "TurnWaitMoved"

// WaitTurnRequest is the argument of WaitTurn: exactly one of Turn and
// MessageID.
type WaitTurnRequest struct {
	// Turn is the turn number to wait for (a turn already ended, running,
	// or still to come).
	Turn int64 `json:"turn,omitempty"`
	// MessageID waits for the turn that claims this message (the id
	// Followup, Steer or Inject returned).
	MessageID string `json:"messageId,omitempty"`
}

// Defaults and bounds of the agent loop.
const (
	// DefaultMaxSteps is the default step limit of a turn.
	DefaultMaxSteps = 100
	// DefaultMaxParallelToolCalls is the default size of the rolling pool
	// of parallel-safe tool calls of a step.
	DefaultMaxParallelToolCalls = 10
	// MaxPendingInputs bounds the inputs the loop holds for later turns and
	// steps.
	MaxPendingInputs = 256
	// MaxPendingInputBytes bounds the encoded size of the pending inputs
	// together: they are carried across continue-as-new.
	MaxPendingInputBytes = 1 << 20
	// MaxMessageIDLength bounds a client-chosen message id, in bytes.
	MaxMessageIDLength = 256
)
