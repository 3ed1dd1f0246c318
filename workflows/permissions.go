package workflows

// A session's permissions (docs/API.md "Sandbox", "Approvals"): their
// resolution at create and resume, the facts pinned in the log, the
// validation of the permission options, and the SetPermissions update.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// permissions are a session's resolved permissions (the agent loop's,
// set at create and resume, carried across continue-as-new).
func (a *agentLoop) permissions() wire.Permissions {
	p := a.perm
	p.Rules = slices.Clone(p.Rules)
	return p
}

// resolvePermissions returns the permissions of a session whose agent
// options are o and whose log records logged (nil: none), on a worker
// whose permission defaults are defaults (nil: none), and the events that
// pin what the options and the defaults change in the log:
// permission/preset, sandbox/mode, approval/policy and approval/rules,
// each only when it differs from the log's (a session whose options set
// none, on a worker with no defaults, writes none).
//
// Each knob is the options', else the log's, else the worker's default,
// else the built-in default: the log's facts win over the worker's, as the
// harness's folds win over its configured defaults. A worker default that
// fills a knob is pinned, as the harness pins a fresh session's
// composition defaults, so the session keeps it on any worker.
//
// presetOf names the preset of a bundle (agentLoop.presetOf).
func resolvePermissions(o *wire.AgentOptions, logged *activities.LoggedPermissions, defaults *activities.PermissionDefaults, presetOf func(mode, policy string) string) (wire.Permissions, []pinEvent) {
	var l activities.LoggedPermissions
	if logged != nil {
		l = *logged
	}
	p := wire.Permissions{SandboxMode: l.SandboxMode, ApprovalPolicy: l.ApprovalPolicy}
	if l.Rules != nil {
		p.Rules = slices.Clone(*l.Rules)
	}
	var explicit bool
	if d := defaults; d != nil {
		if p.SandboxMode == "" && d.SandboxMode != "" {
			p.SandboxMode, explicit = d.SandboxMode, true
		}
		if p.ApprovalPolicy == "" && d.ApprovalPolicy != "" {
			p.ApprovalPolicy, explicit = d.ApprovalPolicy, true
		}
	}
	if o != nil {
		if m, a, ok := wire.PresetBundle(o.Preset); ok {
			p.SandboxMode, p.ApprovalPolicy, explicit = m, a, true
		}
		if o.SandboxMode != "" {
			p.SandboxMode, explicit = o.SandboxMode, true
		}
		if o.ApprovalPolicy != "" {
			p.ApprovalPolicy, explicit = o.ApprovalPolicy, true
		}
		if o.ApprovalRules != nil {
			p.Rules = slices.Clone(o.ApprovalRules)
		}
		p.NetworkAccess = o.NetworkAccess
		if o.ApprovalTimeoutMs != nil {
			p.ApprovalTimeoutMs = int64(*o.ApprovalTimeoutMs)
		}
	}
	if p.SandboxMode == "" {
		p.SandboxMode = wire.DefaultSandboxMode
	}
	if p.ApprovalPolicy == "" {
		p.ApprovalPolicy = wire.DefaultApprovalPolicy
	}
	p.Preset = presetOf(p.SandboxMode, p.ApprovalPolicy)
	var pins []pinEvent
	if explicit {
		if p.Preset != "" && p.Preset != l.Preset {
			pins = append(pins, pinEvent{wire.TypePermissionPreset, map[string]string{"preset": p.Preset}})
		}
		if p.SandboxMode != l.SandboxMode {
			pins = append(pins, pinEvent{wire.TypeSandboxMode, map[string]string{"mode": p.SandboxMode}})
		}
		if p.ApprovalPolicy != l.ApprovalPolicy {
			pins = append(pins, pinEvent{wire.TypeApprovalPolicy, map[string]string{"policy": p.ApprovalPolicy}})
		}
	}
	if o != nil && o.ApprovalRules != nil && (l.Rules == nil || !slices.Equal(*l.Rules, o.ApprovalRules)) {
		pins = append(pins, pinEvent{typ: wire.TypeApprovalRules, data: rulesData(p.Rules)})
	}
	return p, pins
}

