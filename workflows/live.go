package workflows

import (
	"fmt"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
	"slices"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// validateAppendPayload is the Append validator over the raw request: it
// decodes it strictly, validates it and keeps it for the handler, which the
// SDK runs next (validators do not run on replay, so the handler decodes
// again when it finds nothing kept).
func (l *lifecycle) validateAppendPayload(ctx workflow.Context, in converter.RawValue) error {
	var req AppendRequest
	if err := decodeRequest(wire.UpdateAppend, in, &req); err != nil {
		return err
	}
	if req.AtEnd {
		if err := l.validateAtEnd(req); err != nil {
			return err
		}
	} else if !l.phase.live() || l.appends.twin(req.Events) == nil {
		if err := l.validateAppend(req); err != nil {
			return err
		}
	}
	l.appends.decoded.keep(ctx, req)
	return nil
}

// validateAtEnd is the Append validator of an AtEnd batch: numbered from
// 0, and valid once numbered from the accepted cursor, where the handler
// puts it (the request is kept as sent; nothing runs in between). Its
// store may place it further (placeGroup) or find it stored (claimAhead);
// the rules it is checked by do not depend on where it lands past the
// accepted events.
func (l *lifecycle) validateAtEnd(req AppendRequest) error {
	for i, e := range req.Events {
		if e.Seq != int64(i) {
			return invalidArgument(fmt.Sprintf("atEnd append batch: the seq of event %d must be %d (its index), got %d", i, i, e.Seq))
		}
	}
	req.Events = l.appends.atEnd(req.Events)
	return l.validateAppend(req)
}

// handleAppendPayload is the Append handler over the raw request.
func (l *lifecycle) handleAppendPayload(ctx workflow.Context, in converter.RawValue) (wire.AppendResult, error) {
	req, err := l.appends.decoded.take(ctx, wire.UpdateAppend, in)
	if err != nil {
		return wire.AppendResult{}, err
	}
	if req.AtEnd {
		return l.appends.appendAtEnd(ctx, req)
	}
	if it := l.appends.twin(req.Events); it != nil {
		return l.appends.awaitTwin(ctx, it)
	}
	return l.appends.append(ctx, req)
}

// validateAppend is the Append validator: the session is live, the batch is
// non-empty, lossless, within the byte limit and continues the accepted
// events contiguously, or repeats a batch already stored (an idempotent
// retry the store verifies).
func (l *lifecycle) validateAppend(req AppendRequest) error {
	if err := l.phase.admit(); err != nil {
		return err
	}
	if t := l.agent.turn; t != nil {
		return TurnRunningError(l.id, t.summary.Turn)
	}
	if l.agent.compacting != nil {
		return CompactingError(l.id)
	}
	if len(req.Events) == 0 {
		return invalidArgument("append batch must not be empty")
	}
	expected := l.appends.expected(req.Events)
	if err := l.checkBatch("append batch", req.Events, expected); err != nil {
		return err
	}
	// What the store would refuse is refused before it is accepted: the
	// rules that keep the log readable, repairable and resumable.
	if err := session.CheckAppendable(l.log.header, expected, req.Events); err != nil {
		return invalidArgument(err.Error())
	}
	// A session whose agent has a model route runs its own turns: a turn
	// the batch leaves open would have the agent's next turn nested inside
	// it, its tool calls never answered (docs/DECISIONS.md D76).
	if l.agent.routeMissing() == nil {
		if k, turn := openTurn(req.Events); k >= 0 {
			return TurnLeftOpenError(l.id, turn, k, req.Events[k].Seq)
		}
		if k := openCompaction(req.Events); k >= 0 {
			return CompactionLeftOpenError(l.id, k, req.Events[k].Seq)
		}
	}
	return nil
}

// openCompaction returns the index of the compaction/start events leave
// open (not followed by a compaction/end), or -1.
func openCompaction(events []session.Event) int {
	open := -1
	for k, e := range events {
		switch e.Type {
		case wire.TypeCompactionStart:
			open = k
		case wire.TypeCompactionEnd:
			open = -1
		}
	}
	return open
}

// openTurn returns the index and number of the turn events leave open (a
// turn/start not followed by a turn/end), or -1.
func openTurn(events []session.Event) (int, int64) {
	open, turn := -1, int64(0)
	for k, e := range events {
		switch e.Type {
		case wire.TypeTurnStart:
			open = k
			if ts, err := e.TurnStart(); err == nil {
				turn = ts.Turn
			}
		case wire.TypeTurnEnd:
			open = -1
		}
	}
	return open, turn
}

// handleDispose starts (or joins) the disposal and returns its outcome.
func (l *lifecycle) handleDispose(ctx workflow.Context) (wire.DisposeResult, error) {
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	l.requestDispose()
	if err := workflow.Await(hctx, func() bool { return l.phase.disposeDone }); err != nil {
		return wire.DisposeResult{}, err
	}
	return wire.DisposeResult{NextSeq: l.log.nextSeq}, l.phase.disposeErr
}

// canDue reports whether the run should continue as new: the server
// suggests it, or the run's history reached the session's
// continueAsNewEvents (LIFECYCLE.md §9.4) in a run that took the
// canEventsChange. That version is taken the first time the threshold is
// reached, so runs that never reach it record no marker. The history
// length is the one of the current workflow task's start event: the same
// on replay.
func (l *lifecycle) canDue() bool {
	info := workflow.GetInfo(l.ctx)
	if info.GetContinueAsNewSuggested() {
		return true
	}
	return info.GetCurrentHistoryLength() >= l.set.canEvents && l.gates.taken(l.dctx, canEventsChange)
}

// runLive is the live phase: it stores coalesced appends, disposes on
// Dispose, cancellation or owner unload, and continues as new when canDue
// (the server's suggestion or the history length), once every handler has
// finished.
func (l *lifecycle) runLive() (wire.DisposeResult, error) {
	l.agent.reportApprovals()
	for {
		l.aborts.syncCancel()
		_ = workflow.Await(l.dctx, func() bool {
			if l.phase.disposeWanted || l.appends.flushDue || (l.ctx.Err() != nil && !l.aborts.cancelSeen) || l.agent.compactDue() || l.agent.turnDue() {
				return true
			}
			return l.canDue() && (l.appends.waiting() || workflow.AllHandlersFinished(l.dctx) || l.agent.releaseDue())
		})
		l.aborts.syncCancel()
		switch {
		case l.phase.disposeWanted:
			return l.dispose()
		case l.appends.flushDue || (l.canDue() && l.appends.waiting()):
			l.appends.flush()
		case l.agent.compactDue():
			l.agent.runCompaction()
		case l.agent.turnDue():
			l.agent.runTurn()
			if l.agent.oneShotDone() {
				// A one-shot child's turn has ended: it disposes itself.
				l.requestDispose()
			}
		case l.canDue() && l.agent.releaseDue():
			// Waits for a turn still to come are answered before the run
			// continues as new; their clients send them again.
			l.agent.releaseWaits()
		case l.canDue() && workflow.AllHandlersFinished(l.dctx):
			// Let updates delivered in this workflow task reach their
			// handlers before deciding: a new coroutine runs after them.
			yieldOnce(l.dctx)
			if !l.appends.waiting() && !l.phase.disposeWanted && !l.agent.turnDue() && !l.agent.compactDue() && workflow.AllHandlersFinished(l.dctx) {
				return wire.DisposeResult{}, workflow.NewContinueAsNewError(l.ctx, LiveSession, l.liveState())
			}
		}
	}
}

// yieldOnce lets every coroutine that is ready run once before the one
// running on dctx continues.
func yieldOnce(dctx workflow.Context) {
	done := false
	workflow.Go(dctx, func(workflow.Context) { done = true })
	_ = workflow.Await(dctx, func() bool { return done })
}

func (l *lifecycle) liveState() LiveState {
	inbox, recent := l.agent.state()
	perm := l.agent.permissions()
	return LiveState{
		SessionID:           l.id,
		Handle:              *l.log.ref,
		NextSeq:             l.log.nextSeq,
		FirstLiveSeq:        l.log.firstLiveSeq,
		Source:              l.source,
		Header:              l.log.header,
		InheritedEventCount: l.log.inherited,
		LastTurn:            l.log.lastTurn,
		Lifecycle:           append([]wire.LifecycleEntry{}, l.phase.entries...),
		DisposeActivity:     l.hooks.DisposeActivity,
		Options:             l.options,
		AgentOptions:        l.agent.agentOptions,
		Inbox:               inbox,
		RecentTurns:         recent,
		Permissions:         &perm,
		Settled:             slices.Clone(l.agent.settled),
		Parked:              l.agent.parked,
		Delegated:           l.agent.delegated,
		AppendsAhead:        slices.Clone(l.appends.ahead),
		AnsweredAtEnd:       slices.Clone(l.appends.answered),
	}
}

// dispose is LIFECYCLE.md §10: the dispose hook (the machine's teardown), then the
// drain of pending appends and the close of the handle; failures collected
// in that order.
func (l *lifecycle) dispose() (wire.DisposeResult, error) {
	l.phase.enter(wire.PhaseDisposing)
	l.agent.abandonCompactions("the session was disposed before the compaction ran")
	var errs []error
	if l.hooks.DisposeActivity != "" {
		err := workflow.ExecuteActivity(l.act(l.set.hookCtx(l.dctx), "dispose hook"), l.hooks.DisposeActivity,
			wire.DisposeInput{SessionID: l.id, Reason: "dispose"}).Get(l.dctx, nil)
		if err != nil {
			errs = append(errs, unwrapActivity(err))
		}
	}
	if drainErr := l.appends.drain(); drainErr != nil {
		errs = append(errs, drainErr)
	}
	if err := l.log.closeHandle(l.dctx); err != nil {
		errs = append(errs, err)
	}
	l.log.closed()
	l.phase.enter(wire.PhaseClosed)
	l.phase.disposed(aggregate(l.id, errs))
	awaitHandlers(l.dctx)
	return wire.DisposeResult{NextSeq: l.log.nextSeq, Subagent: l.agent.delegatedEnd}, l.phase.disposeErr
}

// LiveSession continues a live session after continue-as-new: it owns the
// handle given in state and runs the live phase.
func LiveSession(ctx workflow.Context, state LiveState) (wire.DisposeResult, error) {
	set, err := resolveOptions(state.Options)
	if err != nil {
		return wire.DisposeResult{}, err
	}
	l := newLifecycle(ctx, state.SessionID, state.Source, wire.Hooks{DisposeActivity: state.DisposeActivity}, state.Options, set)
	l.log.restore(state)
	l.appends.ahead = slices.Clone(state.AppendsAhead)
	l.appends.answered = slices.Clone(state.AnsweredAtEnd)
	l.phase.restore(state.Lifecycle)
	l.agent.restore(state)
	l.phase.goLive(l.sessionInfo())
	if err := l.register(); err != nil {
		return wire.DisposeResult{}, err
	}
	return l.runLive()
}
