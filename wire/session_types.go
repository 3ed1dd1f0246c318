package wire

// Workflow type names. They are part of the public contract (docs/API.md).
const (
	CreateSessionName = "CreateSession"
	ResumeSessionName = "ResumeSession"
	LiveSessionName   = "LiveSession"
	SessionLoopName   = "SessionLoop"
)

// Update, query and signal names: one style, the one of the workflow
// types (PascalCase). The names used before (the Legacy* constants) are still
// accepted: the workflows register a handler under both, so older clients
// and recorded histories keep working (docs/API.md: Names).
const (
	// UpdateWaitReady returns the live session's SessionInfo, or the failure
	// of its creation or resume.
	UpdateWaitReady = "WaitReady"
	// UpdateAppend appends a bounded batch of events to a live session.
	UpdateAppend = "Append"
	// UpdateDispose disposes a live session and returns the outcome.
	UpdateDispose = "Dispose"
	// QueryDescribe returns a Description (sessions) or a LoopDescription
	// (SessionLoop).
	QueryDescribe = "Describe"
	// SignalAbort carries an AbortRequest: the caller's abort reason.
	SignalAbort = "Abort"
	// SignalOwnerUnload tells a session that its owner went away.
	SignalOwnerUnload = "OwnerUnload"
	// SignalSessionReady is sent by a session to its parent SessionLoop when
	// it becomes live; it carries a ReadyNotice.
	SignalSessionReady = "SessionReady"
	// SignalSubagentApprovals is sent by a child session whose approval
	// policy is ask to the session whose subagent call started it,
	// whenever its pending approvals change; it carries a
	// SubagentApprovals.
	SignalSubagentApprovals = "SubagentApprovals"
	// UpdateStart starts a session as a child of a SessionLoop.
	UpdateStart = "Start"
)

// Earlier names of the query and signals, still accepted by the workflows:
// the workflows register their handlers under them too; a client sends the
// current names.
const (
	// LegacyQueryDescribe is the earlier name of QueryDescribe.
	// A client sends QueryDescribe.
	LegacyQueryDescribe = "describe"
	// LegacySignalAbort is the earlier name of SignalAbort.
	// A client sends SignalAbort.
	LegacySignalAbort = "abort"
	// LegacySignalOwnerUnload is the earlier name of SignalOwnerUnload.
	// A client sends SignalOwnerUnload.
	LegacySignalOwnerUnload = "owner-unload"
	// LegacySignalSessionReady is the earlier name of SignalSessionReady.
	// A client sends SignalSessionReady.
	LegacySignalSessionReady = "session-ready"
)

// Lifecycle entry types (LIFECYCLE.md §1.3, §6 step 4) and sources.
const (
	EntrySessionCreated = "session/created"
	EntryAgentCreated   = "agent/created"
	EntrySessionStart   = "agent/session-start"
	SourceStartup       = "startup"
	SourceResume        = "resume"
)

// Application error types produced by the workflows.
const (
	// ErrTypeInvalidArgument is the type of a request refused as malformed,
	// by a workflow, an activity (before it touches the store, and for
	// session validation errors) or the store: the store's code
	// CodeInvalidArgument.
	ErrTypeInvalidArgument = string(CodeInvalidArgument)
	ErrTypeTypeError       = "TypeError"
	ErrTypeAbort           = "AbortError"
	ErrTypeOwnerDisposed   = "OwnerDisposed"
	ErrTypeLoopInactive    = "LoopInactive"
	ErrTypeAlreadyExists   = "SessionAlreadyExists"
	ErrTypeAggregate       = "AggregateError"
	ErrTypeNotLive         = "SessionNotLive"
	// ErrTypeLifecycleDisposed is the type of `agent "<id>" lifecycle
	// disposed`.
	ErrTypeLifecycleDisposed = "LifecycleDisposed"
	ErrTypeBatchTooLarge     = "BatchTooLarge"
	// ErrTypeError is the default type of an abort reason given as an error.
	ErrTypeError = "Error"
)

// Phase is the lifecycle phase of a session workflow.
type Phase string

// Phases, in order.
const (
	PhasePreparing  Phase = "preparing"
	PhaseSetup      Phase = "setup"
	PhaseCommitting Phase = "committing"
	PhaseLive       Phase = "live"
	PhaseDisposing  Phase = "disposing"
	PhaseClosed     Phase = "closed"
)

