package workflows

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/internal/lib/wftrace"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
)

// The agent loop of a live session (docs/LIFECYCLE.md, Turns). A turn runs
// in the live phase's main coroutine: turn/start, then steps (step/start,
// the inputs the step claims as user/message events, the model activity,
// the tool activities of its tool calls), then turn/end. The workflow
// stores the events it builds itself (turn/start, step/start,
// user/message, step/end between steps, inbox splices) with AppendBatch at
// explicit seqs; the agent activities store what they produce and report
// the log's next seq, which the workflow follows. Nothing proportional to
// the conversation travels through history beyond the claimed inputs.

// errTypeProviderRefused is the type of the model activity's error for a
// call the provider refused: the turn ends "error".
const errTypeProviderRefused = agent.ErrTypeProviderRefused

// modelHeartbeatTimeout bounds the model activity's heartbeat timeout: a
// cancel reaches a heartbeating activity within about 80% of it, and a
// Cancel answers once the interrupted call has stored what it showed.
const modelHeartbeatTimeout = 3 * time.Second

// codeUnknown is the code of a turn error that is not a provider's.
const codeUnknown = "UNKNOWN"

// agentLoop is the loop's state in the lifecycle.
type agentLoop struct {
	options *AgentOptions
	inbox   inbox
	turn    *turnRun
	recent  []TurnInfo

	turnsChange      change // the agent-turns version
	localChange      change // the turn-local-stores version
	toolCancelChange change // the cancel-running-tools version
	// reconcileChange is the turn-reconcile-held version, againChange the
	// input-delivered-again one (turn_reconcile.go).
	reconcileChange change
	againChange     change
	// waiters counts the running WaitTurn waits (and waiting inputs);
	// releaseWaiters answers those of a turn not running, before
	// continue-as-new.
	waiters        int
	releaseWaiters bool
}

// turnRun is the running turn.
type turnRun struct {
	summary TurnInfo
	step    int64
	// cause is the cancel's cause once the turn is cancelled.
	cause string
	// cancel cancels the model activity; cancelCh wakes the tool pool.
	cancel   workflow.CancelFunc
	cancelCh workflow.Channel
	done     bool
	// span is the turn's trace span (nil when not traced).
	span *wftrace.WorkflowSpan
	// calls are the running step's tool calls.
	calls []CallState
}

// llmFailure is the error of a turn that ended "error".
type llmFailure struct {
	Message string `json:"message"`
	Code    string `json:"code"`
	Status  int    `json:"status,omitempty"`
}

// agentTurns reports whether this run takes the agent loop's command
// paths (the agent-turns version), recording the marker the first time.
func (l *lifecycle) agentTurns() bool {
	return l.agent.turnsChange.takenIn(l.dctx, agentTurnsChange)
}

// turnDue reports whether a turn should start: a waking input is pending
// and no accepted append waits to be stored before it.
func (l *lifecycle) turnDue() bool {
	a := &l.agent
	return a.turn == nil && a.inbox.wake && len(l.pending) == 0 && !l.disposeWanted && l.phase == PhaseLive
}

func (l *lifecycle) maxSteps() int64 {
	if o := l.agent.options; o != nil && o.MaxSteps != nil {
		return int64(*o.MaxSteps)
	}
	return DefaultMaxSteps
}

func (l *lifecycle) maxParallelToolCalls() int {
	if o := l.agent.options; o != nil && o.MaxParallelToolCalls != nil {
		return int(min(*o.MaxParallelToolCalls, 1<<20))
	}
	return DefaultMaxParallelToolCalls
}

// cancelTurn cancels t with cause, once.
func (l *lifecycle) cancelTurn(t *turnRun, cause string) {
	if t == nil || t.done || t.cause != "" {
		return
	}
	t.cause = cause
	t.cancel()
	t.cancelCh.SendAsync(true)
}

