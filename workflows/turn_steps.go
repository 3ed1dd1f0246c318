package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// steps runs the turn's steps and returns how to end it. With resume
// (the reason the turn had), it goes on with the step t.step, opened and
// stored already (adoptNextStep), from its model call.
func (t *turnRun) steps(tctx workflow.Context, resume *wire.TurnEndReason) (agent.EndTurnInput, error) {
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
	var reason *wire.TurnEndReason
	// openStep is the step the log holds open; opened is a step a tool
	// activity opened with the last result of the step before it
	// (toolOpensStepChange), which the turn goes on with without storing
	// its opening.
	openStep, opened := int64(0), int64(0)
	if resume != nil {
		reason, openStep = resume, t.step
	} else if t.parked != nil {
		reason, openStep = t.reasonSoFar, t.step
	} else if err := add(wire.TypeTurnStart, wire.TurnStart{Turn: turn}, false); err != nil {
		return end, err
	}
steps:
	for {
		if t.cause != "" {
			reason = abortedReason(t.cause)
			break
		}
		var (
			step int64
			res  agent.ModelResult
			err  error
		)
		if parked := t.parked; parked != nil {
			// A turn parked with its calls waiting for approvals before
			// continue-as-new: its step goes on from its tool calls, run
			// again (each RunTool finds what the log holds).
			t.parked = nil
			step, res = t.step, *parked
			openStep, end.Step = step, step
		} else {
			step = t.step + 1
			resumed := resume != nil
			if resumed {
				step, resume = t.step, nil
			} else if step > maxSteps(a.agentOptions) {
				reason = &wire.TurnEndReason{Kind: wire.TurnEndBlocked}
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
					reason = &wire.TurnEndReason{Kind: wire.TurnEndCompleted}
					break
				}
				if reason != nil && len(claimed) == 0 {
					break
				}
				if opened != step {
					if openStep > 0 {
						if err := add(wire.TypeStepEnd, wire.StepEnd{Turn: turn, Step: openStep}, false); err != nil {
							return end, err
						}
					}
					if a.delegated != nil && turn == 1 && step == 1 {
						// A one-shot child's descriptor, in its first turn
						// before its first step (the harness's order).
						if err := add(wire.TypeSubagentDescriptor, a.descriptor(), false); err != nil {
							return end, err
						}
					}
					if err := add(wire.TypeStepStart, wire.StepStart{Turn: turn, Step: step}, false); err != nil {
						return end, err
					}
				}
				for _, p := range claimed {
					if err := add(wire.TypeUserMessage, p.Message, true); err != nil {
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
			res, err = t.modelStep(tctx, step)
			if err != nil {
				reason = t.modelFailure(err)
				break
			}
			a.log.follow(res.NextSeq)
			t.fresh = nil
			if n := min(res.RecordedCalls, len(res.ToolCalls)); n > 0 {
				t.fresh = make(map[string]bool, n)
				for _, c := range res.ToolCalls[:n] {
					t.fresh[c.ID] = true
				}
			}
		}
		var stepEnd *wire.TurnEndReason
		// cut is the max-tokens message whose calls were not run and are
		// still to close (-1: none).
		cut := int64(-1)
		switch {
		case res.Finish == provider.FinishMaxTokens:
			stepEnd = &wire.TurnEndReason{Kind: wire.TurnEndMaxTokens}
			if len(res.ToolCalls) > 0 && res.MessageSeq >= 0 && closesCalls(a.dctx) {
				// The calls are not run (D35) but closed (D40): by EndTurn
				// when the turn ends here, else before the next step.
				cut = res.MessageSeq
				end.MessageSeq, end.MaxTokens = res.MessageSeq, true
			}
		case len(res.ToolCalls) == 0:
			stepEnd = &wire.TurnEndReason{Kind: wire.TurnEndCompleted}
		default:
			openNext := t.opensNextStep(step, reason, res.ToolCalls)
			out := t.runTools(step, res, openNext)
			if out.parked {
				t.reasonSoFar, t.parking = reason, true
				a.park(t, step, res)
				return end, errParked
			}
			if out.aborted {
				end.MessageSeq, end.Skipped = res.MessageSeq, out.skipped
			}
			if openNext && out.opened == step+1 {
				// The log holds the next step opened: the turn ends it
				// if it ends here.
				opened, openStep = step+1, step+1
			}
			if out.err != nil && t.cause == "" {
				reason = &wire.TurnEndReason{Kind: wire.TurnEndError, Error: failureJSON(activityFailure(out.err))}
				if closesCalls(a.dctx) {
					// EndTurn closes the failed and the undispatched calls.
					end.MessageSeq, end.Skipped = res.MessageSeq, out.skipped
				}
				break steps
			}
		}
		// max-tokens is sticky: a later step that completes does not
		// downgrade the turn's outcome.
		if reason == nil || reason.Kind != wire.TurnEndMaxTokens {
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

// opensNextStep reports whether the tool activities of step, whose model
// asked for calls, open the next step with the step's last result
// (agent.ToolInput.OpenNext), sparing the turn the store of that opening:
// only when the turn goes on after them as far as the workflow knows now
// (no end reason so far, no cancel, a step left under the limit) and no
// call runs as a child session (its result is stored after the child's
// run). It asks toolOpensStepChange then.
func (t *turnRun) opensNextStep(step int64, reason *wire.TurnEndReason, calls []agent.CallRef) bool {
	a := t.a
	if reason != nil || t.cause != "" || step+1 > maxSteps(a.agentOptions) {
		return false
	}
	for _, c := range calls {
		if c.Name == wire.SubagentToolName {
			return false
		}
	}
	return a.gates.taken(a.dctx, toolOpensStepChange)
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
	kept := 0
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
		in := activities.AppendBatchInput{Ref: *a.log.ref, Events: events[:take], Rerun: local, Reconcile: local}
		// The store of a turn's opening may find, where its turn/start
		// goes, what an append stored (an unrecorded attempt's): it
		// reports that by print, to keep ahead (keepAhead).
		in.Ahead = local && events[0].Type == wire.TypeTurnStart
		err := t.store(t.span.Context(a.dctx), wire.AppendBatchName, turnLabel(t.summary.Turn)+" · "+eventsLabel(take), in).Get(a.dctx, &res)
		if err != nil {
			return ids, unwrapActivity(err)
		}
		if len(res.Ahead) > 0 {
			// Nothing was written: the batch goes after the appended
			// events, numbered anew.
			kept++
			if err := t.keepAhead(events, res, kept); err != nil {
				return ids, err
			}
			continue
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

// localStores reports whether this run stores the turn's own events
// with local activities: the change's version, asked once per run, and the
// store activities on the workflow's task queue (a worker polling it
// registers them; a separate store queue keeps regular activities).
func (t *turnRun) localStores() bool {
	return t.a.gates.taken(t.a.dctx, turnLocalStoresChange) && t.a.storesOnOwnQueue()
}

// store runs the store activity name with in for the turn, with the
// activity summary summary: a
// local activity when localStores, else a regular one with the store
// activities' options. Both are idempotent against the log, so a local
// activity re-run after a worker crash (its workflow task retried) stores
// nothing twice.
func (t *turnRun) store(ctx workflow.Context, name, summary string, in any) workflow.Future {
	if t.localStores() {
		return workflow.ExecuteLocalActivity(t.a.actLocal(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: t.a.set.timeout,
			RetryPolicy:         t.a.set.retry(),
		}), summary), name, in)
	}
	return workflow.ExecuteActivity(t.a.act(t.a.set.storeCtx(ctx), summary), name, in)
}

// closesCalls reports whether this run closes a step's unresolved calls
// (closeCallsChange), recording the version marker the first time it is
// asked.
func closesCalls(dctx workflow.Context) bool {
	return workflow.GetVersion(dctx, closeCallsChange, workflow.DefaultVersion, 1) >= 1
}

// closeCalls stores the closing of the calls of the assistant/message at
// msgSeq that have no result (CloseCalls), before the step ends and the
// next one opens.
func (t *turnRun) closeCalls(msgSeq int64, maxTokens bool) error {
	a := t.a
	var res agent.CloseCallsResult
	err := workflow.ExecuteActivity(a.act(a.set.storeCtx(a.dctx), turnLabel(t.summary.Turn)+" · close unresolved tool calls"), wire.CloseCallsActivity,
		agent.CloseCallsInput{Ref: *a.log.ref, Turn: t.summary.Turn, MessageSeq: msgSeq, MaxTokens: maxTokens}).Get(a.dctx, &res)
	if err != nil {
		return unwrapActivity(err)
	}
	a.log.follow(res.NextSeq)
	return nil
}

func abortedReason(cause string) *wire.TurnEndReason {
	r, _ := session.MarshalData(map[string]string{"kind": cause})
	return &wire.TurnEndReason{Kind: wire.TurnEndAborted, Reason: r}
}

func failureJSON(f llmFailure) json.RawMessage {
	b, _ := session.MarshalData(f)
	return b
}

// modelCtx returns ctx with the model activity's options: it heartbeats
// while streaming and is waited for when cancelled, so its interrupted
// anchor is stored before the turn ends. A refused call is not retried.
func (s settings) modelCtx(ctx workflow.Context) workflow.Context {
	rp := s.retry()
	rp.NonRetryableErrorTypes = append(rp.NonRetryableErrorTypes, errTypeProviderRefused)
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           s.taskQueue,
		StartToCloseTimeout: s.timeout,
		HeartbeatTimeout:    min(s.heartbeat, modelHeartbeatTimeout),
		WaitForCancellation: true,
		RetryPolicy:         rp,
	})
}

// callModel runs the model activity of the turn's step.
func (t *turnRun) callModel(tctx workflow.Context, step int64, st modelState) (agent.ModelResult, error) {
	a := t.a
	in := agent.ModelInput{Ref: *a.log.ref, Turn: t.summary.Turn, Step: step,
		Compacts: true, PressureChecked: st.checked || t.noPressure, Overflows: st.overflows,
		Policy: &agent.ContextPolicy{SandboxMode: a.perm.SandboxMode, ApprovalPolicy: a.perm.ApprovalPolicy}}
	if a.gates.taken(a.dctx, modelRecordsCallsChange) {
		in.RecordCalls, in.ParallelLimit = true, maxParallelToolCalls(a.agentOptions)
	}
	if o := a.agentOptions; o != nil {
		in.Provider, in.Model, in.ReasoningEffort = o.Provider, o.Model, o.ReasoningEffort
		if o.MaxTokens != nil {
			in.MaxTokens = int64(*o.MaxTokens)
		}
		if o.ContextWindow != nil {
			in.ContextWindow = int64(*o.ContextWindow)
		}
		in.NoAutoCompact = o.AutoCompact != nil && !*o.AutoCompact
	}
	var res agent.ModelResult
	sum := fmt.Sprintf("%s · step %d · model %s", turnLabel(t.summary.Turn), step, wire.SummaryName(in.Model))
	err := workflow.ExecuteActivity(a.act(a.set.modelCtx(tctx), sum), wire.CallModelActivity, in).Get(a.dctx, &res)
	return res, err
}

// modelFailure is the end of a turn whose model activity failed: aborted
// when the turn was cancelled, else error: the provider's message and code
// for a refused call; else the activity error's type as the code, UNKNOWN
// when it has none (a timeout).
func (t *turnRun) modelFailure(err error) *wire.TurnEndReason {
	if t.cause != "" || temporal.IsCanceledError(err) {
		cause := t.cause
		if cause == "" {
			cause = wire.CauseUser
		}
		return abortedReason(cause)
	}
	var of *overflowFailure
	if errors.As(err, &of) {
		return &wire.TurnEndReason{Kind: wire.TurnEndError, Error: failureJSON(llmFailure{Message: of.pe.Message, Code: of.pe.Code, Status: of.pe.Status})}
	}
	err = unwrapActivity(err)
	f := activityFailure(err)
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == errTypeProviderRefused {
		var pe provider.Error
		if app.HasDetails() && app.Details(&pe) == nil {
			if pe.Message != "" {
				f.Message = pe.Message
			}
			f.Code, f.Status = pe.Code, pe.Status
		}
		if f.Code == "" {
			f.Code = errTypeProviderRefused
		}
	}
	return &wire.TurnEndReason{Kind: wire.TurnEndError, Error: failureJSON(f)}
}

// activityFailure describes a failed activity: its message, and its
// application error type (UnknownProvider, ProviderUnavailable after the
// last attempt, a store code, ...) as the code, UNKNOWN without one (a
// timeout).
func activityFailure(err error) llmFailure {
	err = unwrapActivity(err)
	f := llmFailure{Message: errorMessage(err), Code: codeUnknown}
	if t := errorType(err); t != "" {
		f.Code = t
	}
	return f
}