// pinEvent is a permission fact to store.
type pinEvent struct {
	typ  string
	data any
}

// rulesData is approval/rules' data.
func rulesData(rules []wire.ApprovalRule) any {
	if rules == nil {
		rules = []wire.ApprovalRule{}
	}
	return struct {
		Rules []wire.ApprovalRule `json:"rules"`
	}{rules}
}

// pinEvents builds pins at seq next, at time now.
func pinEvents(pins []pinEvent, next, now int64) ([]session.Event, error) {
	var out []session.Event
	for _, p := range pins {
		e, err := session.NewEvent(p.typ, next+int64(len(out)), now, p.data)
		if err != nil {
			return nil, err
		}
		e.Ignorable = p.typ == wire.TypeApprovalRules
		out = append(out, e)
	}
	return out, nil
}

// validatePermissionOptions checks the permission fields of agent
// options.
func validatePermissionOptions(o *wire.AgentOptions) error {
	if o == nil {
		return nil
	}
	if o.ApprovalPolicy != "" && !slices.Contains(wire.ApprovalPolicies, o.ApprovalPolicy) {
		return temporal.NewNonRetryableApplicationError(ApprovalPolicyText, wire.ErrTypeTypeError, nil)
	}
	if o.Preset != "" {
		m, a, ok := wire.PresetBundle(o.Preset)
		if !ok {
			return temporal.NewNonRetryableApplicationError(PresetText, wire.ErrTypeTypeError, nil)
		}
		if (o.SandboxMode != "" && o.SandboxMode != m) || (o.ApprovalPolicy != "" && o.ApprovalPolicy != a) {
			return temporal.NewNonRetryableApplicationError(PresetConflictText, wire.ErrTypeTypeError, nil)
		}
	}
	if o.SubagentApprovalPolicy != "" && !slices.Contains(wire.ApprovalPolicies, o.SubagentApprovalPolicy) {
		return temporal.NewNonRetryableApplicationError(SubagentApprovalPolicyText, wire.ErrTypeTypeError, nil)
	}
	if v := o.ApprovalTimeoutMs; v != nil && (*v < 1 || *v > wire.MaxSafeInteger || *v != float64(int64(*v))) {
		return temporal.NewNonRetryableApplicationError(ApprovalTimeoutText, wire.ErrTypeTypeError, nil)
	}
	if len(o.ApprovalRules) > wire.MaxApprovalRules {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("agentOptions.approvalRules holds more than %d rules", wire.MaxApprovalRules), wire.ErrTypeTypeError, nil)
	}
	for _, r := range o.ApprovalRules {
		if err := r.Validate(); err != nil {
			return temporal.NewNonRetryableApplicationError("agentOptions.approvalRules: "+err.Error(), wire.ErrTypeTypeError, nil)
		}
	}
	return nil
}

// SubagentApprovalPolicyText is the refusal of an unknown
// agentOptions.subagentApprovalPolicy.
const SubagentApprovalPolicyText = `agentOptions.subagentApprovalPolicy must be "ask" or "never"`

// Texts of the permission options' refusals.
const (
	ApprovalPolicyText = `agentOptions.approvalPolicy must be "ask" or "never"`
	PresetText         = `agentOptions.preset must be "read-only", "workspace-write" or "danger-full-access"`
	// PresetTextBefore is PresetText of the runs before the read-only
	// preset (readOnlyPresetChange).
	PresetTextBefore    = `agentOptions.preset must be "workspace-write" or "danger-full-access"`
	PresetConflictText  = "agentOptions.sandboxMode and approvalPolicy must agree with agentOptions.preset"
	ApprovalTimeoutText = "agentOptions.approvalTimeoutMs must be a positive safe integer"
)

// validateSetPermissions accepts a SetPermissions of a live session with
// no turn running, and keeps the request for the handler.
func (a *agentLoop) validateSetPermissions(ctx workflow.Context, in converter.RawValue) error {
	if err := a.phase.admit(); err != nil {
		return err
	}
	var req wire.SetPermissionsRequest
	if err := decodeRequest(wire.UpdateSetPermissions, in, &req); err != nil {
		return err
	}
	if a.turn != nil || a.compacting != nil {
		return temporal.NewNonRetryableApplicationError("SetPermissions: a turn is running; permissions change between turns", wire.ErrTypeTurnRunning, nil)
	}
	// A validator records no command: the preset is named without the
	// gate (the permissions are not kept).
	if _, err := a.applyPermissions(req, wire.PresetOf); err != nil {
		return err
	}
	a.permReqs.keep(ctx, req)
	return nil
}