// SessionMeta is the optional metadata of a created session's header.
type SessionMeta struct {
	// Cwd is the absolute working directory, or empty.
	Cwd string `json:"cwd,omitempty"`
	// ParentSession is the fork parent's id, or empty.
	ParentSession string `json:"parentSession,omitempty"`
	// CreatedAt is the creation time in Unix milliseconds; nil means the
	// workflow's clock.
	CreatedAt *int64 `json:"createdAt,omitempty"`
	// IsSeeded marks a fork child holding an inherited prefix.
	IsSeeded bool `json:"isSeeded,omitempty"`
	// Origin is empty or "subagent".
	Origin string `json:"origin,omitempty"`
	// DelegationDepth is the recursion budget used so far.
	DelegationDepth int64 `json:"delegationDepth,omitempty"`
	// AgentPreset names the preset the session was composed from.
	AgentPreset string `json:"agentPreset,omitempty"`
}

// ForkSeed asks CreateSession to copy the first Count events of
// ParentSessionID into the new session at its commit point, inside an
// activity (the events never pass through history).
type ForkSeed struct {
	// ParentSessionID is the session whose prefix is copied.
	ParentSessionID string `json:"parentSessionId"`
	// Count is the number of leading events copied. With AtTurn or
	// AtLastTurn it must be 0: the workflow resolves it.
	Count int64 `json:"count"`
	// AtTurn, when positive, forks the parent at the end of its turn
	// AtTurn: the prefix is the parent's events through that turn's
	// turn/end, which must be stored (docs/API.md: Fork). The workflow
	// resolves the count (the ResolveFork activity) and takes, where the
	// request leaves them empty, the parent's cwd and the route and
	// permission facts its prefix records.
	AtTurn int64 `json:"atTurn,omitempty"`
	// AtLastTurn forks the parent at the end of its last completed turn,
	// as AtTurn does for a given turn.
	AtLastTurn bool `json:"atLastTurn,omitempty"`
}

// Resolved reports whether the fork point is a turn the workflow resolves
// (AtTurn or AtLastTurn) rather than a given Count.
func (f *ForkSeed) Resolved() bool {
	return f != nil && (f.AtTurn != 0 || f.AtLastTurn)
}

// AgentOptions are the agent options validated by the lifecycle.
type AgentOptions struct {
	// Provider names the model provider.
	Provider string `json:"provider,omitempty"`
	// Model names the model.
	Model string `json:"model,omitempty"`
	// ReasoningEffort is passed through.
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
	// MaxTokens, when present, must be a positive safe integer.
	MaxTokens *float64 `json:"maxTokens,omitempty"`
	// MaxSteps, when present, must be a positive safe integer: the step
	// limit of a turn (default DefaultMaxSteps); a turn that would open
	// one more step ends "blocked".
	MaxSteps *float64 `json:"maxSteps,omitempty"`
	// MaxParallelToolCalls, when present, must be a positive safe integer:
	// the rolling pool of parallel-safe tool calls of a step (default
	// DefaultMaxParallelToolCalls; 1 is serial).
	MaxParallelToolCalls *float64 `json:"maxParallelToolCalls,omitempty"`
	// ContextWindow, when present, must be a positive safe integer: the
	// context window of the route in tokens, in place of the worker's
	// (docs/API.md "Compaction").
	ContextWindow *float64 `json:"contextWindow,omitempty"`
	// AutoCompact, when false, turns off compaction under pressure
	// (default on); a context-exceeded refusal is still recovered from.
	AutoCompact *bool `json:"autoCompact,omitempty"`
	// SandboxMode, when present, is one of SandboxModes: what the
	// session's commands and file tools may write (default
	// DefaultSandboxMode; docs/API.md "Sandbox"). Another value is
	// refused.
	SandboxMode string `json:"sandboxMode,omitempty"`
	// NetworkAccess lets the session's commands open TCP connections and
	// listen in the confined modes (default false: denied).
	NetworkAccess bool `json:"networkAccess,omitempty"`
	// ApprovalPolicy, when present, is one of ApprovalPolicies (default
	// the worker's, DefaultApprovalPolicy; docs/API.md "Approvals").
	ApprovalPolicy string `json:"approvalPolicy,omitempty"`
	// Preset, when present, names a permission preset (PresetBundle):
	// its sandbox mode and approval policy, with which SandboxMode and
	// ApprovalPolicy, when present too, must agree.
	Preset string `json:"preset,omitempty"`
	// ApprovalRules are allow rules granted at create or resume (at most
	// MaxApprovalRules), replacing those the log holds.
	ApprovalRules []ApprovalRule `json:"approvalRules,omitempty"`
	// ApprovalTimeoutMs, when present, must be a positive safe integer:
	// an approval not decided within it is rejected.
	ApprovalTimeoutMs *float64 `json:"approvalTimeoutMs,omitempty"`
	// SubagentApprovalPolicy is the approval policy of the child sessions
	// the session's subagent calls start: "never" (the default, the
	// harness's delegation rule) or "ask", whose children ask, and whose
	// questions the session's LoopState lists with their sessionId
	// (docs/API.md "Subagents").
	SubagentApprovalPolicy string `json:"subagentApprovalPolicy,omitempty"`
}

