package tool

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sessionflow/sessionflow/wire"
)

// escalationProperties are the JSON Schema properties of a tool that may
// ask to run one call with more rights (Tool.Escalates), as the harness
// advertises them.
const escalationProperties = `"sandbox_permissions": {"type": "string", "enum": ["workspace-write", "danger-full-access"], "description": "The wider sandbox mode this call needs. Only valid as a one-shot retry of a call the sandbox just denied; requires justification and the user's approval."},
    "justification": {"type": "string", "description": "Required with sandbox_permissions: one sentence for the user explaining why this exact call needs the wider access."}`

// widerModes are the modes a call running in the key mode may escalate
// to (the harness's WIDER_MODES).
var widerModes = map[string][]string{
	wire.SandboxReadOnly:       {wire.SandboxWorkspaceWrite, wire.SandboxDangerFullAccess},
	wire.SandboxWorkspaceWrite: {wire.SandboxDangerFullAccess},
}

// GatePolicy is what decides whether a call must be approved: the
// session's sandbox mode ("" is wire.DefaultSandboxMode), its approval
// policy, its allow rules and its cwd.
type GatePolicy struct {
	Mode   string
	Policy string
	Rules  []wire.ApprovalRule
	Cwd    string
}

// Gate is what a call needs before it runs.
type Gate struct {
	// Ask reports that the call must be approved first; Reason is the
	// question's reason (approval/asked).
	Ask    bool
	Reason string
	// Escalation is the sandbox mode an escalating call asks for: once
	// approved, the call runs in it.
	Escalation string
	// Refusal, when set, is the call's result: it is not run and asks
	// nothing (a malformed escalation, or one not wider than the mode).
	Refusal *Result
}

// escalationArgs are the escalation fields of a call's arguments.
type escalationArgs struct {
	SandboxPermissions *string `json:"sandbox_permissions"`
	Justification      *string `json:"justification"`
	Command            *string `json:"command"`
	Path               *string `json:"path"`
}

// Gate reports what the call of tool name with the raw arguments needs
// before it runs under p (docs/API.md "Approvals"):
//
//   - a call asking for a sandbox escalation (sandbox_permissions with a
//     justification, to a mode strictly wider than p.Mode) always asks, as
//     in the harness, whatever the rules;
//   - a malformed escalation, or one not wider than the mode, is refused
//     with the harness's words;
//   - under the ask policy, a call of a tool that asks (Tool.Approval)
//     asks unless an allow rule matches it;
//   - anything else runs.
//
// A tool not registered, or arguments that are not a JSON object, need
// nothing here: running them gives their error result.
func (r *Registry) Gate(name string, raw json.RawMessage, p GatePolicy) Gate {
	t, ok := r.Lookup(name)
	return GateCall(t, ok, raw, p)
}

// GateCall is Registry.Gate for the tool t (known reports that the
// session's tool set has it).
func GateCall(t Tool, known bool, raw json.RawMessage, p GatePolicy) Gate {
	name := t.Name
	if !known {
		return Gate{}
	}
	var a escalationArgs
	if len(strings.TrimSpace(string(raw))) > 0 && json.Unmarshal(raw, &a) != nil {
		return Gate{}
	}
	if t.Escalates && (a.SandboxPermissions != nil || a.Justification != nil) {
		return escalationGate(p.Mode, a)
	}
	if !t.Approval || p.Policy != wire.ApprovalAsk {
		return Gate{}
	}
	for _, rule := range p.Rules {
		if RuleMatches(rule, name, a.Command, a.Path, p.Cwd) {
			return Gate{}
		}
	}
	return Gate{Ask: true, Reason: fmt.Sprintf("%s requires approval in this session", name)}
}

// escalationGate judges an escalation request as the harness's
// approveEscalation does before it asks.
func escalationGate(mode string, a escalationArgs) Gate {
	refuse := func(text string) Gate {
		r := ErrorResult(NameInvalidArguments, CodeInvalidArguments, "Error: "+text)
		return Gate{Refusal: &r}
	}
	switch {
	case a.SandboxPermissions != nil && a.Justification == nil:
		return refuse("invalid escalation: sandbox_permissions requires a justification")
	case a.Justification != nil && a.SandboxPermissions == nil:
		return refuse("invalid escalation: justification is only valid together with sandbox_permissions")
	case strings.TrimSpace(*a.Justification) == "":
		return refuse("invalid justification: expected a non-empty sentence")
	}
	if mode == "" {
		mode = wire.DefaultSandboxMode
	}
	want := *a.SandboxPermissions
	if !slices.Contains(widerModes[mode], want) {
		return refuse(fmt.Sprintf("sandbox escalation to %q is not strictly wider than this call's current %q mode", want, mode))
	}
	return Gate{Ask: true, Escalation: want, Reason: fmt.Sprintf("escalate sandbox to %s: %s", want, *a.Justification)}
}

// RuleMatches reports whether rule allows the call of tool name whose
// arguments hold command and path (nil when absent), in a session whose
// cwd is cwd. A rule with a command prefix matches only a simple command
// (no character of shell syntax beyond words) whose leading words are the
// prefix's; a rule with a path prefix matches only a path at or under it,
// inside the cwd.
func RuleMatches(rule wire.ApprovalRule, name string, command, path *string, cwd string) bool {
	if rule.Tool != name {
		return false
	}
	if rule.CommandPrefix != "" {
		if command == nil || strings.ContainsAny(*command, wire.ShellSyntax) {
			return false
		}
		words, prefix := strings.Fields(*command), strings.Fields(rule.CommandPrefix)
		return len(prefix) > 0 && len(words) >= len(prefix) && slices.Equal(words[:len(prefix)], prefix)
	}
	if rule.PathPrefix != "" {
		if path == nil {
			return false
		}
		rel, ok := insideCwd(*path, cwd)
		if !ok {
			return false
		}
		base, ok := insideCwd(rule.PathPrefix, cwd)
		if !ok {
			return false
		}
		return base == "." || rel == base || strings.HasPrefix(rel, base+"/")
	}
	return true
}

// insideCwd returns p relative to cwd, cleaned, when it stays inside it.
func insideCwd(p, cwd string) (string, bool) {
	if filepath.IsAbs(p) {
		if cwd == "" {
			return "", false
		}
		r, err := filepath.Rel(filepath.Clean(cwd), filepath.Clean(p))
		if err != nil {
			return "", false
		}
		p = r
	}
	p = filepath.ToSlash(filepath.Clean(p))
	if p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") {
		return "", false
	}
	return p, true
}