// applyPermissions returns the permissions req makes of the session's;
// presetOf names their preset.
func (a *agentLoop) applyPermissions(req wire.SetPermissionsRequest, presetOf func(mode, policy string) string) (wire.Permissions, error) {
	p := a.permissions()
	if req.Preset != "" {
		m, pol, ok := wire.PresetBundle(req.Preset)
		if !ok {
			return p, invalidArgument(fmt.Sprintf("SetPermissions: unknown preset %q (known: %s)", req.Preset, strings.Join(wire.Presets, ", ")))
		}
		if (req.SandboxMode != "" && req.SandboxMode != m) || (req.ApprovalPolicy != "" && req.ApprovalPolicy != pol) {
			return p, invalidArgument("SetPermissions: sandboxMode and approvalPolicy must agree with the preset")
		}
		p.SandboxMode, p.ApprovalPolicy = m, pol
	}
	if req.SandboxMode != "" {
		if !slices.Contains(wire.SandboxModes, req.SandboxMode) {
			return p, invalidArgument(fmt.Sprintf("SetPermissions: unknown sandbox mode %q", req.SandboxMode))
		}
		p.SandboxMode = req.SandboxMode
	}
	if req.ApprovalPolicy != "" {
		if !slices.Contains(wire.ApprovalPolicies, req.ApprovalPolicy) {
			return p, invalidArgument(fmt.Sprintf("SetPermissions: unknown approval policy %q", req.ApprovalPolicy))
		}
		p.ApprovalPolicy = req.ApprovalPolicy
	}
	if req.NetworkAccess != nil {
		p.NetworkAccess = *req.NetworkAccess
	}
	if req.Rules != nil {
		if len(*req.Rules) > wire.MaxApprovalRules {
			return p, invalidArgument(fmt.Sprintf("SetPermissions: more than %d allow rules", wire.MaxApprovalRules))
		}
		for _, r := range *req.Rules {
			if err := r.Validate(); err != nil {
				return p, invalidArgument("SetPermissions: " + err.Error())
			}
		}
		p.Rules = slices.Clone(*req.Rules)
	}
	if req.ApprovalTimeoutMs != nil {
		if v := *req.ApprovalTimeoutMs; v < 0 || v > wire.MaxSafeInteger {
			return p, invalidArgument("SetPermissions: approvalTimeoutMs must be a non-negative safe integer")
		}
		p.ApprovalTimeoutMs = *req.ApprovalTimeoutMs
	}
	p.Preset = presetOf(p.SandboxMode, p.ApprovalPolicy)
	return p, nil
}

// presetOf returns the preset of the bundle (mode, policy): wire.PresetOf,
// but none for the read-only preset's bundle in a run that predates it
// (readOnlyPresetChange, asked only for that bundle).
func (a *agentLoop) presetOf(mode, policy string) string {
	p := wire.PresetOf(mode, policy)
	if p == wire.PresetReadOnly && !a.gates.taken(a.dctx, readOnlyPresetChange) {
		return ""
	}
	return p
}

// admitPreset refuses, in a run that predates the read-only preset
// (readOnlyPresetChange, asked only then), agent options naming it, as
// those runs did.
func (a *agentLoop) admitPreset(o *wire.AgentOptions) error {
	if o != nil && o.Preset == wire.PresetReadOnly && !a.gates.taken(a.dctx, readOnlyPresetChange) {
		return temporal.NewNonRetryableApplicationError(PresetTextBefore, wire.ErrTypeTypeError, nil)
	}
	return nil
}

