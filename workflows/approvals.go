package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/wire"
)

// Approvals (docs/API.md "Approvals", LIFECYCLE.md §13.7). A tool call
// that must be approved is stored with its approval/asked by its RunTool
// activity, which then returns; the turn waits in the workflow, with no
// activity running and no timer unless the session has an approval
// timeout, until a Decide update answers it, its timeout rejects it or the
// turn is cancelled. The answer runs RunTool again, which stores
// approval/decided and runs the call or stores its refusal.

// maxSettledApprovals bounds the settled approvals a Decide is told about
// (ApprovalSettled); older ones are NoSuchApproval.
const maxSettledApprovals = 64

// waitingCall is a tool call of the running step waiting for its
// approval.
type waitingCall struct {
	idx      int
	pending  wire.PendingApproval
	decision *agent.ToolDecision
	// dispatched is set once its decision's RunTool was started.
	dispatched bool
}

// approvalInput is the gate a tool call runs under: nil in a run that
// predates approvals (approvalsChange).
func (a *agentLoop) approvalInput() *agent.ToolApproval {
	if !a.gates.taken(a.dctx, approvalsChange) {
		return nil
	}
	return &agent.ToolApproval{Policy: a.perm.ApprovalPolicy, Rules: slices.Clone(a.perm.Rules)}
}

// findWaiting returns the waiting call req names: by id, by call id, or
// both (they must agree); nil when none waits.
func (t *turnRun) findWaiting(id, callID string) *waitingCall {
	for _, w := range t.waiting {
		if w.decision != nil {
			continue
		}
		if (id == "" || w.pending.ID == id) && (callID == "" || w.pending.CallID == callID) {
			return w
		}
	}
	return nil
}

// validateDecide accepts a Decide for an approval the running turn waits
// on, and keeps the request for the handler.
func (a *agentLoop) validateDecide(ctx workflow.Context, in converter.RawValue) error {
	if err := a.phase.admit(); err != nil {
		return err
	}
	var req wire.DecideRequest
	if err := decodeRequest(wire.UpdateDecide, in, &req); err != nil {
		return err
	}
	if req.ID == "" && req.CallID == "" {
		return invalidArgument("Decide: id or callId is required")
	}
	if req.Outcome != wire.OutcomeAllowedOnce && req.Outcome != wire.OutcomeRejected {
		return invalidArgument(fmt.Sprintf("Decide: outcome must be %q or %q, not %q", wire.OutcomeAllowedOnce, wire.OutcomeRejected, req.Outcome))
	}
	w, err := a.waitingFor(req)
	if err != nil {
		return err
	}
	if r := req.Remember; r != nil {
		if req.Outcome != wire.OutcomeAllowedOnce {
			return invalidArgument("Decide: remember goes only with allowed-once")
		}
		if r.Tool != w.pending.Tool {
			return invalidArgument(fmt.Sprintf("Decide: the rule is for tool %q, the call is %q's", r.Tool, w.pending.Tool))
		}
		if err := r.Validate(); err != nil {
			return invalidArgument("Decide: remember: " + err.Error())
		}
		if !slices.Contains(a.perm.Rules, *r) && len(a.perm.Rules) >= wire.MaxApprovalRules {
			return invalidArgument(fmt.Sprintf("Decide: the session holds %d allow rules already", wire.MaxApprovalRules))
		}
	}
	a.decideReqs.keep(ctx, req)
	return nil
}

// waitingFor returns the call waiting on the approval req names, or the
// typed refusal: ApprovalSettled for one decided in this run,
// NoSuchApproval otherwise.
func (a *agentLoop) waitingFor(req wire.DecideRequest) (*waitingCall, error) {
	if t := a.turn; t != nil {
		if w := t.findWaiting(req.ID, req.CallID); w != nil {
			return w, nil
		}
	}
	if p, ok := a.parkedWaiting(req); ok {
		// The turn parked to continue as new: the decision goes with it.
		return &waitingCall{idx: -1, pending: p}, nil
	}
	for i := len(a.settled) - 1; i >= 0; i-- {
		s := a.settled[i]
		if (req.ID == "" || s.ID == req.ID) && (req.CallID == "" || s.CallID == req.CallID) {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("approval %q (call %q) is settled already: %s", s.ID, s.CallID, s.Outcome),
				wire.ErrTypeApprovalSettled, nil, wire.DecideResult{ID: s.ID, CallID: s.CallID, Outcome: s.Outcome})
		}
	}
	return nil, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("no approval %q (call %q) is waiting in this session", req.ID, req.CallID), wire.ErrTypeNoSuchApproval, nil)
}

