package session

import (
	"encoding/json"
	"slices"

	"github.com/sessionflow/sessionflow/wire"
)

// PermissionFold folds a session's permission events in log order
// (FORMAT.md §10): the last sandbox/mode, approval/policy,
// permission/preset and approval/rules are in effect, as the harness's
// effectiveSandboxMode, effectiveApprovalPolicy and
// effectivePermissionPreset read them; approval/asked and
// approval/decided pair into the approvals still open. An event whose
// data does not decode is skipped, as the harness's folds ignore values
// they do not know. The zero value is an empty fold.
type PermissionFold struct {
	// SandboxMode, ApprovalPolicy and Preset are the last values logged,
	// "" for none.
	SandboxMode    string
	ApprovalPolicy string
	Preset         string
	// Rules are the last approval/rules event's; HasRules reports one.
	Rules    []wire.ApprovalRule
	HasRules bool
	// open are the approvals asked and not decided, by id, in ask order.
	open []OpenApproval
}

// OpenApproval is an approval/asked without its approval/decided.
type OpenApproval struct {
	// Seq is the approval/asked event's.
	Seq int64
	// ID, ToolName, CallID and Reason are its data.
	ID       string
	ToolName string
	CallID   string
	Reason   string
}

// Add folds one event.
func (f *PermissionFold) Add(e Event) {
	switch e.Type {
	case wire.TypeSandboxMode:
		var d struct {
			Mode string `json:"mode"`
		}
		if json.Unmarshal(e.Data, &d) == nil && slices.Contains(wire.SandboxModes, d.Mode) {
			f.SandboxMode = d.Mode
		}
	case wire.TypeApprovalPolicy:
		var d struct {
			Policy string `json:"policy"`
		}
		if json.Unmarshal(e.Data, &d) == nil && slices.Contains(wire.ApprovalPolicies, d.Policy) {
			f.ApprovalPolicy = d.Policy
		}
	case wire.TypePermissionPreset:
		var d struct {
			Preset string `json:"preset"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Preset != "" {
			f.Preset = d.Preset
		}
	case wire.TypeApprovalRules:
		var d struct {
			Rules []wire.ApprovalRule `json:"rules"`
		}
		if json.Unmarshal(e.Data, &d) == nil {
			f.Rules, f.HasRules = d.Rules, true
		}
	case wire.TypeApprovalAsked:
		var d struct {
			ID       string `json:"id"`
			ToolName string `json:"toolName"`
			CallID   string `json:"callId"`
			Reason   string `json:"reason"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.ID != "" {
			f.open = append(f.open, OpenApproval{Seq: e.Seq, ID: d.ID, ToolName: d.ToolName, CallID: d.CallID, Reason: d.Reason})
		}
	case wire.TypeApprovalDecided:
		var d struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(e.Data, &d) == nil {
			f.open = slices.DeleteFunc(f.open, func(o OpenApproval) bool { return o.ID == d.ID })
		}
	case wire.TypeTurnEnd:
		// A turn's end settles its questions: a later turn cannot answer
		// them.
		f.open = nil
	}
}

// Open returns the approvals asked and not decided in the open turn.
func (f *PermissionFold) Open() []OpenApproval {
	return slices.Clone(f.open)
}

// FoldPermissions folds events (PermissionFold.Add each).
func FoldPermissions(events []Event) PermissionFold {
	var f PermissionFold
	for _, e := range events {
		f.Add(e)
	}
	return f
}