// GetSandboxMode returns o.SandboxMode; "" for nil options.
func (o *AgentOptions) GetSandboxMode() string {
	if o == nil {
		return ""
	}
	return o.SandboxMode
}

// GetNetworkAccess returns o.NetworkAccess; false for nil options.
func (o *AgentOptions) GetNetworkAccess() bool {
	return o != nil && o.NetworkAccess
}

// The sandbox modes of a session (AgentOptions.SandboxMode), as the
// harness names them.
const (
	// SandboxReadOnly: commands read but write nowhere (but /dev/null);
	// the file tools write nothing.
	SandboxReadOnly = "read-only"
	// SandboxWorkspaceWrite: commands and file tools write only under
	// the session's cwd (commands also in a private temporary directory).
	SandboxWorkspaceWrite = "workspace-write"
	// SandboxDangerFullAccess: commands run unconfined.
	SandboxDangerFullAccess = "danger-full-access"
)

// DefaultSandboxMode is the mode of a session whose agentOptions set none.
const DefaultSandboxMode = SandboxWorkspaceWrite

// SandboxModes are the valid values of AgentOptions.SandboxMode.
var SandboxModes = []string{SandboxReadOnly, SandboxWorkspaceWrite, SandboxDangerFullAccess}

// Hooks names optional activities registered by the embedding application.
// An empty name skips the hook.
type Hooks struct {
	// SetupActivity runs before publication with a SetupInput and returns a
	// SetupResult; a failure rolls back and publishes nothing.
	SetupActivity string `json:"setupActivity,omitempty"`
	// CommitActivity runs after a successful setup with a SetupInput; a
	// failure rolls back and publishes nothing.
	CommitActivity string `json:"commitActivity,omitempty"`
	// PublishActivity is called with a PublishInput for every lifecycle
	// entry; a failure vetoes publication (rollback, that error returned).
	PublishActivity string `json:"publishActivity,omitempty"`
	// DisposeActivity runs first during disposal and rollback with a
	// DisposeInput (the agent machine's teardown); its failure is collected.
	DisposeActivity string `json:"disposeActivity,omitempty"`
}

