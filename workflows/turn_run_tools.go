package workflows

// The tool calls of a step: their activity options and their run.

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/wire"
)

// toolCtx returns ctx with the tool activities' options. They run in a
// context of their own, disconnected from the turn's: a tool activity
// failure does not cancel the others. A cancelled turn cancels its running
// calls (runTools, D71): they heartbeat, so the cancellation reaches them,
// and wait-for-cancellation lets each store its ABORTED result before the
// turn ends. The options are not part of the command sequence.
func (s settings) toolCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           s.taskQueue,
		StartToCloseTimeout: s.timeout,
		HeartbeatTimeout:    s.heartbeat,
		WaitForCancellation: true,
		RetryPolicy:         s.retry(),
	})
}

// toolsOutcome is how a step's tool calls ended.
type toolsOutcome struct {
	// parked: every call left waits for its approval and the run is due
	// to continue as new (approvalParkChange).
	parked  bool
	aborted bool
	skipped []string
	err     error
	// opened is the step a call's activity reported the log holds opened
	// after the calls' step (agent.ToolOutcome.Opened), 0 for none.
	opened int64
}

// runTools runs the step's tool calls in model order: an exclusive call
// (not parallel-safe) runs alone, once every earlier call has finished;
// consecutive parallel-safe calls run in a rolling pool of
// maxParallelToolCalls. A cancel stops dispatching and cancels the started
// calls (before the cancel-running-tools version they ran to their end);
// they drain, each storing its result (ABORTED when the tool was stopped),
// and the undispatched ones are returned as skipped. A failed tool
// activity (its store failed) stops dispatching too; the started calls
// drain, the undispatched ones are returned as skipped and the step fails
// with that error.
//
// With openNext, each RunTool is asked to open the next step with the
// step's last result (agent.ToolInput.OpenNext).
func (t *turnRun) runTools(step int64, res agent.ModelResult, openNext bool) toolsOutcome {
	a := t.a
	calls := res.ToolCalls
	limit := maxParallelToolCalls(a.agentOptions)
	var out toolsOutcome
	aborted := t.cause != ""
	sel := workflow.NewSelector(a.dctx)
	next, inFlight, exclusive := 0, 0, false
	callsCtx, cancelCalls := workflow.WithCancel(a.dctx)
	defer cancelCalls()
	cancelled := false
	t.waiting = nil
	defer func() {
		if !out.parked {
			t.waiting = nil
		}
	}()
	// release stops the waits for approvals: the turn's end settles the
	// calls still waiting cancelled (EndTurn).
	release := func() {
		for _, w := range t.waiting {
			if w.dispatched {
				continue
			}
			w.dispatched = true
			inFlight--
			if !calls[w.idx].Parallel {
				exclusive = false
			}
			t.calls[w.idx].State = wire.CallSkipped
			if w.decision == nil {
				w.decision = &agent.ToolDecision{ID: w.pending.ID, Outcome: wire.OutcomeCancelled}
				a.settle(w.pending, wire.OutcomeCancelled)
			}
		}
	}
	sel.AddReceive(t.cancelCh, func(c workflow.ReceiveChannel, _ bool) {
		c.ReceiveAsync(nil)
		aborted = true
		for i := range t.calls {
			if t.calls[i].State == wire.CallPending {
				t.calls[i].State = wire.CallSkipped
			}
		}
		release()
		if inFlight > 0 && a.gates.taken(a.dctx, toolCancelChange) {
			cancelled = true
			cancelCalls()
		}
	})
	ctx := t.span.Context(a.set.toolCtx(callsCtx))
	t.calls = make([]wire.CallState, len(calls))
	for i, c := range calls {
		t.calls[i] = wire.CallState{ID: c.ID, Name: c.Name, Index: i, State: wire.CallPending}
	}
	// dispatch starts the RunTool of the call at idx, with decision d
	// once it was asked; the call holds its place in the pool (inFlight,
	// exclusive) from its first dispatch to its result.
	dispatch := func(idx int, d *agent.ToolDecision) {
		c := calls[idx]
		in := agent.ToolInput{
			Ref: *a.log.ref, Turn: t.summary.Turn, Step: step, MessageSeq: res.MessageSeq,
			CallID: c.ID, Name: c.Name, Index: idx, SandboxMode: a.perm.SandboxMode, NetworkAccess: a.perm.NetworkAccess,
			OpenNext: openNext,
		}
		// The policy and the rules as they are now: a rule an answer
		// added applies to the step's later calls.
		if g := a.approvalInput(); g != nil {
			g.Decision = d
			in.Approval = g
		}
		base := in
		if d == nil && t.fresh[c.ID] {
			// The call's first RunTool, of a call the model call
			// recorded: its first attempt knows the tool has not run.
			// Never the run with the decision, nor the subagent's
			// Finish (base).
			in.Recorded = true
			delete(t.fresh, c.ID)
		}
		if a.isSubagentCall(c) {
			in.Subagent = &agent.SubagentStep{}
		}
		f := workflow.ExecuteActivity(a.act(ctx, turnLabel(t.summary.Turn)+" · "+toolLabel(c.Name, c.Hint)), wire.RunToolActivity, in)
		parallel := c.Parallel
		t.calls[idx].State = wire.CallRunning
		var finish func(o agent.ToolOutcome, err error)
		sel.AddFuture(f, func(f workflow.Future) {
			var o agent.ToolOutcome
			err := f.Get(a.dctx, &o)
			if err == nil && o.Asked != nil && d == nil && !aborted {
				// It waits for its approval, holding its place.
				t.calls[idx].State = wire.CallAwaitingApproval
				a.log.follow(o.NextSeq)
				t.await(callsCtx, sel, idx, step, t.calls[idx], o.Asked)
				return
			}
			if err == nil && o.Subagent != nil {
				// An accepted subagent call: its child runs, holding the
				// call's place; a cancel before it started leaves the
				// call to the turn's end.
				a.log.follow(o.NextSeq)
				if !aborted {
					t.delegate(callsCtx, sel, idx, base, *o.Subagent, finish)
					return
				}
			}
			finish(o, err)
		})
		finish = func(o agent.ToolOutcome, err error) {
			inFlight--
			if !parallel {
				exclusive = false
			}
			if err != nil && cancelled && temporal.IsCanceledError(err) {
				// Cancelled before it stored a result (or before it
				// started): the turn's end closes the call (D40).
				t.calls[idx].State = wire.CallSkipped
				return
			}
			if err != nil {
				t.calls[idx].State = wire.CallFailed
				if out.err == nil {
					out.err = unwrapActivity(err)
				}
				return
			}
			if o.Asked != nil || o.Subagent != nil {
				// Asked, or a child planned, while the turn was being
				// cancelled: the turn's end settles the question and
				// closes the call.
				t.calls[idx].State = wire.CallSkipped
				a.log.follow(o.NextSeq)
				return
			}
			t.calls[idx].State, t.calls[idx].IsError, t.calls[idx].Code = wire.CallDone, o.IsError, o.Code
			a.log.follow(o.NextSeq)
			out.opened = max(out.opened, o.Opened)
		}
	}
	// Parking: once every call in the pool waits for its approval and the
	// run is due to continue as new, the turn parks (ParkedTurn).
	parkCh := workflow.NewChannel(a.dctx)
	waitingOnly := func() bool {
		n := 0
		for _, w := range t.waiting {
			if !w.dispatched {
				if w.decision != nil {
					return false
				}
				n++
			}
		}
		return n > 0 && n == inFlight && !aborted && out.err == nil && t.cause == ""
	}
	workflow.Go(callsCtx, func(ctx workflow.Context) {
		if workflow.Await(ctx, func() bool { return waitingOnly() && a.canDue != nil && a.canDue() }) == nil {
			parkCh.SendAsync(true)
		}
	})
	parkNow := false
	sel.AddReceive(parkCh, func(c workflow.ReceiveChannel, _ bool) {
		c.ReceiveAsync(nil)
		if waitingOnly() && a.gates.taken(a.dctx, approvalParkChange) {
			parkNow = true
		}
	})
	sel.AddReceive(t.decideCh, func(c workflow.ReceiveChannel, _ bool) {
		c.ReceiveAsync(nil)
		for _, w := range t.waiting {
			if w.decision != nil && !w.dispatched && !aborted {
				w.dispatched = true
				dispatch(w.idx, w.decision)
			}
		}
	})
	for {
		for !aborted && out.err == nil && !exclusive && next < len(calls) && inFlight < limit {
			c := calls[next]
			if !c.Parallel && inFlight > 0 {
				break
			}
			inFlight++
			exclusive = !c.Parallel
			dispatch(next, nil)
			next++
		}
		if out.err != nil {
			release()
		}
		if inFlight == 0 {
			break
		}
		sel.Select(a.dctx)
		if parkNow {
			out.parked = true
			return out
		}
	}
	if aborted || t.cause != "" || out.err != nil {
		out.aborted = aborted || t.cause != ""
		for i, c := range calls[next:] {
			out.skipped = append(out.skipped, c.ID)
			t.calls[next+i].State = wire.CallSkipped
		}
	}
	return out
}