// handleSetPermissions stores the facts that change (permission/preset,
// sandbox/mode, approval/policy, approval/rules) as an append between
// turns and returns the permissions in effect.
func (a *agentLoop) handleSetPermissions(ctx workflow.Context, in converter.RawValue) (wire.Permissions, error) {
	req, err := a.permReqs.take(ctx, wire.UpdateSetPermissions, in)
	if err != nil {
		return wire.Permissions{}, err
	}
	if a.turn != nil || a.compacting != nil {
		return wire.Permissions{}, temporal.NewNonRetryableApplicationError("SetPermissions: a turn is running; permissions change between turns", wire.ErrTypeTurnRunning, nil)
	}
	if !a.agentTurns() {
		return wire.Permissions{}, invalidArgument("SetPermissions: this run predates the agent loop")
	}
	old := a.permissions()
	p, err := a.applyPermissions(req, a.presetOf)
	if err != nil {
		return wire.Permissions{}, err
	}
	var pins []pinEvent
	if p.Preset != "" && p.Preset != old.Preset {
		pins = append(pins, pinEvent{wire.TypePermissionPreset, map[string]string{"preset": p.Preset}})
	}
	if p.SandboxMode != old.SandboxMode {
		pins = append(pins, pinEvent{wire.TypeSandboxMode, map[string]string{"mode": p.SandboxMode}})
	}
	var notice *PendingInput
	if p.ApprovalPolicy != old.ApprovalPolicy {
		pins = append(pins, pinEvent{wire.TypeApprovalPolicy, map[string]string{"policy": p.ApprovalPolicy}})
		if a.gates.taken(a.dctx, policyNoticeChange) {
			n, err := policyNotice(old.ApprovalPolicy, p.ApprovalPolicy, workflow.GetCurrentUpdateInfo(ctx).ID)
			if err != nil {
				return wire.Permissions{}, invalidArgument(err.Error())
			}
			notice = &n
			pins = append(pins, pinEvent{wire.TypeInboxSpliced, session.InboxSplice{
				Target:   wire.TargetNextStep,
				Start:    int64(a.inbox.storedNextStep()),
				Inserted: []json.RawMessage{n.Message},
			}})
		}
	}
	if req.Rules != nil && !slices.Equal(p.Rules, old.Rules) {
		pins = append(pins, pinEvent{typ: wire.TypeApprovalRules, data: rulesData(p.Rules)})
	}
	a.perm = p
	if len(pins) == 0 {
		return a.permissions(), nil
	}
	events, err := pinEvents(pins, a.appends.accepted(), workflow.Now(ctx).UnixMilli())
	if err != nil {
		a.perm = old
		return wire.Permissions{}, invalidArgument(err.Error())
	}
	if notice != nil {
		// Injected as the harness's setPolicy injects it: for the next
		// step, waking nothing, stored with the policy.
		a.inbox.queue(*notice, wire.TargetNextStep, false)
	}
	if _, err := a.appends.append(ctx, AppendRequest{Events: events}); err != nil {
		a.perm = old
		if notice != nil {
			a.inbox.unqueue(notice.ID)
		}
		return wire.Permissions{}, err
	}
	return a.permissions(), nil
}

// policyNoticeNamespace names the ids of the approval policy notices
// (uuid.NewSHA1 of the SetPermissions update's id).
var policyNoticeNamespace = uuid.MustParse("5b0d5f0e-7a53-4f55-9a55-0c6b8f1c2d31")

// policyNotice is the message the harness's ApprovalService.setPolicy
// injects when a user changes the approval policy from previous to policy:
// a stored next-step input whose id is derived from the update's id, so a
// replay builds the same.
func policyNotice(previous, policy, updateID string) (PendingInput, error) {
	content, err := session.MarshalData([]wire.TextContent{{Type: wire.BlockText,
		Text: fmt.Sprintf("The approval policy changed from %q to %q (changed by the user).", previous, policy)}})
	if err != nil {
		return PendingInput{}, err
	}
	id := uuid.NewSHA1(policyNoticeNamespace, []byte(updateID)).String()
	msg, err := session.MarshalData(userMessage{ID: id, Role: wire.RoleUser, Content: content,
		Source: json.RawMessage(`{"kind":"plugin","plugin":"user-approval"}`)})
	if err != nil {
		return PendingInput{}, err
	}
	return PendingInput{ID: id, Message: msg, Stored: true}, nil
}
