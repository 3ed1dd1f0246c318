package agent

import (
	"context"
	"slices"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// Model-facing text and error name of the result of a call not run because
// its response reached the max-tokens limit.
const (
	maxTokensNotRunText = "Error: tool call not run: the response reached its max-tokens limit, so the call may be cut off"
	maxTokensNotRunName = "ToolNotRunError"
)

// CloseCallsInput is the input of CloseCalls: the assistant/message whose
// calls without a result are closed.
type CloseCallsInput struct {
	Ref  wire.HandleRef `json:"ref"`
	Turn int64          `json:"turn"`
	// MessageSeq is the seq of the step's assistant/message.
	MessageSeq int64 `json:"messageSeq"`
	// MaxTokens reports that the message finished at its token limit: its
	// undispatched calls get the max-tokens result instead of
	// ABORTED_BEFORE_DISPATCH.
	MaxTokens bool `json:"maxTokens,omitempty"`
}

// CloseCallsResult reports the log's next seq after CloseCalls.
type CloseCallsResult struct {
	NextSeq int64 `json:"nextSeq"`
}

// CloseCalls closes, in one batch and in model order, every call of the
// assistant/message at in.MessageSeq that has no tool/result, as EndTurn
// does, without ending the step or the turn: the workflow runs it before
// it ends a step whose calls it did not run (a max-tokens finish) and opens
// the next one, so the next model request holds no call without a result.
// It is idempotent: calls closed already, or a step ended already, store
// nothing.
func (a *Activities) CloseCalls(ctx context.Context, in CloseCallsInput) (CloseCallsResult, error) {
	h, err := a.Runtime.Attach(in.Ref)
	if err != nil {
		return CloseCallsResult{}, err
	}
	if in.MessageSeq < 0 {
		return CloseCallsResult{}, invalidLog("closing the calls of turn %d: no message seq", in.Turn)
	}
	staged, err := stagedOf(ctx, h, in.Turn, in.MessageSeq)
	if err != nil {
		return CloseCallsResult{}, err
	}
	var commitKeys []string
	next, err := h.Update(ctx, in.MessageSeq, func(tail []session.Event, next int64) ([]session.Event, error) {
		batch, keys, err := closingEvents(tail, in.Turn, in.MessageSeq, nil, in.MaxTokens, staged, next, a.nowMs())
		commitKeys = keys
		return batch, err
	})
	if err != nil {
		return CloseCallsResult{}, activities.MapError(err)
	}
	for _, k := range commitKeys {
		unstage(ctx, h, k)
	}
	return CloseCallsResult{NextSeq: next}, nil
}

// stagedOf reads the staged results of the recorded calls without a result
// of the assistant/message at msgSeq (none when msgSeq < 0). They are read
// before the locked update that closes the calls, which must not call the
// store, and with no lock held: that update scans the step again.
func stagedOf(ctx context.Context, h *jsonl.Handle, turn, msgSeq int64) (map[string]stagedResult, error) {
	staged := map[string]stagedResult{}
	if msgSeq < 0 {
		return staged, nil
	}
	tail, _, err := h.Tail(ctx, msgSeq)
	if err != nil {
		return nil, activities.MapError(err)
	}
	sc, err := scanStep(tail, msgSeq, turn)
	if err != nil {
		return nil, activities.MapError(err)
	}
	var ids []string
	for _, c := range sc.calls {
		if _, done := sc.result[c.ID]; !done {
			if _, recorded := sc.callSeq[c.ID]; recorded {
				ids = append(ids, c.ID)
			}
		}
	}
	for _, id := range ids {
		r, ok, err := readStaged(ctx, h, stagingKey(turn, sc.step, id))
		if err != nil {
			return nil, err
		}
		if ok {
			staged[id] = r
		}
	}
	return staged, nil
}

// closingEvents builds, at seq next, the closing of every call of the
// assistant/message at tail[0] (seq msgSeq) of turn without a tool/result,
// in model order: an unrecorded call gets its tool/call and an
// ABORTED_BEFORE_DISPATCH result (the max-tokens result when maxTokens); a
// recorded one the workflow never dispatched (in skipped, recorded by the
// model call, not asked about, nothing staged) the ABORTED_BEFORE_DISPATCH
// result alone; any other recorded one its staged result or the
// TOOL_OUTCOME_UNKNOWN one. Nothing is
// built once the message's step has ended. skipped are call ids the message
// must hold. It returns the staging keys of the staged results it commits.
func closingEvents(tail []session.Event, turn, msgSeq int64, skipped []string, maxTokens bool, staged map[string]stagedResult, next, now int64) ([]session.Event, []string, error) {
	sc, err := scanStep(tail, msgSeq, turn)
	if err != nil {
		return nil, nil, err
	}
	for _, id := range skipped {
		if _, _, ok := sc.block(id); !ok {
			return nil, nil, invalidLog("end of turn %d: the assistant/message at seq %d has no tool call %q", turn, msgSeq, id)
		}
	}
	if sc.closed {
		// The step ended: its calls were settled.
		return nil, nil, nil
	}
	var (
		batch []session.Event
		keys  []string
	)
	seq := func() int64 { return next + int64(len(batch)) }
	for _, c := range sc.calls {
		if _, done := sc.result[c.ID]; done {
			continue
		}
		callSeq, recorded := sc.callSeq[c.ID]
		if !recorded {
			res := tool.ErrorResult(tool.NameAborted, wire.CodeAbortedBeforeDispatch, abortedBeforeDispatchText)
			if maxTokens {
				res = tool.ErrorResult(maxTokensNotRunName, wire.CodeMaxTokensNotRun, maxTokensNotRunText)
			}
			pair, err := notRunPair(turn, sc.step, c, seq(), now, res)
			if err != nil {
				return nil, nil, err
			}
			batch = append(batch, pair...)
			continue
		}
		ask, asked := sc.asked[c.ID]
		if _, ok := staged[c.ID]; !ok && !asked && slices.Contains(skipped, c.ID) {
			// Recorded by the model call and never dispatched (the
			// workflow skipped it): the harness's result of a call its
			// cancellation kept from dispatch, after its tool/call.
			e, err := toolResultEvent(turn, sc.step, c.ID, callSeq, seq(), now, tool.ErrorResult(tool.NameAborted, wire.CodeAbortedBeforeDispatch, abortedBeforeDispatchText))
			if err != nil {
				return nil, nil, err
			}
			batch = append(batch, e)
			continue
		}
		if asked {
			// A call stopped while it waited for its approval, or decided
			// and not allowed: the question is settled, then the call.
			outcome, decided := sc.decided[ask.ID]
			if !decided {
				outcome = wire.OutcomeCancelled
				d, err := decidedEventAt(ask.ID, outcome, seq(), now)
				if err != nil {
					return nil, nil, err
				}
				batch = append(batch, d)
			}
			if outcome != wire.OutcomeAllowedOnce {
				e, err := toolResultEvent(turn, sc.step, c.ID, callSeq, seq(), now, deniedResult(c.Name, askedEscalation(ask, c), outcome, 0))
				if err != nil {
					return nil, nil, err
				}
				batch = append(batch, e)
				continue
			}
		}
		e, err := staged[c.ID].event(turn, sc.step, c.ID, callSeq, seq(), now)
		if err != nil {
			return nil, nil, err
		}
		batch = append(batch, e)
		if _, ok := staged[c.ID]; ok {
			keys = append(keys, stagingKey(turn, sc.step, c.ID))
		}
	}
	return batch, keys, nil
}
