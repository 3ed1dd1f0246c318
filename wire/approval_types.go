package wire

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Permissions and approvals of a live session (docs/API.md "Approvals").

// The approval policies of a session (AgentOptions.ApprovalPolicy), as
// the harness names them.
const (
	// ApprovalAsk: a call that needs approval waits for a Decide.
	ApprovalAsk = "ask"
	// ApprovalNever: nothing waits; a sandbox escalation is rejected at
	// once, and the tools that ask under ApprovalAsk run confined.
	ApprovalNever = "never"
)

// DefaultApprovalPolicy is the policy of a session whose agentOptions and
// worker set none.
const DefaultApprovalPolicy = ApprovalNever

// ApprovalPolicies are the valid values of AgentOptions.ApprovalPolicy.
var ApprovalPolicies = []string{ApprovalAsk, ApprovalNever}

// The permission presets: named bundles of a sandbox mode and an approval
// policy, the harness's shipped table (its CLI composition's
// `permission` plugin config), in its order.
const (
	// PresetReadOnly is read-only with approval policy ask.
	PresetReadOnly = "read-only"
	// PresetWorkspaceWrite is workspace-write with approval policy ask.
	PresetWorkspaceWrite = "workspace-write"
	// PresetDangerFullAccess is danger-full-access with approval policy
	// never.
	PresetDangerFullAccess = "danger-full-access"
)

// Presets are the permission presets, in the table's order.
var Presets = []string{PresetReadOnly, PresetWorkspaceWrite, PresetDangerFullAccess}

// PresetBundle returns the sandbox mode and approval policy of preset;
// ok is false for a name not in the table.
func PresetBundle(preset string) (mode, policy string, ok bool) {
	switch preset {
	case PresetReadOnly:
		return SandboxReadOnly, ApprovalAsk, true
	case PresetWorkspaceWrite:
		return SandboxWorkspaceWrite, ApprovalAsk, true
	case PresetDangerFullAccess:
		return SandboxDangerFullAccess, ApprovalNever, true
	}
	return "", "", false
}

// PresetOf returns the first preset of the table whose bundle is (mode,
// policy), "" for none (the harness's "custom").
func PresetOf(mode, policy string) string {
	for _, p := range Presets {
		if m, a, _ := PresetBundle(p); m == mode && a == policy {
			return p
		}
	}
	return ""
}

// The outcomes of an approval (approval/decided), as the harness names
// them.
const (
	OutcomeAllowedOnce = "allowed-once"
	OutcomeRejected    = "rejected"
	OutcomeCancelled   = "cancelled"
	OutcomeUnavailable = "unavailable"
)

// MaxApprovalRules bounds the allow rules of a session.
const MaxApprovalRules = 64

// ApprovalRule lets calls of a tool run without asking, in a session whose
// policy is ask: every call of Tool, or, with CommandPrefix, the
// run_command calls whose command is a simple command (no shell operator,
// substitution or redirection) starting with its words, or, with
// PathPrefix, the calls whose path is at or under it (relative to the
// session's cwd). A sandbox escalation always asks.
type ApprovalRule struct {
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// CommandPrefix is a command's leading words, e.g. "go test".
	CommandPrefix string `json:"commandPrefix,omitempty"`
	// PathPrefix is a path relative to the cwd, e.g. "src".
	PathPrefix string `json:"pathPrefix,omitempty"`
}

// ShellSyntax are the characters of shell syntax beyond plain words:
// operators, substitutions, redirections, quoting, escapes, globs. A
// command holding one matches no command prefix.
const ShellSyntax = ";&|<>$`\\\"'(){}\n\r#*?[]~!"

// Validate checks r: a tool, at most one prefix, a command prefix of
// plain words, a path prefix relative and inside the working directory.
func (r ApprovalRule) Validate() error {
	switch {
	case r.Tool == "":
		return errors.New("an allow rule names no tool")
	case len(r.Tool)+len(r.CommandPrefix)+len(r.PathPrefix) > 1024:
		return errors.New("an allow rule is longer than 1024 bytes")
	case r.CommandPrefix != "" && r.PathPrefix != "":
		return errors.New("an allow rule has both a command prefix and a path prefix")
	case r.CommandPrefix != "" && (strings.ContainsAny(r.CommandPrefix, ShellSyntax) || len(strings.Fields(r.CommandPrefix)) == 0):
		return fmt.Errorf("the command prefix %q is not a run of plain words", r.CommandPrefix)
	case r.PathPrefix != "":
		p := path.Clean(strings.ReplaceAll(r.PathPrefix, "\\", "/"))
		if path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			return fmt.Errorf("the path prefix %q is not a relative path inside the working directory", r.PathPrefix)
		}
	}
	return nil
}