// Options tune a session workflow. Zero values take the defaults.
type Options struct {
	// AppendWindowMs is the window in which pending appends are coalesced
	// into one activity; default 200.
	AppendWindowMs int64 `json:"appendWindowMs,omitempty"`
	// MaxBatchBytes bounds the encoded size of one Append batch (and of an
	// inline seed or a setup result); default 262144, at most 1048576.
	MaxBatchBytes int `json:"maxBatchBytes,omitempty"`
	// TaskQueue is the task queue of the store activities; default the
	// workflow's own.
	TaskQueue string `json:"taskQueue,omitempty"`
	// HookTaskQueue is the task queue of the hook activities; default the
	// workflow's own.
	HookTaskQueue string `json:"hookTaskQueue,omitempty"`
	// ActivityTimeoutMs is the start-to-close timeout of every activity;
	// default 600000.
	ActivityTimeoutMs int64 `json:"activityTimeoutMs,omitempty"`
	// HeartbeatTimeoutMs is the heartbeat timeout of every activity of the
	// session when set; unset, the store activities take
	// DefaultStoreHeartbeatTimeout and the agent's DefaultHeartbeatTimeout
	// (a cancellation reaches a heartbeating activity within about 80% of it).
	HeartbeatTimeoutMs int64 `json:"heartbeatTimeoutMs,omitempty"`
	// MaxAttempts bounds the attempts of an activity on retryable errors;
	// default 10.
	MaxAttempts int32 `json:"maxAttempts,omitempty"`
	// SearchAttributes makes the workflow keep the SessionPhase search
	// attribute current; set it only when the namespace has sessionflow's
	// search attributes registered (the client checks).
	SearchAttributes bool `json:"searchAttributes,omitempty"`
	// ActivityAppends stores every append with the AppendBatch activity
	// (through the server's task queue) instead of a local activity run by
	// the workflow's own worker (docs/DECISIONS.md D45).
	ActivityAppends bool `json:"activityAppends,omitempty"`
	// ContinueAsNewEvents is the history length (events of the current
	// run) at which a live session continues as new on its own, when the
	// server has not suggested it sooner; default
	// DefaultContinueAsNewEvents, between MinContinueAsNewEvents and
	// MaxContinueAsNewEvents (LIFECYCLE.md §9.4, docs/DECISIONS.md D64).
	ContinueAsNewEvents int `json:"continueAsNewEvents,omitempty"`
}

// CreateSessionRequest is the input of CreateSession (LIFECYCLE.md §4), as
// a client sends it.
type CreateSessionRequest = CreateSessionRequestOf[Event]

// CreateSessionRequestOf is the input of CreateSession with its seed's
// events of type E: Event for a client, session.Event for the workflow,
// which decodes the events strictly. Both encode to the same JSON.
type CreateSessionRequestOf[E any] struct {
	// SessionID is the new session's id (non-empty, valid UTF-8).
	SessionID string `json:"sessionId"`
	// Seed, when not null, is an inline constructor seed (even empty): its
	// events and the end-seed marker are stored at the commit point. It is
	// bounded by Options.MaxBatchBytes.
	Seed []E `json:"seed"`
	// Fork copies a parent's prefix instead of an inline seed.
	Fork *ForkSeed `json:"fork,omitempty"`
	// Meta is the header metadata.
	Meta *SessionMeta `json:"meta,omitempty"`
	// InheritedEventCount is the fork cut of a seeded session.
	InheritedEventCount int64 `json:"inheritedEventCount,omitempty"`
	// AgentOptions are validated after the handle exists (LIFECYCLE.md §4 step 4).
	AgentOptions *AgentOptions `json:"agentOptions,omitempty"`
	// Hooks names the optional hook activities.
	Hooks
	// Options tunes the workflow.
	Options *Options `json:"options,omitempty"`
	// Subagent makes the session a one-shot child of a subagent call
	// (docs/API.md "Subagents"): it runs one turn on the task's prompt,
	// then disposes itself, and its result says how the turn ended.
	Subagent *SubagentTask `json:"subagent,omitempty"`
}

// SubagentTask is the task of a one-shot child session, started by its
// parent's subagent call.
type SubagentTask struct {
	// Prompt is the child's first and only user message.
	Prompt string `json:"prompt"`
	// Label is the call's short description: the subagent/descriptor's
	// label (omitted when empty).
	Label string `json:"label,omitempty"`
	// Provider is the descriptor's provider: "spawn" (a fresh child).
	Provider string `json:"provider"`
	// SandboxMode, when set, is the parent's explicit sandbox mode,
	// stored as the child's sandbox/mode with source "delegation".
	SandboxMode string `json:"sandboxMode,omitempty"`
	// ApprovalPolicy is the child's approval policy, stored with source
	// "delegation": "never" under the harness's delegation rule.
	ApprovalPolicy string `json:"approvalPolicy"`
}

// SubagentEnd is how a one-shot child's turn ended: the parent stores the
// child's answer (or its failure) as the call's result.
type SubagentEnd struct {
	// Turn is the child's turn.
	Turn int64 `json:"turn"`
	// Reason is the turn's end reason.
	Reason TurnEndReason `json:"reason"`
}