// handleDecide records the decision and wakes the turn; the call runs
// next.
func (a *agentLoop) handleDecide(ctx workflow.Context, in converter.RawValue) (wire.DecideResult, error) {
	req, err := a.decideReqs.take(ctx, wire.UpdateDecide, in)
	if err != nil {
		return wire.DecideResult{}, err
	}
	w, err := a.waitingFor(req)
	if err != nil {
		return wire.DecideResult{}, err
	}
	d := &agent.ToolDecision{ID: w.pending.ID, Outcome: req.Outcome}
	if r := req.Remember; r != nil && !slices.Contains(a.perm.Rules, *r) {
		a.perm.Rules = append(a.perm.Rules, *r)
		rules := slices.Clone(a.perm.Rules)
		d.Rules = &rules
	}
	if w.idx < 0 {
		a.parked.Decided[w.pending.CallID] = d
		a.settle(w.pending, d.Outcome)
	} else {
		a.turn.decide(w, d)
	}
	return wire.DecideResult{ID: w.pending.ID, CallID: w.pending.CallID, Outcome: req.Outcome}, nil
}

// decide settles w with d and wakes the tool pool.
func (t *turnRun) decide(w *waitingCall, d *agent.ToolDecision) {
	if w.decision != nil {
		return
	}
	w.decision = d
	if _, pre := t.predecided[w.pending.CallID]; !pre {
		t.a.settle(w.pending, d.Outcome)
	}
	t.decideCh.SendAsync(true)
}

// settle remembers a settled approval for the Decides that come late.
func (a *agentLoop) settle(p wire.PendingApproval, outcome string) {
	a.settled = append(a.settled, SettledApproval{ID: p.ID, CallID: p.CallID, Outcome: outcome})
	if n := len(a.settled); n > maxSettledApprovals {
		a.settled = slices.Clone(a.settled[n-maxSettledApprovals:])
	}
}

// pendingApprovals lists the running turn's undecided approvals.
func (a *agentLoop) pendingApprovals() []wire.PendingApproval {
	if a.turn == nil {
		if a.parked != nil {
			return slices.Clone(a.parked.Waiting)
		}
		return nil
	}
	var out []wire.PendingApproval
	for _, w := range a.turn.waiting {
		if w.decision == nil {
			out = append(out, w.pending)
		}
	}
	return out
}

// await makes the call at idx, whose RunTool stored the question asked,
// wait for its decision; with an approval timeout, a timer on ctx rejects
// it when it runs out.
func (t *turnRun) await(ctx workflow.Context, sel workflow.Selector, idx int, step int64, call wire.CallState, asked *agent.AskedApproval) *waitingCall {
	now := workflow.Now(t.a.ctx)
	w := &waitingCall{idx: idx, pending: wire.PendingApproval{
		ID: asked.ID, CallID: call.ID, Tool: call.Name, Turn: t.summary.Turn, Step: step,
		Reason: asked.Reason, Arguments: asked.Arguments, Truncated: asked.Truncated, Escalation: asked.Escalation,
		AskedAtMs: now.UnixMilli(),
	}}
	t.waiting = append(t.waiting, w)
	before, parked := t.asked[call.ID]
	if parked && before.ID == asked.ID {
		// Asked in the run before continue-as-new: its times stand.
		w.pending.AskedAtMs, w.pending.DeadlineMs = before.AskedAtMs, before.DeadlineMs
	}
	if d, ok := t.predecided[call.ID]; ok && d.ID == asked.ID {
		t.decide(w, d)
		return w
	}
	if ms := t.a.perm.ApprovalTimeoutMs; ms > 0 {
		left := ms
		if w.pending.DeadlineMs > 0 {
			left = max(w.pending.DeadlineMs-now.UnixMilli(), 0)
		} else {
			w.pending.DeadlineMs = now.UnixMilli() + ms
		}
		timer := workflow.NewTimer(ctx, time.Duration(left)*time.Millisecond)
		sel.AddFuture(timer, func(f workflow.Future) {
			if f.Get(ctx, nil) == nil && w.decision == nil {
				t.decide(w, &agent.ToolDecision{ID: w.pending.ID, Outcome: wire.OutcomeRejected, TimeoutMs: ms})
			}
		})
	}
	return w
}

// park records the running turn t, parked at step with its model result
// res, for the next run (LiveState.Parked).
func (a *agentLoop) park(t *turnRun, step int64, res agent.ModelResult) {
	p := &ParkedTurn{Summary: t.summary, Step: step, Result: res, Reason: t.reasonSoFar, NoPressure: t.noPressure, Decided: map[string]*agent.ToolDecision{}}
	p.Summary.Claimed = slices.Clone(p.Summary.Claimed)
	for _, w := range t.waiting {
		if !w.dispatched && w.decision == nil {
			p.Waiting = append(p.Waiting, w.pending)
		}
	}
	a.parked = p
}

// parkedWaiting returns the approval req names among the parked turn's.
func (a *agentLoop) parkedWaiting(req wire.DecideRequest) (wire.PendingApproval, bool) {
	if a.parked == nil {
		return wire.PendingApproval{}, false
	}
	for _, w := range a.parked.Waiting {
		if _, done := a.parked.Decided[w.CallID]; done {
			continue
		}
		if (req.ID == "" || w.ID == req.ID) && (req.CallID == "" || w.CallID == req.CallID) {
			return w, true
		}
	}
	return wire.PendingApproval{}, false
}
