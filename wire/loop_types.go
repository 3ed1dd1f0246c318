package wire

// AgentConfig is one configured agent of a SessionLoop (LIFECYCLE.md §11.3).
type AgentConfig struct {
	// ID is the agent's configuration id.
	ID string `json:"id"`
	// SessionID asks for restore-or-create of this session id.
	SessionID string `json:"sessionId,omitempty"`
	// ResumeSessionID asks for a resume of this session id.
	ResumeSessionID string `json:"resumeSessionId,omitempty"`
	// Cwd is the working directory of a created session.
	Cwd string `json:"cwd,omitempty"`
	// Provider, Model, ReasoningEffort and MaxTokens are agent options.
	Provider        string   `json:"provider,omitempty"`
	Model           string   `json:"model,omitempty"`
	ReasoningEffort string   `json:"reasoningEffort,omitempty"`
	MaxTokens       *float64 `json:"maxTokens,omitempty"`
	// SandboxMode, NetworkAccess, ApprovalPolicy, Preset, ApprovalRules
	// and ApprovalTimeoutMs are the agent's permission options, as
	// AgentOptions' (docs/API.md "Approvals" and "Sandbox"), validated at
	// loop start.
	SandboxMode       string         `json:"sandboxMode,omitempty"`
	NetworkAccess     bool           `json:"networkAccess,omitempty"`
	ApprovalPolicy    string         `json:"approvalPolicy,omitempty"`
	Preset            string         `json:"preset,omitempty"`
	ApprovalRules     []ApprovalRule `json:"approvalRules,omitempty"`
	ApprovalTimeoutMs *float64       `json:"approvalTimeoutMs,omitempty"`
}

// HasPermissions reports whether c sets a permission option.
func (c AgentConfig) HasPermissions() bool {
	return c.SandboxMode != "" || c.NetworkAccess || c.ApprovalPolicy != "" || c.Preset != "" || c.ApprovalRules != nil || c.ApprovalTimeoutMs != nil
}

// AgentIdentity is a launcher-supplied identity that replaces both identity
// keys of a configured agent.
type AgentIdentity struct {
	// ID is the session id.
	ID string `json:"id"`
	// Resume makes it a resumeSessionId (else a sessionId).
	Resume bool `json:"resume"`
}

// SessionLoopInput is the input of SessionLoop.
type SessionLoopInput struct {
	// Agents are the configured agents, started at loop start.
	Agents []AgentConfig `json:"agents,omitempty"`
	// MaxParallelToolCalls, when present, must be a positive integer.
	MaxParallelToolCalls *float64 `json:"maxParallelToolCalls,omitempty"`
	// ConfiguredAgentIdentities maps a config id to its identity.
	ConfiguredAgentIdentities map[string]AgentIdentity `json:"configuredAgentIdentities,omitempty"`
	// Hooks are the hook activities of the configured sessions.
	Hooks Hooks `json:"hooks"`
	// Options tune the configured sessions.
	Options *Options `json:"options,omitempty"`
	// SessionTaskQueue is the task queue of the session workflows; default
	// the loop's own.
	SessionTaskQueue string `json:"sessionTaskQueue,omitempty"`
}

// StartRequest is the input of the loop's Start update, as a client sends
// it.
type StartRequest = StartRequestOf[Event]

// StartRequestOf is the input of the loop's Start update, exactly one of
// Create and Resume, with events of type E (see CreateSessionRequestOf).
type StartRequestOf[E any] struct {
	// Create starts a CreateSession child.
	Create *CreateSessionRequestOf[E] `json:"create,omitempty"`
	// Resume starts a ResumeSession child.
	Resume *ResumeSessionRequest `json:"resume,omitempty"`
}

// StartResult is the result of the Start update: the started child, whose
// WaitReady the caller awaits.
type StartResult struct {
	// SessionID is the started session.
	SessionID string `json:"sessionId"`
	// WorkflowID and RunID name its execution.
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
}

// ChildState is the loop's view of a child session.
type ChildState string

// Child states.
const (
	ChildStarting ChildState = "starting"
	ChildLive     ChildState = "live"
	ChildSettled  ChildState = "settled"
)

// LoopChild is one child session of a SessionLoop.
type LoopChild struct {
	// SessionID is the session id.
	SessionID string `json:"sessionId"`
	// Mode is "create" or "resume", the mode of the start (the same word
	// as ConfigStartFailure.Mode). Its JSON is written under "mode" and,
	// for readers of the earlier name, under "kind" too; either is read.
	Mode string `json:"mode"`
	// ConfigID is the configured agent that started it, if any.
	ConfigID string `json:"configId,omitempty"`
	// WorkflowID and RunID name the child execution.
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId,omitempty"`
	// State is starting, live or settled.
	State ChildState `json:"state"`
	// WasLive reports whether the child became live.
	WasLive bool `json:"wasLive"`
	// Error is the child's failure once settled, if it failed.
	Error *ErrorInfo `json:"error,omitempty"`
}

// ConfigStartFailure is an agent-loop/config-start-failed entry.
type ConfigStartFailure struct {
	// ConfigID is the configured agent.
	ConfigID string `json:"configId"`
	// SessionID is the session it tried to start.
	SessionID string `json:"sessionId"`
	// Mode is "restore", "resume" or "create".
	Mode string `json:"mode"`
	// Error is the original error.
	Error ErrorInfo `json:"error"`
}

// LoopDescription is the Describe query result and the final result of a
// SessionLoop.
type LoopDescription struct {
	// Active is false once the loop is deactivating.
	Active bool `json:"active"`
	// Children lists every child in start order.
	Children []LoopChild `json:"children"`
	// Effects lists the owner-scope effects: agentLoop.lifecycle(<id>) for
	// every live child.
	Effects []string `json:"effects"`
	// ConfigStartFailures lists the config-start-failed entries in order.
	ConfigStartFailures []ConfigStartFailure `json:"configStartFailures"`
}