// ResumeSessionRequest is the input of ResumeSession (LIFECYCLE.md §5).
type ResumeSessionRequest struct {
	// ResumeSessionID is the stored session to resume.
	ResumeSessionID string `json:"resumeSessionId"`
	// AgentOptions are validated before publication.
	AgentOptions *AgentOptions `json:"agentOptions,omitempty"`
	// Hooks names the optional hook activities.
	Hooks
	// Options tunes the workflow.
	Options *Options `json:"options,omitempty"`
	// ForfeitDeadOwner says whether a lease whose owning workflow Temporal
	// reports closed is forfeited so the resume goes on (dead-owner
	// recovery, docs/API.md). Absent means true; false keeps the refusal
	// SessionAlreadyOwned.
	ForfeitDeadOwner *bool `json:"forfeitDeadOwner,omitempty"`
}

// LifecycleEntry is one published lifecycle event.
type LifecycleEntry struct {
	// Type is session/created, agent/created or agent/session-start.
	Type string `json:"type"`
	// Source is "startup" or "resume" on agent/session-start.
	Source string `json:"source,omitempty"`
}

// SessionInfo is the result of WaitReady: the live session.
type SessionInfo struct {
	// SessionID is the session id.
	SessionID string `json:"sessionId"`
	// WorkflowID and RunID name the owning execution.
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	// Handle is the write handle the workflow owns.
	Handle HandleRef `json:"handle"`
	// Header is the session header.
	Header Header `json:"header"`
	// InheritedEventCount is the fork cut recorded in storage.
	InheritedEventCount int64 `json:"inheritedEventCount"`
	// NextSeq is the seq the next Append must start at.
	NextSeq int64 `json:"nextSeq"`
	// FirstLiveSeq is the seed's length (FORMAT.md §5.4): the seq of the
	// session/end-seed marker when one was stored, else the stored length.
	FirstLiveSeq int64 `json:"firstLiveSeq"`
	// LastTurn is the last stored turn number (0 if none); the next live
	// turn is LastTurn+1.
	LastTurn int64 `json:"lastTurn"`
	// Source is "startup" or "resume".
	Source string `json:"source"`
}

// ErrorInfo is an error as plain data.
type ErrorInfo struct {
	// Message is the error's message.
	Message string `json:"message"`
	// Type is the application error type, if any.
	Type string `json:"type,omitempty"`
}

// CompensationError records a compensation that failed during a rollback;
// the original failure was returned regardless.
type CompensationError struct {
	// Step names the compensation, e.g. "close-handle".
	Step string `json:"step"`
	// Error is what it returned.
	Error ErrorInfo `json:"error"`
}

// Description is the result of the Describe query of a session workflow.
type Description struct {
	// SessionID is the session id.
	SessionID string `json:"sessionId"`
	// Phase is the lifecycle phase.
	Phase Phase `json:"phase"`
	// Source is "startup" or "resume".
	Source string `json:"source"`
	// Handle is the write handle once chosen, nil before.
	Handle *HandleRef `json:"handle,omitempty"`
	// HandleOpen reports whether the workflow holds the handle.
	HandleOpen bool `json:"handleOpen"`
	// NextSeq is the stored cursor.
	NextSeq int64 `json:"nextSeq"`
	// PendingEvents counts accepted appends not yet stored.
	PendingEvents int64 `json:"pendingEvents"`
	// Lifecycle lists the published lifecycle entries in order.
	Lifecycle []LifecycleEntry `json:"lifecycle"`
	// CompensationErrors lists failed compensations, in order.
	CompensationErrors []CompensationError `json:"compensationErrors"`
	// Failure is the creation/resume failure, if any.
	Failure *ErrorInfo `json:"failure,omitempty"`
}

// AbortRequest is the payload of the Abort signal (LIFECYCLE.md §3).
type AbortRequest struct {
	// Reason is the abort reason: an error message when IsError, otherwise
	// the raw reason.
	Reason string `json:"reason"`
	// IsError says the reason is an error, returned as-is (its text and
	// type).
	IsError bool `json:"isError"`
	// Type is the error's type when IsError; default "Error".
	Type string `json:"type,omitempty"`
}

// AppendRequest is the input of the Append update, as a client sends it.
type AppendRequest = AppendRequestOf[Event]

