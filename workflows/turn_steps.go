package workflows

import (
	"errors"
	"slices"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"go.temporal.io/sdk/workflow"
)

// steps runs the turn's steps and returns how to end it. With resume
// (the reason the turn had), it goes on with the step t.step, opened and
// stored already (adoptNextStep), from its model call.
func (t *turnRun) steps(tctx workflow.Context, resume *session.TurnEndReason) (agent.EndTurnInput, error) {
	a := t.a
	turn := t.summary.Turn
	end := agent.EndTurnInput{Ref: *a.log.ref, Turn: turn, MessageSeq: -1}
	var batch []session.Event
	add := func(typ string, v any, surface bool) error {
		e, err := session.NewEvent(typ, a.log.nextSeq+int64(len(batch)), workflow.Now(a.dctx).UnixMilli(), v)
		if err != nil {
			return err
		}
		if surface {
			e.SurfaceOp = session.AppendOp()
		}
		batch = append(batch, e)
		return nil
	}
	flush := func(claimed []PendingInput) error {
		if len(batch) == 0 {
			return nil
		}
		// The claimed inputs are the turn's while they are stored (a
		// WaitTurn finds them); the store may say which ones it holds.
		n := len(t.summary.Claimed)
		for _, p := range claimed {
			t.summary.Claimed = append(t.summary.Claimed, p.ID)
		}
		ids, err := t.storeBatch(batch, claimed)
		batch = nil
		t.summary.Claimed = append(t.summary.Claimed[:n], ids...)
		if err == nil {
			var stored []PendingInput
			for _, p := range claimed {
				if slices.Contains(ids, p.ID) {
					stored = append(stored, p)
				}
			}
			a.inbox.noteClaimed(turn, stored)
		}
		return err
	}
	var reason *session.TurnEndReason
	openStep := int64(0)
	if resume != nil {
		reason, openStep = resume, t.step
	} else if err := add(session.TypeTurnStart, session.TurnStart{Turn: turn}, false); err != nil {
		return end, err
	}
steps:
	for {
		if t.cause != "" {
			reason = abortedReason(t.cause)
			break
		}
		step, resumed := t.step+1, resume != nil
		if resumed {
			step, resume = t.step, nil
		} else if step > maxSteps(a.agentOptions) {
			reason = &session.TurnEndReason{Kind: session.TurnEndBlocked}
			break
		}
		if !resumed {
			claimed, splice, err := a.inbox.claim(step == 1, a.log.nextSeq+int64(len(batch)), workflow.Now(a.dctx).UnixMilli())
			if err != nil {
				return end, err
			}
			batch = append(batch, splice...)
			if step == 1 && len(claimed) == 0 {
				// Nothing to say: the turn spends no model call.
				reason = &session.TurnEndReason{Kind: session.TurnEndCompleted}
				break
			}
			if reason != nil && len(claimed) == 0 {
				break
			}
			if openStep > 0 {
				if err := add(session.TypeStepEnd, session.StepEnd{Turn: turn, Step: openStep}, false); err != nil {
					return end, err
				}
			}
			if err := add(session.TypeStepStart, session.StepStart{Turn: turn, Step: step}, false); err != nil {
				return end, err
			}
			for _, p := range claimed {
				if err := add(session.TypeUserMessage, p.Message, true); err != nil {
					return end, err
				}
			}
			if err := flush(claimed); err != nil {
				return end, err
			}
			t.step, openStep, t.calls = step, step, nil
		}
		end.Step = step
		if t.cause != "" {
			reason = abortedReason(t.cause)
			break
		}
		res, err := t.callModel(tctx, step)
		if err != nil {
			reason = t.modelFailure(err)
			break
		}
		a.log.follow(res.NextSeq)
		var stepEnd *session.TurnEndReason
		// cut is the max-tokens message whose calls were not run and are
		// still to close (-1: none).
		cut := int64(-1)
		switch {
		case res.Finish == provider.FinishMaxTokens:
			stepEnd = &session.TurnEndReason{Kind: session.TurnEndMaxTokens}
			if len(res.ToolCalls) > 0 && res.MessageSeq >= 0 && closesCalls(a.dctx) {
				// The calls are not run (D35) but closed (D40): by EndTurn
				// when the turn ends here, else before the next step.
				cut = res.MessageSeq
				end.MessageSeq, end.MaxTokens = res.MessageSeq, true
			}
		case len(res.ToolCalls) == 0:
			stepEnd = &session.TurnEndReason{Kind: session.TurnEndCompleted}
		default:
			out := t.runTools(step, res)
			if out.aborted {
				end.MessageSeq, end.Skipped = res.MessageSeq, out.skipped
			}
			if out.err != nil && t.cause == "" {
				reason = &session.TurnEndReason{Kind: session.TurnEndError, Error: failureJSON(activityFailure(out.err))}
				if closesCalls(a.dctx) {
					// EndTurn closes the failed and the undispatched calls.
					end.MessageSeq, end.Skipped = res.MessageSeq, out.skipped
				}
				break steps
			}
		}
		// max-tokens is sticky: a later step that completes does not
		// downgrade the turn's outcome.
		if reason == nil || reason.Kind != session.TurnEndMaxTokens {
			reason = stepEnd
		}
		if t.cause != "" {
			reason = abortedReason(t.cause)
			break
		}
		if reason != nil && len(a.inbox.nextStep) == 0 {
			break
		}
		if cut >= 0 {
			// Another step follows: its model request must not hold the
			// cut message's calls without results.
			if err := t.closeCalls(cut, true); err != nil {
				return end, err
			}
			end.MessageSeq, end.MaxTokens = -1, false
		}
	}
	if err := flush(nil); err != nil {
		return end, err
	}
	end.Step = openStep
	end.Reason = *reason
	return end, nil
}

// storeBatch stores workflow-built events, in batches within the
// batch limit; their user/message events are the claimed inputs, in order.
// It returns the ids of the inputs stored: the claimed ones, or those an
// earlier attempt of the workflow task stored in their place (adoptHeld).
func (t *turnRun) storeBatch(events []session.Event, claimed []PendingInput) ([]string, error) {
	a := t.a
	local := t.localStores()
	ids := make([]string, 0, len(claimed))
	for _, p := range claimed {
		ids = append(ids, p.ID)
	}
	for len(events) > 0 {
		take, size := 0, 0
		for take < len(events) {
			n, err := batchBytes(events[take : take+1])
			if err != nil {
				return ids, err
			}
			if take > 0 && size+n > a.set.maxBatchBytes {
				break
			}
			size += n
			take++
		}
		var res activities.AppendResult
		err := t.store(t.span.Context(a.dctx), activities.AppendBatchName,
			activities.AppendBatchInput{Ref: *a.log.ref, Events: events[:take], Rerun: local, Reconcile: local}).Get(a.dctx, &res)
		if err != nil {
			return ids, unwrapActivity(err)
		}
		if len(res.Held) > 0 {
			// An earlier attempt of this workflow task stored this batch
			// and the rest with other claims: the log holds them all.
			_, msgs := splitClaims(events)
			held, err := t.adoptHeld(events, claimed, res)
			var ended *turnEndedHeld
			if errors.As(err, &ended) {
				a.log.moveTo(ended.next)
				return ids[:len(ids)-msgs], err
			}
			if err != nil {
				return ids, err
			}
			ids = append(ids[:len(ids)-msgs], held...)
			take = len(events)
		}
		a.log.stored(res.NextSeq, events[:take])
		events = events[take:]
	}
	return ids, nil
}
