package agent

import (
	"encoding/json"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// What a tool call stores before it runs, and whether it runs: its
// tool/call, the approval question and decision (docs/API.md "Approvals").

// toolPlan is what the attempt does after its first store: wait for the
// user (asked), store a result without running the tool (result), or run
// it in mode; created reports that this attempt stored the event the run
// follows (its tool/call, or the approval/decided that allowed it), or is
// the first attempt of the first RunTool of a call the model call
// recorded, so the tool has not run yet.
type toolPlan struct {
	asked   *AskedApproval
	result  *tool.Result
	created bool
	mode    string
}

// gate builds, at seq next, what the call stores before it runs, and sets
// p (docs/API.md "Approvals"):
//
//   - a call not recorded gets its tool/call; when it must be approved,
//     its approval/asked in the same batch (and, under the never policy,
//     approval/decided rejected and no run);
//   - a call the model call recorded (in.Recorded) and not asked about is
//     gated the same way without a tool/call of its own: it runs as a
//     call this attempt recorded on the first attempt (c.first), as a
//     retry after a crash on a later one;
//   - a call waiting for its approval stays so without a decision, and
//     with one gets its approval/decided (and the allow rules the decision
//     added) and runs if allowed;
//   - a call already decided, or recorded without a question, is a retry:
//     it runs as a retry after a crash does.
func (c *toolCall) gate(sc *stepCalls, block wire.ContentBlock, next int64, p *toolPlan) ([]session.Event, error) {
	in := c.in
	now := c.a.nowMs()
	var batch []session.Event
	add := func(e session.Event, err error) error {
		if err == nil {
			batch = append(batch, e)
		}
		return err
	}
	seq := func() int64 { return next + int64(len(batch)) }
	args, _ := argumentsText(block.Arguments)
	g := c.gateOf(block, args, in.Approval)
	p.mode = in.SandboxMode
	_, recorded := sc.callSeq[in.CallID]
	_, asked := sc.asked[in.CallID]
	if !recorded || (in.Recorded && !asked) {
		// A call this attempt records, or one the model call recorded
		// that no RunTool has asked about yet (ToolInput.Recorded): the
		// tool has not run when this attempt stores the tool/call, or is
		// the call's first (c.first, see run); a later attempt of a call
		// the model call recorded may follow a run of the tool, and runs
		// it only as a retry after a crash does. The gate decides alike on
		// every attempt (the call, the input's policy and rules, the
		// session's cwd), so a call that must be asked was never run by
		// an attempt before.
		if !recorded {
			e, err := toolCallEvent(in.Turn, sc.step, block, seq(), now)
			if err := add(e, err); err != nil {
				return nil, err
			}
		}
		first := !recorded || c.first
		switch {
		case in.Approval == nil:
			p.created = first
		case g.Refusal != nil:
			p.result = g.Refusal
		case g.Ask:
			id := approvalID(in.Ref.SessionID, in.Turn, sc.step, in.CallID)
			if err := add(askedEventAt(askedData{ID: id, ToolName: block.Name, CallID: in.CallID, Reason: g.Reason}, seq(), now)); err != nil {
				return nil, err
			}
			if in.Approval.Policy != wire.ApprovalAsk {
				// The never policy: nobody is asked, the harness rejects.
				if err := add(decidedEventAt(id, wire.OutcomeRejected, seq(), now)); err != nil {
					return nil, err
				}
				r := deniedResult(block.Name, g.Escalation, wire.OutcomeRejected, 0)
				p.result = &r
				break
			}
			text, cut := cutArguments(args)
			p.asked = &AskedApproval{ID: id, Reason: g.Reason, Escalation: g.Escalation, Arguments: text, Truncated: cut}
		default:
			p.created = first
		}
		return batch, nil
	}
	ask, asked := sc.asked[in.CallID]
	if !asked {
		// Recorded without a question: a retry after a crash.
		return nil, nil
	}
	if g.Escalation != "" {
		p.mode = g.Escalation
	}
	var d *ToolDecision
	if in.Approval != nil {
		d = in.Approval.Decision
	}
	if d != nil && d.ID != ask.ID {
		return nil, invalidLog("tool call %q: the decision is for approval %q, the log asked %q", in.CallID, d.ID, ask.ID)
	}
	outcome, decided := sc.decided[ask.ID]
	if !decided {
		if d == nil {
			text, cut := cutArguments(args)
			p.asked = &AskedApproval{ID: ask.ID, Reason: ask.Reason, Escalation: g.Escalation, Arguments: text, Truncated: cut}
			return nil, nil
		}
		if err := add(decidedEventAt(ask.ID, d.Outcome, seq(), now)); err != nil {
			return nil, err
		}
		if d.Rules != nil {
			if err := add(rulesEventAt(*d.Rules, seq(), now)); err != nil {
				return nil, err
			}
		}
		outcome, p.created = d.Outcome, true
	}
	if outcome != wire.OutcomeAllowedOnce {
		var timeout int64
		if d != nil {
			timeout = d.TimeoutMs
		}
		r := deniedResult(block.Name, g.Escalation, outcome, timeout)
		p.result, p.created = &r, false
	}
	return batch, nil
}

// gateOf is the gate of the call under a: what it needs before it runs
// (tool.Registry.Gate); the zero Gate without a registry or approvals.
func (c *toolCall) gateOf(block wire.ContentBlock, args string, a *ToolApproval) tool.Gate {
	if a == nil || c.a.Tools == nil {
		return tool.Gate{}
	}
	t, known := c.a.Tools.Lookup(block.Name)
	return tool.GateCall(t, known, json.RawMessage(args), tool.GatePolicy{
		Mode: c.in.SandboxMode, Policy: a.Policy, Rules: a.Rules, Cwd: c.cwd,
	})
}
