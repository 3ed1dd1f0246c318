package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// storeAfterCancel bounds how long a cancelled tool call takes to store its
// result.
const storeAfterCancel = 30 * time.Second

// RunTool runs one tool call of the assistant/message at in.MessageSeq and
// stores its tool/call and tool/result (D29: tool results are staged and
// committed in model order).
//
//   - A call whose tool/result the log holds is not run again: its outcome
//     is returned.
//   - A call without a tool/call gets one, stored immediately before the
//     tool runs.
//   - A call whose tool/call the model call stored (in.Recorded) runs in
//     the activity's first attempt as if this attempt had stored it: the
//     workflow starts one such activity per call, so its attempt 1 is the
//     call's first execution.
//   - A call with a tool/call but no result is a retry after a crash: a
//     result the earlier attempt staged is committed; otherwise an
//     idempotent tool runs again (Reran) and any other gets the
//     TOOL_OUTCOME_UNKNOWN result resume's closers would write (Unknown).
//
// A finished call whose predecessors in model order all have their results
// is committed without staging, and then commits the staged results of
// later calls that are next. Any other finished call stages its result
// durably in the store, then commits, under the handle's write lock, every
// staged result of the message that is next in model order; a result whose
// predecessors are still running stays staged and is committed by the last
// of them to finish.
// NextSeq is the log's next seq after this activity's commit: the step's
// next seq is the largest NextSeq of its tool activities. A missing tool or
// bad arguments are an IsError result, not an activity failure. A call whose
// step was closed without its result is a non-retryable InvalidLog error
// and stores nothing.
func (a *Activities) RunTool(ctx context.Context, in ToolInput) (out ToolOutcome, err error) {
	ctx, span := a.startTool(ctx, in)
	defer func() { endTool(span, out, err) }()
	h, err := a.Runtime.Attach(in.Ref)
	if err != nil {
		return ToolOutcome{}, err
	}
	// The workflow schedules one activity with Recorded per call, so its
	// attempt 1 is the call's first execution: the server starts attempt 2
	// only after attempt 1 failed or timed out, and nothing else starts a
	// RunTool with Recorded.
	c := &toolCall{a: a, h: h, in: in, cwd: h.Header().Cwd, first: in.Recorded && a.attempt(ctx) == 1}
	return c.run(ctx)
}

// toolCall is one attempt of RunTool: its activities, the session's write
// handle and the input, and what it learnt of the call's step.
type toolCall struct {
	a  *Activities
	h  *jsonl.Handle
	in ToolInput
	// step is the step of the call's message; callIDs are the message's
	// calls in model order.
	step    int64
	callIDs []string
	// cwd is the session's working directory.
	cwd string
	// opened reports that the log holds the step after the call's step
	// opened right after it ended (ToolOutcome.Opened).
	opened bool
	// first reports that this attempt is the activity's first execution
	// of a call the model call recorded (ToolInput.Recorded): no attempt
	// ran the tool before it.
	first bool
}

// openedStep is ToolOutcome.Opened.
func (c *toolCall) openedStep() int64 {
	if c.opened {
		return c.step + 1
	}
	return 0
}