// Permissions are a session's sandbox and approval settings.
type Permissions struct {
	// SandboxMode is one of SandboxModes.
	SandboxMode string `json:"sandboxMode"`
	// NetworkAccess lets commands use the network in confined modes.
	NetworkAccess bool `json:"networkAccess,omitempty"`
	// ApprovalPolicy is one of ApprovalPolicies.
	ApprovalPolicy string `json:"approvalPolicy"`
	// Preset is the permission preset whose bundle the two are, "" for
	// none.
	Preset string `json:"preset,omitempty"`
	// Rules are the allow rules, oldest first.
	Rules []ApprovalRule `json:"rules,omitempty"`
	// ApprovalTimeoutMs, when positive, rejects an approval not decided
	// within it.
	ApprovalTimeoutMs int64 `json:"approvalTimeoutMs,omitempty"`
}

// PendingApproval is a tool call waiting for a Decide.
type PendingApproval struct {
	// ID is the approval's id (approval/asked).
	ID string `json:"id"`
	// CallID and Tool are the call's id and its tool's name.
	CallID string `json:"callId"`
	Tool   string `json:"tool"`
	// Turn and Step are the call's.
	Turn int64 `json:"turn"`
	Step int64 `json:"step"`
	// Reason says why it asks.
	Reason string `json:"reason,omitempty"`
	// Arguments are the call's arguments as the model sent them, cut to
	// MaxApprovalArguments bytes (Truncated is then set).
	Arguments string `json:"arguments"`
	Truncated bool   `json:"truncated,omitempty"`
	// Escalation is the sandbox mode an escalating call asks for, "" for
	// none.
	Escalation string `json:"escalation,omitempty"`
	// AskedAtMs is when it was asked (workflow time, Unix milliseconds);
	// DeadlineMs when it is rejected for want of a decision (0: never).
	AskedAtMs  int64 `json:"askedAtMs"`
	DeadlineMs int64 `json:"deadlineMs,omitempty"`
	// SessionID is set on an approval a child session asks, as its
	// parent's LoopState lists it: the session to send the Decide to.
	SessionID string `json:"sessionId,omitempty"`
}

// MaxApprovalArguments bounds PendingApproval.Arguments.
const MaxApprovalArguments = 4096

// UpdateDecide answers a pending approval (a DecideRequest); it returns a
// DecideResult once the decision is recorded in the workflow, before the
// call runs.
const UpdateDecide = "Decide"

// DecideRequest is the input of the Decide update: the approval by its id
// or by its call's id (either is enough; both must agree), and the outcome.
type DecideRequest struct {
	// ID is the approval's id.
	ID string `json:"id,omitempty"`
	// CallID is the tool call's id.
	CallID string `json:"callId,omitempty"`
	// Outcome is OutcomeAllowedOnce or OutcomeRejected.
	Outcome string `json:"outcome"`
	// Remember, with OutcomeAllowedOnce, adds an allow rule to the
	// session (stored in the log); its Tool must be the call's.
	Remember *ApprovalRule `json:"remember,omitempty"`
}

// DecideResult is what a Decide returns.
type DecideResult struct {
	// ID and CallID name the approval decided.
	ID     string `json:"id"`
	CallID string `json:"callId"`
	// Outcome is the outcome recorded.
	Outcome string `json:"outcome"`
}

// ErrTypeNoSuchApproval is the type of a Decide for an approval the
// session has not asked (or asked before its recent approvals).
const ErrTypeNoSuchApproval = "NoSuchApproval"

// ErrTypeApprovalSettled is the type of a Decide for an approval already
// decided (by a Decide, its timeout or a cancel); its details name the
// outcome that stands.
const ErrTypeApprovalSettled = "ApprovalSettled"

// UpdateSetPermissions changes a live session's permissions between turns
// (a SetPermissionsRequest); it returns the Permissions in effect. Sent
// while a turn runs it is refused with ErrTypeTurnRunning.
const UpdateSetPermissions = "SetPermissions"

// SetPermissionsRequest is the input of SetPermissions: each field set
// replaces the session's value. Preset sets the sandbox mode and the
// approval policy of its bundle; SandboxMode and ApprovalPolicy, when set
// too, must agree with it.
type SetPermissionsRequest struct {
	Preset         string `json:"preset,omitempty"`
	SandboxMode    string `json:"sandboxMode,omitempty"`
	ApprovalPolicy string `json:"approvalPolicy,omitempty"`
	NetworkAccess  *bool  `json:"networkAccess,omitempty"`
	// Rules, when not nil, replace the allow rules (empty: none).
	Rules *[]ApprovalRule `json:"rules,omitempty"`
	// ApprovalTimeoutMs, when not nil, replaces the timeout (0: none).
	ApprovalTimeoutMs *int64 `json:"approvalTimeoutMs,omitempty"`
}