// runTurn runs one turn to its end. A storage failure of the workflow's own
// events or of EndTurn disposes the session.
func (l *lifecycle) runTurn() {
	a := &l.agent
	if a.inbox.len() == 0 || !l.agentTurns() {
		a.inbox.wake = false
		return
	}
	a.inbox.wake = false
	a.releaseWaiters = false
	tctx, cancel := workflow.WithCancel(l.dctx)
	t := &turnRun{
		summary:  TurnInfo{Turn: l.lastTurn + 1, StartSeq: l.nextSeq, Claimed: []string{}},
		cancel:   cancel,
		cancelCh: workflow.NewBufferedChannel(l.dctx, 1),
	}
	tctx = l.startTurnSpan(tctx, t)
	a.turn = t
	var (
		end    agent.EndTurnInput
		err    error
		resume *session.TurnEndReason
	)
	for {
		end, err = l.turnSteps(tctx, t, resume)
		resume = nil
		var ended *turnEndedHeld
		if errors.As(err, &ended) {
			// An earlier attempt of the workflow task stored the turn's end.
			end.Reason, err = ended.reason, nil
			break
		}
		if err != nil {
			break
		}
		if l.localTurnStores() {
			end.ExpectSeq = l.nextSeq
		}
		var res agent.EndTurnResult
		err = unwrapActivity(l.turnStore(t.span.Context(l.dctx), agent.EndTurnActivity, end).Get(l.dctx, &res))
		if err == nil && len(res.Held) > 0 {
			// An earlier attempt opened the next step: the turn goes on.
			if err = l.adoptNextStep(t, end.Step, res); err == nil {
				reason := end.Reason
				resume = &reason
				continue
			}
		}
		if err == nil {
			l.nextSeq = max(l.nextSeq, res.NextSeq)
		}
		break
	}
	if err != nil {
		workflow.GetLogger(l.ctx).Error("turn failed to store; disposing the session", "session", l.id, "turn", t.summary.Turn, "error", errorMessage(err))
		end.Reason = session.TurnEndReason{Kind: TurnEndStoreFailed}
		l.disposeWanted = true
	}
	reason := end.Reason
	l.endTurnSpan(t, reason)
	t.summary.Reason = &reason
	t.summary.EndSeq = l.nextSeq
	t.summary.Steps = t.step
	t.done = true
	a.turn = nil
	a.recent = append(a.recent, t.summary)
	if n := len(a.recent); n > recentTurns {
		a.recent = slices.Clone(a.recent[n-recentTurns:])
	}
	if reason.Kind != session.TurnEndAborted {
		// Inputs that arrived during the turn start the next one; after
		// a cancel only a waking input sent since does.
		a.inbox.wake = a.inbox.len() > 0
	}
}

// TurnEndStoreFailed is the reason LoopState reports for a turn whose
// events could not be stored; its turn/end is not stored (the session is
// disposed, and a resume closes the turn as interrupted).
const TurnEndStoreFailed = "store-failed"

// claim removes the inputs a step claims: at the start of a turn every
// next-step input and the first next-turn input; later, the next-step
// inputs. It returns them and the deletion splice of the stored ones.
func (l *lifecycle) claim(first bool, seq, now int64) ([]PendingInput, []session.Event, error) {
	b := &l.agent.inbox
	var splices []session.Event
	remove := func(target string, n int) error {
		if n == 0 {
			return nil
		}
		e, err := session.NewEvent(session.TypeInboxSpliced, seq+int64(len(splices)), now, session.InboxSplice{
			Target: target, Start: 0, RemovedCount: int64(n), Inserted: []json.RawMessage{},
		})
		splices = append(splices, e)
		return err
	}
	claimed := b.nextStep
	b.nextStep = nil
	if err := remove(TargetNextStep, storedCount(claimed)); err != nil {
		return nil, nil, err
	}
	if first && len(b.nextTurn) > 0 {
		p := b.nextTurn[0]
		claimed = append(claimed, p)
		b.nextTurn = slices.Clone(b.nextTurn[1:])
		if err := remove(TargetNextTurn, storedCount([]PendingInput{p})); err != nil {
			return nil, nil, err
		}
	}
	return claimed, splices, nil
}