// run is RunTool after its span: it records the call, gates it (its
// approval), runs it (or takes the result an earlier attempt staged) and
// commits the results that are next in model order.
func (c *toolCall) run(ctx context.Context) (ToolOutcome, error) {
	in, h := c.in, c.h
	var (
		block   wire.ContentBlock
		callSeq int64 = -1
		stored  *session.Event
		p       toolPlan
	)
	next, err := h.Update(ctx, in.MessageSeq, func(tail []session.Event, next int64) ([]session.Event, error) {
		p = toolPlan{}
		sc, err := scanStep(tail, in.MessageSeq, in.Turn)
		if err != nil {
			return nil, err
		}
		if in.Step != 0 && sc.step != in.Step {
			return nil, invalidLog("the assistant/message at seq %d belongs to step %d, not %d", in.MessageSeq, sc.step, in.Step)
		}
		c.step = sc.step
		var ok bool
		if block, _, ok = sc.block(in.CallID); !ok {
			return nil, invalidLog("the assistant/message at seq %d has no tool call %q", in.MessageSeq, in.CallID)
		}
		if in.Name != "" && block.Name != in.Name {
			return nil, invalidLog("tool call %q of the assistant/message at seq %d calls %q, not %q", in.CallID, in.MessageSeq, block.Name, in.Name)
		}
		c.callIDs = c.callIDs[:0]
		for _, mc := range sc.calls {
			c.callIDs = append(c.callIDs, mc.ID)
		}
		if r, ok := sc.result[in.CallID]; ok {
			stored = &r
			c.opened = sc.opened
			callSeq = -1
			if s, ok := sc.callSeq[in.CallID]; ok {
				callSeq = s
			}
			return nil, nil
		}
		if sc.closed {
			return nil, invalidLog("tool call %q of the assistant/message at seq %d has no result and its step is closed", in.CallID, in.MessageSeq)
		}
		batch, err := c.gate(sc, block, next, &p)
		if s, ok := sc.callSeq[in.CallID]; ok {
			callSeq = s
		} else if err == nil {
			callSeq = next
		}
		return batch, err
	})
	if err != nil {
		return ToolOutcome{}, activities.MapError(err)
	}
	key := stagingKey(in.Turn, c.step, in.CallID)
	if stored != nil {
		isErr, code := resultOutcome(*stored)
		unstage(ctx, h, key)
		// An earlier attempt committed this result without staging and
		// failed before it committed the staged results of later calls
		// that waited for it: commit them.
		n, _, err := c.commit(ctx)
		if err != nil {
			return ToolOutcome{}, err
		}
		return ToolOutcome{CallSeq: callSeq, NextSeq: max(next, n), IsError: isErr, Code: code, Unknown: code == session.ToolOutcomeUnknown, Opened: c.openedStep()}, nil
	}
	if p.asked != nil {
		return ToolOutcome{CallSeq: callSeq, NextSeq: next, Asked: p.asked}, nil
	}

	var (
		res    stagedResult
		staged bool
	)
	if p.result != nil {
		res = stagedResult{Result: p.result}
	} else if in.Subagent != nil {
		var start *SubagentStart
		if res, staged, start, err = c.subagentStep(ctx, block, key, callSeq, p.created); err != nil {
			return ToolOutcome{}, err
		}
		if start != nil {
			// Accepted: the workflow starts the child; the result comes
			// with the Finish step.
			return ToolOutcome{CallSeq: callSeq, NextSeq: next, Subagent: start}, nil
		}
	} else if res, staged, err = c.stagedOrRun(ctx, block, key, p.created, p.mode); err != nil {
		return ToolOutcome{}, err
	}
	if ctx.Err() != nil {
		// Cancelled while the tool ran: its result is still stored, past
		// the cancellation, within a bound of its own, and opens no step
		// (the turn is ending).
		c.in.OpenNext = false
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), storeAfterCancel)
		defer cancel()
	}
	if !staged {
		// A call whose predecessors all have their results is next in
		// model order: it is committed without staging.
		done, last, other, n, err := c.commitNext(ctx, res)
		if err != nil {
			return ToolOutcome{}, err
		}
		if other != nil {
			isErr, code := resultOutcome(*other)
			return ToolOutcome{CallSeq: callSeq, NextSeq: n, IsError: isErr, Code: code, Unknown: code == session.ToolOutcomeUnknown, Opened: c.openedStep()}, nil
		}
		if done {
			if !last {
				// Results of later calls staged while this one ran wait
				// for it: commit them now. One staged after this read
				// finds this result in the log and commits itself.
				if n, _, err = c.commit(ctx); err != nil {
					return ToolOutcome{}, err
				}
			}
			isErr, code := res.outcome()
			return ToolOutcome{CallSeq: callSeq, NextSeq: n, IsError: isErr, Code: code, Reran: res.Reran, Unknown: res.Unknown, Opened: c.openedStep()}, nil
		}
		if res, err = stage(ctx, h, key, res); err != nil {
			return ToolOutcome{}, err
		}
	}
	next, mine, err := c.commit(ctx)
	if err != nil {
		return ToolOutcome{}, err
	}
	isErr, code := res.outcome()
	if mine != nil {
		// The log's result stands, whichever attempt stored it.
		isErr, code = resultOutcome(*mine)
	}
	return ToolOutcome{CallSeq: callSeq, NextSeq: next, IsError: isErr, Code: code, Reran: res.Reran, Unknown: code == session.ToolOutcomeUnknown, Opened: c.openedStep()}, nil
}

