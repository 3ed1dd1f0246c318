package agent

import (
	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/wire"
)

// CallRef names one tool call the model requested.
type CallRef struct {
	// ID is the model's call id.
	ID string `json:"id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Parallel reports whether the worker's registry marks the tool
	// parallel-safe (false for an unknown tool).
	Parallel bool `json:"parallel,omitempty"`
	// Hint is a short hint of the call's arguments for its activity
	// summary in the Temporal UI (the command of run_command, a file
	// tool's path: CallHint), at most MaxCallHint bytes; never the
	// arguments themselves.
	Hint string `json:"hint,omitempty"`
}

// ModelInput is the input of CallModel: where to read and what to call. It
// carries no conversation.
type ModelInput struct {
	// Ref is the session's write handle.
	Ref wire.HandleRef `json:"ref"`
	// Turn and Step are the open turn and step.
	Turn int64 `json:"turn"`
	Step int64 `json:"step"`
	// Provider, Model, ReasoningEffort and MaxTokens are the route.
	Provider        string `json:"provider"`
	Model           string `json:"model"`
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
	MaxTokens       int64  `json:"maxTokens,omitempty"`
	// From is the first seq of the conversation window.
	From int64 `json:"from,omitempty"`
	// Compacts reports that the workflow handles the compaction results
	// (ModelResult.Compact): without it the call never asks for one and a
	// context-exceeded refusal fails the call as any refusal does.
	Compacts bool `json:"compacts,omitempty"`
	// NoAutoCompact turns off the check of pressure before the call.
	NoAutoCompact bool `json:"noAutoCompact,omitempty"`
	// PressureChecked reports that the step compacted under pressure
	// already: the call is made whatever its size.
	PressureChecked bool `json:"pressureChecked,omitempty"`
	// ContextWindow is the session's context window, 0 for the worker's.
	ContextWindow int64 `json:"contextWindow,omitempty"`
	// Overflows counts the step's context-exceeded refusals the workflow
	// compacted for: a log holding more of them than that for the step
	// answers with the last one again (a retried activity).
	Overflows int `json:"overflows,omitempty"`
	// Policy is what the runtime context states (the session's sandbox
	// mode and approval policy): the call stores the snapshot first when
	// the log's surface does not hold it (FORMAT.md §10.4). nil stores
	// none.
	Policy *ContextPolicy `json:"policy,omitempty"`
	// RecordCalls asks the call to store, in the batch and the fsync of
	// its assistant/message, the tool/call of each call of the message's
	// first group in model order: the calls the workflow starts at once
	// (the first call when it is not parallel-safe, else the leading
	// parallel-safe calls, at most ParallelLimit), whose tool/call the
	// harness appends and flushes before it dispatches them. Not for an
	// interrupted anchor nor a message finished at its max-tokens limit
	// (its calls are not run but closed). The result reports how many
	// (RecordedCalls).
	RecordCalls bool `json:"recordCalls,omitempty"`
	// ParallelLimit is the number of parallel-safe calls the workflow
	// starts at once (maxParallelToolCalls); 0 for no limit.
	ParallelLimit int `json:"parallelLimit,omitempty"`
}

// ModelResult is what CallModel returns to the workflow: seqs, ids and the
// finish, never the response.
type ModelResult struct {
	// MessageSeq is the seq of the stored assistant/message, -1 when none
	// was stored.
	MessageSeq int64 `json:"messageSeq"`
	// NextSeq is the log's next seq after the call.
	NextSeq int64 `json:"nextSeq"`
	// ToolCalls are the calls to make, in model order.
	ToolCalls []CallRef `json:"toolCalls,omitempty"`
	// Finish is the finish reason.
	Finish provider.FinishReason `json:"finish,omitempty"`
	// Usage is the call's token usage, when the provider reported it.
	Usage *provider.Usage `json:"usage,omitempty"`
	// Interrupted reports that the stored message is an interrupted anchor.
	Interrupted bool `json:"interrupted,omitempty"`
	// Reused reports that an earlier attempt had stored the message.
	Reused bool `json:"reused,omitempty"`
	// RecordedCalls is the number of the message's first calls whose
	// tool/call the log holds, in model order, right after the message:
	// the batch ModelInput.RecordCalls asked for, stored by this attempt or
	// an earlier one.
	RecordedCalls int `json:"recordedCalls,omitempty"`
	// Compact, when set, asks the workflow to compact before the step's
	// call is made (again): TriggerPressure when the request was at or
	// above the threshold of the context window (no call was made),
	// TriggerOverflow when the provider refused it as exceeding the window
	// (Failure; its finish chunk is stored). No message was stored.
	Compact string `json:"compact,omitempty"`
	// Failure is the provider's refusal of a TriggerOverflow result.
	Failure *provider.Error `json:"failure,omitempty"`
	// Tokens and Window are the request's measured size and the context
	// window (0: unknown) when the call measured them.
	Tokens int   `json:"tokens,omitempty"`
	Window int64 `json:"window,omitempty"`
}

// ToolInput is the input of RunTool: one call of the step's
// assistant/message at MessageSeq.
type ToolInput struct {
	Ref        wire.HandleRef `json:"ref"`
	Turn       int64          `json:"turn"`
	Step       int64          `json:"step"`
	MessageSeq int64          `json:"messageSeq"`
	CallID     string         `json:"callId"`
	Name       string         `json:"name"`
	// Index is the call's position in model order.
	Index int `json:"index"`
	// SandboxMode and NetworkAccess are the session's sandbox
	// (agentOptions; "" is the default mode), passed to the tool.
	SandboxMode   string `json:"sandboxMode,omitempty"`
	NetworkAccess bool   `json:"networkAccess,omitempty"`
	// Approval gates the call (nil: it runs without asking, as before
	// approvals existed).
	Approval *ToolApproval `json:"approval,omitempty"`
	// Subagent makes the activity a step of a delegation the workflow
	// runs as a child session (tool.SubagentName; nil: the tool runs in
	// the activity).
	Subagent *SubagentStep `json:"subagent,omitempty"`
	// OpenNext asks the activity that stores the last result the
	// message's calls lack to end the step and open the next one in the
	// same batch (step/end of the step, step/start of the next), the
	// workflow's next step then opened without a store of its own. A call
	// cancelled while its tool ran opens nothing: the turn is ending.
	OpenNext bool `json:"openNext,omitempty"`
	// Recorded reports that the call's tool/call was stored by the model
	// call (ModelResult.RecordedCalls) and that this is the call's first
	// RunTool: the workflow sets it on one activity per call, never on
	// the run with a decision, a subagent's Finish or a parked turn's
	// calls dispatched before. Its first attempt (the activity's attempt
	// number 1) then knows the tool has not run; a later attempt takes the
	// call as recorded and maybe run, as a retry after a crash does.
	Recorded bool `json:"recorded,omitempty"`
}

// SubagentStep is a step of a subagent call (docs/API.md "Subagents").
// Without Finish, RunTool records the call and plans the child: an
// accepted call returns ToolOutcome.Subagent and stores no result, a
// refused one (bad arguments, the depth limit) stores its IsError result.
// With Finish, RunTool stores the child's answer as the call's result.
type SubagentStep struct {
	Finish *SubagentFinish `json:"finish,omitempty"`
}

// SubagentFinish is how the child of a subagent call ended.
type SubagentFinish struct {
	// ChildSessionID is the child session, whose log holds its answer.
	ChildSessionID string `json:"childSessionId"`
	// Reason is how the child's turn ended; nil when the child ended
	// without one (Failure says why).
	Reason *wire.TurnEndReason `json:"reason,omitempty"`
	// Failure is the child run's failure when it did not end its turn.
	Failure string `json:"failure,omitempty"`
}

// SubagentStart is an accepted subagent call: the child session to start.
type SubagentStart struct {
	// ChildSessionID is the child's session id, derived from the parent's
	// id and the call's tool/call seq: a retried step plans the same child.
	ChildSessionID string `json:"childSessionId"`
	// Prompt is the child's task, its first user message.
	Prompt string `json:"prompt"`
	// Label is the call's short description (the child's descriptor label).
	Label string `json:"label"`
	// Depth is the child's delegation depth.
	Depth int64 `json:"depth"`
}

// ToolOutcome is what RunTool returns: seqs and the result's class.
type ToolOutcome struct {
	// CallSeq is the seq of the call's tool/call.
	CallSeq int64 `json:"callSeq"`
	// NextSeq is the log's next seq after the activity.
	NextSeq int64 `json:"nextSeq"`
	// IsError and Code classify the result.
	IsError bool   `json:"isError,omitempty"`
	Code    string `json:"code,omitempty"`
	// Reran reports an idempotent tool run again after a crash; Unknown
	// reports a TOOL_OUTCOME_UNKNOWN result stored instead of a re-run.
	Reran   bool `json:"reran,omitempty"`
	Unknown bool `json:"unknown,omitempty"`
	// Asked is set when the call waits for the user's approval: its
	// tool/call and approval/asked are stored, nothing else.
	Asked *AskedApproval `json:"asked,omitempty"`
	// Subagent is set when a subagent call was accepted: its tool/call is
	// stored, and the child it names is the workflow's to start.
	Subagent *SubagentStart `json:"subagent,omitempty"`
	// Opened is the step the log holds opened right after the message's
	// step ended (its step/end, then this step's step/start: stored with
	// the last result of an OpenNext call, or by the workflow), 0 when the
	// step has not ended so.
	Opened int64 `json:"opened,omitempty"`
}

// EndTurnInput is the input of EndTurn: close the turn, its open step and
// its undispatched calls in one batch.
type EndTurnInput struct {
	Ref  wire.HandleRef `json:"ref"`
	Turn int64          `json:"turn"`
	// Step is the open step to close; 0 for none.
	Step int64 `json:"step,omitempty"`
	// MessageSeq is the assistant/message whose calls are Skipped; -1 for
	// none.
	MessageSeq int64 `json:"messageSeq"`
	// Skipped are the undispatched call ids, in model order.
	Skipped []string `json:"skipped,omitempty"`
	// MaxTokens reports that the message at MessageSeq finished at its
	// token limit: its undispatched calls get the MAX_TOKENS_NOT_RUN
	// result instead of ABORTED_BEFORE_DISPATCH (D40).
	MaxTokens bool `json:"maxTokens,omitempty"`
	// Reason is the turn's end reason.
	Reason wire.TurnEndReason `json:"reason"`
	// ExpectSeq, when set, is the log's next seq as the workflow knows it.
	// When the log holds, from there, the opening of step Step+1 (its
	// step/end of Step, step/start of Step+1 and claimed inputs), stored
	// by an earlier attempt of the workflow task that admitted other
	// inputs, nothing is stored and the result's Held describes them
	// (docs/DECISIONS.md D77).
	ExpectSeq int64 `json:"expectSeq,omitempty"`
}

// EndTurnResult reports the log's next seq after EndTurn.
type EndTurnResult struct {
	NextSeq int64 `json:"nextSeq"`
	// Held describes the opening of the next step the log holds from
	// EndTurnInput.ExpectSeq, when the turn was not ended for it.
	Held []activities.HeldEvent `json:"held,omitempty"`
}