// turnSteps runs the turn's steps and returns how to end it. With resume
// (the reason the turn had), it goes on with the step t.step, opened and
// stored already (adoptNextStep), from its model call.
func (l *lifecycle) turnSteps(tctx workflow.Context, t *turnRun, resume *session.TurnEndReason) (agent.EndTurnInput, error) {
	turn := t.summary.Turn
	end := agent.EndTurnInput{Ref: *l.ref, Turn: turn, MessageSeq: -1}
	var batch []session.Event
	add := func(typ string, v any, surface bool) error {
		e, err := session.NewEvent(typ, l.nextSeq+int64(len(batch)), workflow.Now(l.dctx).UnixMilli(), v)
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
		ids, err := l.storeTurnBatch(batch, claimed)
		batch = nil
		t.summary.Claimed = append(t.summary.Claimed[:n], ids...)
		if err == nil {
			var stored []PendingInput
			for _, p := range claimed {
				if slices.Contains(ids, p.ID) {
					stored = append(stored, p)
				}
			}
			l.agent.inbox.noteClaimed(turn, stored)
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
		} else if step > l.maxSteps() {
			reason = &session.TurnEndReason{Kind: session.TurnEndBlocked}
			break
		}
		if !resumed {
			claimed, splice, err := l.claim(step == 1, l.nextSeq+int64(len(batch)), workflow.Now(l.dctx).UnixMilli())
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
		res, err := l.callModel(tctx, turn, step)
		if err != nil {
			reason = l.modelFailure(t, err)
			break
		}
		l.nextSeq = max(l.nextSeq, res.NextSeq)
		var stepEnd *session.TurnEndReason
		// cut is the max-tokens message whose calls were not run and are
		// still to close (-1: none).
		cut := int64(-1)
		switch {
		case res.Finish == provider.FinishMaxTokens:
			stepEnd = &session.TurnEndReason{Kind: session.TurnEndMaxTokens}
			if len(res.ToolCalls) > 0 && res.MessageSeq >= 0 && l.closesCalls() {
				// The calls are not run (D35) but closed (D40): by EndTurn
				// when the turn ends here, else before the next step.
				cut = res.MessageSeq
				end.MessageSeq, end.MaxTokens = res.MessageSeq, true
			}
		case len(res.ToolCalls) == 0:
			stepEnd = &session.TurnEndReason{Kind: session.TurnEndCompleted}
		default:
			out := l.runTools(t, step, res)
			if out.aborted {
				end.MessageSeq, end.Skipped = res.MessageSeq, out.skipped
			}
			if out.err != nil && t.cause == "" {
				reason = &session.TurnEndReason{Kind: session.TurnEndError, Error: failureJSON(activityFailure(out.err))}
				if l.closesCalls() {
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
		if reason != nil && len(l.agent.inbox.nextStep) == 0 {
			break
		}
		if cut >= 0 {
			// Another step follows: its model request must not hold the
			// cut message's calls without results.
			if err := l.closeCalls(turn, cut, true); err != nil {
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

// storeTurnBatch stores workflow-built events, in batches within the
// batch limit; their user/message events are the claimed inputs, in order.
// It returns the ids of the inputs stored: the claimed ones, or those an
// earlier attempt of the workflow task stored in their place (adoptHeld).
func (l *lifecycle) storeTurnBatch(events []session.Event, claimed []PendingInput) ([]string, error) {
	local := l.localTurnStores()
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
			if take > 0 && size+n > l.set.maxBatchBytes {
				break
			}
			size += n
			take++
		}
		var res activities.AppendResult
		err := l.turnStore(l.turnTraced(l.dctx), activities.AppendBatchName,
			activities.AppendBatchInput{Ref: *l.ref, Events: events[:take], Rerun: local, Reconcile: local}).Get(l.dctx, &res)
		if err != nil {
			return ids, unwrapActivity(err)
		}
		if len(res.Held) > 0 {
			// An earlier attempt of this workflow task stored this batch
			// and the rest with other claims: the log holds them all.
			_, msgs := splitClaims(events)
			held, err := l.adoptHeld(events, claimed, res)
			var ended *turnEndedHeld
			if errors.As(err, &ended) {
				l.nextSeq = ended.next
				return ids[:len(ids)-msgs], err
			}
			if err != nil {
				return ids, err
			}
			ids = append(ids[:len(ids)-msgs], held...)
			take = len(events)
		}
		l.nextSeq = res.NextSeq
		if tl := session.LastTurn(events[:take]); tl > 0 {
			l.lastTurn = tl
		}
		events = events[take:]
	}
	return ids, nil
}

func abortedReason(cause string) *session.TurnEndReason {
	r, _ := session.MarshalData(map[string]string{"kind": cause})
	return &session.TurnEndReason{Kind: session.TurnEndAborted, Reason: r}
}

func failureJSON(f llmFailure) json.RawMessage {
	b, _ := session.MarshalData(f)
	return b
}

// modelCtx returns ctx with the model activity's options: it heartbeats
// while streaming and is waited for when cancelled, so its interrupted
// anchor is stored before the turn ends. A refused call is not retried.
func (l *lifecycle) modelCtx(ctx workflow.Context) workflow.Context {
	rp := l.retry()
	rp.NonRetryableErrorTypes = append(rp.NonRetryableErrorTypes, errTypeProviderRefused)
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           l.set.taskQueue,
		StartToCloseTimeout: l.set.timeout,
		HeartbeatTimeout:    min(l.set.heartbeat, modelHeartbeatTimeout),
		WaitForCancellation: true,
		RetryPolicy:         rp,
	})
}

func (l *lifecycle) callModel(tctx workflow.Context, turn, step int64) (agent.ModelResult, error) {
	in := agent.ModelInput{Ref: *l.ref, Turn: turn, Step: step}
	if o := l.agent.options; o != nil {
		in.Provider, in.Model, in.ReasoningEffort = o.Provider, o.Model, o.ReasoningEffort
		if o.MaxTokens != nil {
			in.MaxTokens = int64(*o.MaxTokens)
		}
	}
	var res agent.ModelResult
	err := workflow.ExecuteActivity(l.modelCtx(tctx), agent.CallModelActivity, in).Get(l.dctx, &res)
	return res, err
}

// modelFailure is the end of a turn whose model activity failed: aborted
// when the turn was cancelled, else error: the provider's message and code
// for a refused call; else the activity error's type as the code, UNKNOWN
// when it has none (a timeout).
func (l *lifecycle) modelFailure(t *turnRun, err error) *session.TurnEndReason {
	if t.cause != "" || temporal.IsCanceledError(err) {
		cause := t.cause
		if cause == "" {
			cause = CauseUser
		}
		return abortedReason(cause)
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
	return &session.TurnEndReason{Kind: session.TurnEndError, Error: failureJSON(f)}
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