// stagedOrRun returns the call's result: the one an earlier attempt staged
// (staged is then true), or the result of running the tool now, or the
// outcome-unknown result of a call that must not run again.
func (c *toolCall) stagedOrRun(ctx context.Context, block wire.ContentBlock, key string, created bool, mode string) (res stagedResult, staged bool, err error) {
	if !created {
		if r, ok, err := readStaged(ctx, c.h, key); err != nil || ok {
			return r, ok, err
		}
	}
	t, known := c.a.lookup(block.Name)
	if !created && !(known && t.Idempotent) {
		return stagedResult{Unknown: true}, false, nil
	}
	r := c.execute(ctx, block, mode)
	if err := ctx.Err(); err != nil && !cancelRequested(ctx) {
		// The attempt timed out, lost its heartbeat or its worker stopped
		// while the tool ran: its result is not the tool's outcome. A retry
		// finds the tool/call and decides by the tool's class.
		return stagedResult{}, false, err
	}
	// A call the workflow cancelled (its turn was cancelled, D71) ran until
	// the tool noticed: its result, ABORTED when the tool was stopped, is
	// the outcome, stored like any other.
	return stagedResult{Result: &r, Reran: !created}, false, nil
}

// stage stages res under key durably and returns the staged result: res,
// or the result a concurrent attempt staged first.
func stage(ctx context.Context, h *jsonl.Handle, key string, res stagedResult) (stagedResult, error) {
	body, err := json.Marshal(res)
	if err != nil {
		return stagedResult{}, err
	}
	err = h.Stage(ctx, key, body)
	if errors.Is(err, jsonl.ErrStagedConflict) {
		// A concurrent attempt staged first: its result stands.
		r, ok, err := readStaged(ctx, h, key)
		if err != nil {
			return stagedResult{}, err
		}
		if !ok {
			// It was committed and unstaged meanwhile: the log holds it,
			// and the commit that follows finds it there.
			return res, nil
		}
		return r, nil
	}
	if err != nil {
		return stagedResult{}, activities.MapError(err)
	}
	return res, nil
}

// cancelRequested reports whether ctx was cancelled because the workflow
// asked for it (the SDK's cause is then a CanceledError), not by a timeout,
// a lost heartbeat or the worker's shutdown.
func cancelRequested(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled) && temporal.IsCanceledError(context.Cause(ctx))
}

// commitNext stores res directly when every call of the message before
// this one has its result: nothing before it is missing, so staging would
// only cost a durable write. done reports that it stored res, last that
// every later call had its result too (res was the last the message
// lacked); other is the call's result when another attempt stored it
// first. With OpenNext, the batch that stores the last result the message
// lacked also ends the step and opens the next (nextStepEvents).
func (c *toolCall) commitNext(ctx context.Context, res stagedResult) (done, last bool, other *session.Event, next int64, err error) {
	in := c.in
	next, err = c.h.Update(ctx, in.MessageSeq, func(tail []session.Event, next int64) ([]session.Event, error) {
		done, last, other, c.opened = false, false, nil, false
		sc, err := scanStep(tail, in.MessageSeq, in.Turn)
		if err != nil {
			return nil, err
		}
		c.opened = sc.opened
		if r, ok := sc.result[in.CallID]; ok {
			other = &r
			return nil, nil
		}
		_, idx, _ := sc.block(in.CallID)
		callSeq, recorded := sc.callSeq[in.CallID]
		if idx < 0 || !recorded || sc.closed {
			return nil, nil
		}
		last = true
		for i, mc := range sc.calls {
			if _, ok := sc.result[mc.ID]; ok || i == idx {
				continue
			}
			if i < idx {
				return nil, nil
			}
			last = false
		}
		now := c.a.nowMs()
		e, err := res.event(in.Turn, sc.step, in.CallID, callSeq, next, now)
		if err != nil {
			return nil, err
		}
		done = true
		if !in.OpenNext || !last {
			return []session.Event{e}, nil
		}
		step, err := nextStepEvents(in.Turn, sc.step, next+1, now)
		if err != nil {
			return nil, err
		}
		c.opened = true
		return append([]session.Event{e}, step...), nil
	})
	if err != nil {
		return false, false, nil, 0, activities.MapError(err)
	}
	return done, last, other, next, nil
}

// execute runs the tool, heartbeating while it runs.
func (c *toolCall) execute(ctx context.Context, block wire.ContentBlock, mode string) tool.Result {
	return c.run1(ctx, block, mode, nil)
}