// AppendRequestOf is the input of the Append update with events of type E
// (see CreateSessionRequestOf).
type AppendRequestOf[E any] struct {
	// Events is the batch, contiguous from the session's next seq; with
	// AtEnd, numbered from 0 (each event's seq is its index in the batch).
	Events []E `json:"events"`
	// AtEnd asks the session to store the batch at the end of its log: its
	// events take the seqs after every batch stored or accepted before it,
	// and the result's NextSeq says which (the batch holds the seqs
	// NextSeq-len(Events) to NextSeq-1). Callers that append this way need
	// not agree on seqs, so they may send at once; the batches that reach
	// the session together are stored by one write (docs/API.md, Append).
	// A batch at the end is identified by its update id alone: a call sent
	// again with a new id may store it twice.
	AtEnd bool `json:"atEnd,omitempty"`
}

// AppendResult is the result of the Append update, returned once the batch
// is durably stored.
type AppendResult struct {
	// NextSeq is the seq after the batch's last event: the stored cursor
	// right after the batch, not counting batches of other callers stored
	// with it or after it.
	NextSeq int64 `json:"nextSeq"`
}

// DisposeResult is the result of the Dispose update.
type DisposeResult struct {
	// NextSeq is the stored cursor at disposal.
	NextSeq int64 `json:"nextSeq"`
	// Subagent is how a one-shot child's turn ended (nil for any other
	// session, or a child disposed before its turn ended).
	Subagent *SubagentEnd `json:"subagent,omitempty"`
}

// SetupInput is the input of the setup and commit hooks.
type SetupInput struct {
	// SessionID is the session id.
	SessionID string `json:"sessionId"`
	// Source is "startup" or "resume".
	Source string `json:"source"`
	// Handle is the write handle (the hook may read through a read handle).
	Handle HandleRef `json:"handle"`
	// Header is the session header.
	Header Header `json:"header"`
	// EventCount is the number of events of the session so far (stored
	// plus the not yet stored seed and marker).
	EventCount int64 `json:"eventCount"`
	// StoredCount is the number of events already stored.
	StoredCount int64 `json:"storedCount"`
}

// SetupResult is the output of the setup hook, with plain events.
type SetupResult = SetupResultOf[Event]

// SetupResultOf is the output of the setup hook with events of type E (see
// CreateSessionRequestOf).
type SetupResultOf[E any] struct {
	// Events are appended at the commit point, contiguous from EventCount.
	Events []E `json:"events,omitempty"`
}

// PublishInput is the input of the publish hook.
type PublishInput struct {
	// SessionID is the session id.
	SessionID string `json:"sessionId"`
	// Entry is the lifecycle entry being published.
	Entry LifecycleEntry `json:"entry"`
}

// DisposeInput is the input of the dispose hook.
type DisposeInput struct {
	// SessionID is the session id.
	SessionID string `json:"sessionId"`
	// Reason is "dispose" for a disposal of a live session or "rollback".
	Reason string `json:"reason"`
}

// ReadyNotice is the payload of the SessionReady signal.
type ReadyNotice struct {
	// SessionID is the session that became live.
	SessionID string `json:"sessionId"`
	// RunID is its run.
	RunID string `json:"runId"`
}

// Bounds of Options.MaxBatchBytes: its default, and the largest value a
// session accepts.
const (
	DefaultMaxBatchBytes = 256 << 10
	MaxMaxBatchBytes     = 1 << 20
)

// ForfeitsDeadOwner reports whether the request asks for dead-owner
// recovery: an absent ForfeitDeadOwner means yes.
func (r ResumeSessionRequest) ForfeitsDeadOwner() bool {
	return r.ForfeitDeadOwner == nil || *r.ForfeitDeadOwner
}

// LiveStateHeader is the part of LiveSession's input that a client reads:
// the session header of the state a live session carries across
// continue-as-new (workflows.LiveState, whose other fields are the
// workflow's own).
type LiveStateHeader struct {
	// SessionID is the session id.
	SessionID string `json:"sessionId"`
	// Header is the session header.
	Header Header `json:"header"`
}

// SubagentApprovals is a child session's pending approvals, as its parent
// lists them.
type SubagentApprovals struct {
	// ChildSessionID is the child session.
	ChildSessionID string `json:"childSessionId"`
	// Approvals are its pending approvals (empty once none waits).
	Approvals []PendingApproval `json:"approvals"`
}
