package workflows

import (
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/wire"
)

// LiveState is the input of LiveSession: what a live session carries across
// continue-as-new (the handle and the cursor, plus its configuration).
type LiveState struct {
	// SessionID is the session id.
	SessionID string `json:"sessionId"`
	// Handle is the write handle the workflow owns.
	Handle wire.HandleRef `json:"handle"`
	// NextSeq is the cursor: the seq of the next event.
	NextSeq int64 `json:"nextSeq"`
	// FirstLiveSeq is the seed's length (see SessionInfo).
	FirstLiveSeq int64 `json:"firstLiveSeq"`
	// Source is "startup" or "resume".
	Source string `json:"source"`
	// Header is the session header.
	Header wire.Header `json:"header"`
	// InheritedEventCount is the fork cut.
	InheritedEventCount int64 `json:"inheritedEventCount"`
	// LastTurn is the last turn number stored.
	LastTurn int64 `json:"lastTurn"`
	// Lifecycle is the published lifecycle entries.
	Lifecycle []wire.LifecycleEntry `json:"lifecycle"`
	// DisposeActivity is the disposal hook.
	DisposeActivity string `json:"disposeActivity,omitempty"`
	// Options tunes the workflow.
	Options *wire.Options `json:"options,omitempty"`
	// AgentOptions are the agent's route and limits.
	AgentOptions *wire.AgentOptions `json:"agentOptions,omitempty"`
	// Inbox holds the pending inputs of the agent loop.
	Inbox *InboxState `json:"inbox,omitempty"`
	// RecentTurns are the latest turns LoopState lists.
	RecentTurns []wire.TurnInfo `json:"recentTurns,omitempty"`
	// Permissions are the session's permissions (nil in a state carried
	// before they existed: resolved from AgentOptions).
	Permissions *wire.Permissions `json:"permissions,omitempty"`
	// Settled are the approvals decided lately, oldest first: a late
	// Decide for one is refused ApprovalSettled in the next run too.
	Settled []SettledApproval `json:"settled,omitempty"`
	// Parked is the turn the run continued as new in, its calls waiting
	// for approvals; the next run goes on with it.
	Parked *ParkedTurn `json:"parked,omitempty"`
	// Delegated is the task of a one-shot child session (a subagent call's
	// child), carried until its turn ends and it disposes itself.
	Delegated *wire.SubagentTask `json:"delegated,omitempty"`
}

// ParkedTurn is a turn carried across continue-as-new while its step's
// calls wait for approvals (LIFECYCLE.md §13.7): the next run runs the
// step's calls again (each RunTool finds what the log holds) and goes on.
type ParkedTurn struct {
	// Summary is the turn's, as LoopState reports it.
	Summary wire.TurnInfo `json:"summary"`
	// Step is the open step; Result its model result (its calls).
	Step   int64             `json:"step"`
	Result agent.ModelResult `json:"result"`
	// Reason is the turn's end reason so far (a sticky max-tokens).
	Reason *wire.TurnEndReason `json:"reason,omitempty"`
	// NoPressure is the turn's noPressure.
	NoPressure bool `json:"noPressure,omitempty"`
	// Waiting are the approvals waiting, as asked; Decided the decisions
	// that came after the turn was parked, by call id.
	Waiting []wire.PendingApproval         `json:"waiting,omitempty"`
	Decided map[string]*agent.ToolDecision `json:"decided,omitempty"`
}

// SettledApproval is an approval decided lately.
type SettledApproval struct {
	ID      string `json:"id"`
	CallID  string `json:"callId"`
	Outcome string `json:"outcome"`
}