// run1 runs the tool with the delegation d (nil for a caller that starts
// no children), heartbeating while it runs.
func (c *toolCall) run1(ctx context.Context, block wire.ContentBlock, mode string, d *tool.Delegation) tool.Result {
	a := c.a
	args, err := argumentsText(block.Arguments)
	if err != nil {
		return tool.ErrorResult(tool.NameInvalidArguments, tool.CodeInvalidArguments, fmt.Sprintf("Error: the arguments of tool call %q cannot be read: %v", block.ID, err))
	}
	if a.Tools == nil {
		return tool.ErrorResult(tool.NameNotFound, tool.CodeNotFound, fmt.Sprintf("Error: tool %q not found; available tools: none", block.Name))
	}
	defer a.Runtime.Heartbeat(ctx, nil).Stop()
	res := a.Tools.Execute(ctx, block.Name, tool.Call{
		SessionID: c.in.Ref.SessionID, CallID: block.ID, Cwd: c.h.Header().Cwd, Arguments: json.RawMessage(args),
		SandboxMode: mode, NetworkAccess: c.in.NetworkAccess, Delegation: d,
	})
	a.traceToolRun(ctx, args, res)
	return res
}

// readStaged reads and decodes a staged result.
func readStaged(ctx context.Context, h *jsonl.Handle, key string) (stagedResult, bool, error) {
	body, ok, err := h.Staged(ctx, key)
	if err != nil || !ok {
		return stagedResult{}, false, activities.MapError(err)
	}
	var r stagedResult
	if err := json.Unmarshal(body, &r); err != nil {
		return stagedResult{}, false, invalidLog("staged result %q is not readable: %v", key, err)
	}
	return r, true, nil
}

// commit stores, in model order, every staged result of the call's message
// that is next: from the first call without a tool/result, each call with a
// tool/call and a staged result, up to the first call that has neither a
// result nor a staged one. It then removes the staged results the log
// holds. With OpenNext, a batch that stores the last result the message
// lacks also ends the step and opens the next (nextStepEvents). It returns
// the log's next seq and the call's own result.
func (c *toolCall) commit(ctx context.Context) (int64, *session.Event, error) {
	h, turn, step, msgSeq, mine := c.h, c.in.Turn, c.step, c.in.MessageSeq, c.in.CallID
	// Staged results are read before the locked update (the update must
	// not call the store). A result staged after this read by another
	// attempt is committed by that attempt, which reads after staging.
	staged := map[string]stagedResult{}
	for _, id := range c.callIDs {
		r, ok, err := readStaged(ctx, h, stagingKey(turn, step, id))
		if err != nil {
			return 0, nil, err
		}
		if ok {
			staged[id] = r
		}
	}
	var (
		done   []string
		stored *session.Event
	)
	next, err := h.Update(ctx, msgSeq, func(tail []session.Event, next int64) ([]session.Event, error) {
		done, stored = done[:0], nil
		sc, err := scanStep(tail, msgSeq, turn)
		if err != nil {
			return nil, err
		}
		c.opened = sc.opened
		var batch []session.Event
		now := c.a.nowMs()
		for _, mc := range sc.calls {
			if sc.closed {
				// The step ended without this call's result (the turn's
				// end closed it): store nothing after it.
				if r, ok := sc.result[mine]; ok {
					stored = &r
				}
				break
			}
			if r, ok := sc.result[mc.ID]; ok {
				done = append(done, mc.ID)
				if mc.ID == mine {
					stored = &r
				}
				continue
			}
			r, ok := staged[mc.ID]
			callSeq, recorded := sc.callSeq[mc.ID]
			if !ok || !recorded {
				break
			}
			e, err := r.event(turn, sc.step, mc.ID, callSeq, next+int64(len(batch)), now)
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
			done = append(done, mc.ID)
			if mc.ID == mine {
				stored = &batch[len(batch)-1]
			}
		}
		if c.in.OpenNext && len(batch) > 0 && !sc.closed && len(done) == len(sc.calls) {
			// This batch stores the last result the message lacked.
			step, err := nextStepEvents(turn, sc.step, next+int64(len(batch)), now)
			if err != nil {
				return nil, err
			}
			batch = append(batch, step...)
			c.opened = true
		}
		return batch, nil
	})
	if err != nil {
		return 0, nil, activities.MapError(err)
	}
	for _, id := range done {
		if _, ok := staged[id]; ok {
			unstage(ctx, h, stagingKey(turn, step, id))
		}
	}
	return next, stored, nil
}

// unstage removes a committed result's staged copy, best-effort: a copy
// left behind is never read again, as the log holds the result.
func unstage(ctx context.Context, h *jsonl.Handle, key string) {
	if err := h.Unstage(ctx, key); err != nil {
		slog.Warn("agent: removing a committed tool result's staged copy failed", "session", h.ID(), "key", key, "error", err)
	}
}
