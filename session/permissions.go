package session

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/sessionflow/sessionflow/wire"
)

// PermissionFold folds a session's permission events in log order
// (FORMAT.md §10): the last sandbox/mode, approval/policy,
// permission/preset and approval/rules are in effect, as the harness's
// effectiveSandboxMode, effectiveApprovalPolicy and
// effectivePermissionPreset read them; approval/asked and
// approval/decided pair into the approvals still open. The zero value is
// an empty fold.
//
// The last event of a knob is in effect whatever it holds: like the
// harness's folds, the fold never reaches back to an earlier event past
// one whose value it does not know (which would keep a wider mode than
// the log's last word). SandboxMode, ApprovalPolicy and Preset hold that
// event's value as logged: a non-empty string verbatim, "" when the field
// is absent or null (the harness's folds give undefined or null, and its
// services the default), and any other value (the empty string, a
// number, an object, ...) as its JSON text. So a value the vocabulary
// does not name stays one (wire.SandboxModes and wire.ApprovalPolicies
// tell), for the consumer to refuse; the harness's own invariants refuse
// such a log.
//
// A copy of a fold is a fold of its own: folding on in one leaves the
// other as it was.
type PermissionFold struct {
	// SandboxMode, ApprovalPolicy and Preset are the last values logged,
	// "" for none.
	SandboxMode    string
	ApprovalPolicy string
	Preset         string
	// Rules are the last approval/rules event's; HasRules reports one.
	// An approval/rules event whose data does not decode is in effect
	// too, with no rules: it allows nothing.
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
		f.SandboxMode = knobValue(e.Data, "mode")
	case wire.TypeApprovalPolicy:
		f.ApprovalPolicy = knobValue(e.Data, "policy")
	case wire.TypePermissionPreset:
		f.Preset = knobValue(e.Data, "preset")
	case wire.TypeApprovalRules:
		var d struct {
			Rules []wire.ApprovalRule `json:"rules"`
		}
		if json.Unmarshal(e.Data, &d) != nil {
			d.Rules = nil
		}
		f.Rules, f.HasRules = d.Rules, true
	case wire.TypeApprovalAsked:
		d := dataFields(e.Data)
		id, ok := jsonString(d["id"])
		if !ok {
			// An id that is not a string: no Decide could name it.
			return
		}
		a := OpenApproval{Seq: e.Seq, ID: id}
		a.ToolName, _ = jsonString(d["toolName"])
		a.CallID, _ = jsonString(d["callId"])
		a.Reason, _ = jsonString(d["reason"])
		// An id asked again while open (which the harness refuses) keeps
		// its place with the later ask's data, as the harness's pending
		// set keeps the id once. The slice is never written in place: a
		// copy of the fold may share it.
		open := slices.Clone(f.open)
		if i := slices.IndexFunc(open, func(o OpenApproval) bool { return o.ID == id }); i >= 0 {
			open[i] = a
		} else {
			open = append(open, a)
		}
		f.open = open
	case wire.TypeApprovalDecided:
		if id, ok := jsonString(dataFields(e.Data)["id"]); ok && slices.ContainsFunc(f.open, func(o OpenApproval) bool { return o.ID == id }) {
			f.open = slices.DeleteFunc(slices.Clone(f.open), func(o OpenApproval) bool { return o.ID == id })
		}
	case wire.TypeTurnEnd:
		// A turn's end settles its questions: the harness asks and
		// decides inside one call of its turn, so an ask a turn/end
		// follows without its decision is a crash's remnant that no later
		// turn answers.
		f.open = nil
	}
}

// knobValue is the value of a knob event's field as PermissionFold holds
// it: a non-empty string verbatim, "" when absent or null, any other
// value as its JSON text.
func knobValue(data json.RawMessage, field string) string {
	raw, ok := dataFields(data)[field]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	if s, ok := jsonString(raw); ok && s != "" {
		return s
	}
	return string(raw)
}

// dataFields splits an event's data into its members, by their exact
// names (nil when it is not an object).
func dataFields(data json.RawMessage) map[string]json.RawMessage {
	var d map[string]json.RawMessage
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	return d
}

// jsonString decodes a JSON string; ok is false for any other value or
// none.
func jsonString(raw json.RawMessage) (s string, ok bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
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
