package wire

// Event types of FORMAT.md §1.2 that the store, crash repair or the lifecycle use.
const (
	// TypeTurnStart opens a turn.
	TypeTurnStart = "turn/start"
	// TypeTurnEnd closes a turn.
	TypeTurnEnd = "turn/end"
	// TypeStepStart opens a step inside a turn.
	TypeStepStart = "step/start"
	// TypeStepEnd closes a step.
	TypeStepEnd = "step/end"
	// TypeUserMessage is a user message (surface-eligible).
	TypeUserMessage = "user/message"
	// TypeSystemMessage carries the system prompt (surface-eligible).
	TypeSystemMessage = "system/message"
	// TypeAssistantMessage is an assistant message (surface-eligible).
	TypeAssistantMessage = "assistant/message"
	// TypeAssistantAttempt is a settled model attempt without a message.
	TypeAssistantAttempt = "assistant/attempt"
	// TypeToolCall records a tool call as started.
	TypeToolCall = "tool/call"
	// TypeToolResult is a tool result (surface-eligible).
	TypeToolResult = "tool/result"
	// TypeEndSeed is the session/end-seed marker of FORMAT.md §5.4.
	TypeEndSeed = "session/end-seed"
	// TypeInboxSpliced is a mutation of the agent's pending-message lists.
	TypeInboxSpliced = "agent/inbox/spliced"
	// TypeRequestHeader records a model request header.
	TypeRequestHeader = "request/header"
	// TypeRequestContext records a model request context.
	TypeRequestContext = "request/context"
	// TypeCompactionStart opens a compaction (docs/FORMAT.md §9).
	TypeCompactionStart = "compaction/start"
	// TypeCompactionSummary records a compaction's summary; the replacing
	// user/message follows it.
	TypeCompactionSummary = "compaction/summary"
	// TypeCompactionEnd closes a compaction, with its error when it failed.
	TypeCompactionEnd = "compaction/end"
	// TypeCompactionPrune prices the pruned tool/result that follows it.
	TypeCompactionPrune = "compaction/prune"
	// TypeCommandRun and TypeCommandDone bracket a user's command (a
	// manual compaction).
	TypeCommandRun  = "command/run"
	TypeCommandDone = "command/done"
	// TypeTodoWrite records a todo-list write.
	TypeTodoWrite = "todo/write"
	// TypeFeedbackRecord records feedback.
	TypeFeedbackRecord = "feedback/record"
	// TypeAssistantChunk is one chunk of a streamed model answer; the
	// assistant/message assembled from the stream cites its chunks in
	// sourceEventSeqs. Runs of deltas are stored as packed rows (chunkrows.go).
	TypeAssistantChunk = "assistant/chunk"
	// TypeApprovalAsked and TypeApprovalDecided pair a question put to
	// the user about one tool call with its outcome, between the call's
	// tool/call and its tool/result.
	TypeApprovalAsked   = "approval/asked"
	TypeApprovalDecided = "approval/decided"
	// TypeApprovalPolicy, TypeSandboxMode and TypePermissionPreset pin a
	// session's approval policy, sandbox mode and permission preset; the
	// last of each is in effect.
	TypeApprovalPolicy   = "approval/policy"
	TypeSandboxMode      = "sandbox/mode"
	TypePermissionPreset = "permission/preset"
	// TypeApprovalRules holds a session's allow rules (the last one is in
	// effect); sessionflow's own, stored ignorable.
	TypeApprovalRules = "approval/rules"
	// TypeSubagentDescriptor describes a child session's delegation,
	// stored in its first turn before its first step.
	TypeSubagentDescriptor = "subagent/descriptor"
)

// SubagentToolName is the model-facing name of the delegation tool
// (docs/API.md "Subagents").
const SubagentToolName = "subagent"

// SubagentProviderSpawn is the descriptor provider of a fresh child.
const SubagentProviderSpawn = "spawn"

// SourceDelegation is the source of the permission facts a parent pins
// in its child's log.
const SourceDelegation = "delegation"
