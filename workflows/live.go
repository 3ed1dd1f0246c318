package workflows

import (
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/session"
)

// notLive refuses work outside the live phase: before publication the
// session is not live yet; once disposal began the lifecycle is disposed
// (LIFECYCLE.md §3).
func (l *lifecycle) notLive() error {
	if l.disposeWanted || l.phase == PhaseDisposing || l.phase == PhaseClosed {
		return LifecycleDisposedError(l.id)
	}
	return notLiveError(l.id, l.phase)
}

// LifecycleDisposedError is the error of work refused by a disposed
// lifecycle.
func LifecycleDisposedError(id string) error {
	return temporal.NewNonRetryableApplicationError("agent "+quoteID(id)+" lifecycle disposed", ErrTypeLifecycleDisposed, nil)
}

// validateAppend is the Append validator: the session is live, the batch is
// non-empty, lossless, within the byte limit and continues the accepted
// events contiguously, or repeats a batch already stored (an idempotent
// retry the store verifies).
func (l *lifecycle) validateAppend(req AppendRequest) error {
	if l.phase != PhaseLive || l.disposeWanted {
		return l.notLive()
	}
	if t := l.agent.turn; t != nil {
		return TurnRunningError(l.id, t.summary.Turn)
	}
	if len(req.Events) == 0 {
		return invalidArgument("append batch must not be empty")
	}
	expected := l.nextSeq + l.pendingEvents
	first := req.Events[0].Seq
	if first < l.nextSeq && first+int64(len(req.Events)) <= l.nextSeq {
		expected = first
	}
	if err := l.checkBatch("append batch", req.Events, expected); err != nil {
		return err
	}
	// What the store would refuse is refused before it is accepted: the
	// rules that keep the log readable, repairable and resumable.
	if err := session.CheckAppendable(l.header, expected, req.Events); err != nil {
		return invalidArgument(err.Error())
	}
	// A session whose agent has a model route runs its own turns: a turn
	// the batch leaves open would have the agent's next turn nested inside
	// it, its tool calls never answered (docs/DECISIONS.md D76).
	if l.routeMissing() == nil {
		if k, turn := openTurn(req.Events); k >= 0 {
			return TurnLeftOpenError(l.id, turn, k, req.Events[k].Seq)
		}
	}
	return nil
}

// openTurn returns the index and number of the turn events leave open (a
// turn/start not followed by a turn/end), or -1.
func openTurn(events []session.Event) (int, int64) {
	open, turn := -1, int64(0)
	for k, e := range events {
		switch e.Type {
		case session.TypeTurnStart:
			open = k
			if ts, err := e.TurnStart(); err == nil {
				turn = ts.Turn
			}
		case session.TypeTurnEnd:
			open = -1
		}
	}
	return open, turn
}

// handleAppend queues the batch and returns once it is durably stored. A
// batch below the stored cursor is re-appended on its own: the store accepts
// it only if it is exactly what is stored.
func (l *lifecycle) handleAppend(ctx workflow.Context, req AppendRequest) (AppendResult, error) {
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	first := req.Events[0].Seq
	if first < l.nextSeq {
		n, _ := batchBytes(req.Events)
		_, err := l.storeAppend(hctx, req.Events, n)
		return AppendResult{NextSeq: l.nextSeq}, err
	}
	n, _ := batchBytes(req.Events)
	item := &appendItem{events: req.Events, bytes: n}
	l.pending = append(l.pending, item)
	l.pendingEvents += int64(len(req.Events))
	if l.groupCommit() {
		// Stored at once unless a store is in flight; what arrives while
		// one runs is stored together by the next (flushOnce re-arms).
		l.flushDue = true
	} else {
		l.startTimer()
	}
	if err := workflow.Await(hctx, func() bool { return item.done }); err != nil {
		return AppendResult{}, err
	}
	return AppendResult{NextSeq: item.next}, item.err
}

// groupCommitChange names the versioned change that replaced the default
// coalescing timer by group commit. Temporal fires no timer sooner than about
// a second after it is started, so a 200 ms window held every append for a
// second; group commit stores an append as soon as no store is in flight.
const groupCommitChange = "append-group-commit"

// groupCommit reports whether appends are group-committed: in runs that
// took the change, when the request sets no window. A request with an
// explicit window keeps the timer.
func (l *lifecycle) groupCommit() bool {
	if l.options != nil && l.options.AppendWindowMs > 0 {
		return false
	}
	return l.groupCommitChange.takenIn(l.dctx, groupCommitChange)
}

// startTimer opens the coalescing window unless one is open.
func (l *lifecycle) startTimer() {
	if l.timerRunning {
		return
	}
	l.timerRunning = true
	window := l.set.window
	workflow.Go(l.dctx, func(gctx workflow.Context) {
		_ = workflow.NewTimer(gctx, window).Get(gctx, nil)
		l.timerRunning = false
		l.flushDue = true
	})
}

// flushOnce stores the oldest pending appends, up to the batch limit, with
// one activity. A failure fails every pending append (the later ones could
// only fail their seq check) and rewinds the accepted cursor.
func (l *lifecycle) flushOnce() error {
	if len(l.pending) == 0 {
		return nil
	}
	take, size := 0, 0
	var events []session.Event
	for take < len(l.pending) {
		it := l.pending[take]
		if take > 0 && size+it.bytes > l.set.maxBatchBytes {
			break
		}
		size += it.bytes
		events = append(events, it.events...)
		take++
	}
	res, err := l.storeAppend(l.dctx, events, size)
	if err != nil {
		for _, it := range l.pending {
			it.done, it.err, it.next = true, err, l.nextSeq
		}
		l.pending, l.pendingEvents = nil, 0
		return err
	}
	l.nextSeq = res.NextSeq
	l.pendingEvents -= int64(len(events))
	// A batch without a turn/start keeps the last turn (LastTurn is 0
	// only then: a decoded turn/start numbers its turn from 1).
	if t := session.LastTurn(events); t > 0 {
		l.lastTurn = t
	}
	for _, it := range l.pending[:take] {
		it.done, it.next = true, l.nextSeq
	}
	l.pending = l.pending[take:]
	if len(l.pending) > 0 {
		l.flushDue = true
	}
	return nil
}

// validateDispose accepts Dispose once the session is live, and after a
// disposal (whose outcome it then returns); a session that failed before
// going live has nothing to dispose.
func (l *lifecycle) validateDispose() error {
	if l.phase == PhaseLive || l.phase == PhaseDisposing || l.disposeDone {
		return nil
	}
	return notLiveError(l.id, l.phase)
}

// handleDispose starts (or joins) the disposal and returns its outcome.
func (l *lifecycle) handleDispose(ctx workflow.Context) (DisposeResult, error) {
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	l.requestDispose()
	if err := workflow.Await(hctx, func() bool { return l.disposeDone }); err != nil {
		return DisposeResult{}, err
	}
	return DisposeResult{NextSeq: l.nextSeq}, l.disposeErr
}

// canDue reports whether the run should continue as new: the server
// suggests it, or the run's history reached the session's
// continueAsNewEvents (LIFECYCLE.md §9.4).
func (l *lifecycle) canDue() bool {
	info := workflow.GetInfo(l.ctx)
	return info.GetContinueAsNewSuggested() || l.historyDue(info.GetCurrentHistoryLength())
}

// canEventsChange names the versioned change that makes a live run continue
// as new once its history reaches Options.ContinueAsNewEvents; runs recorded
// before it continue as new only when the server suggests it.
const canEventsChange = "continue-as-new-history-length"

// historyDue reports whether a history of length events reached the
// threshold, in runs that took the change. The version is taken the first
// time the threshold is reached, so runs that never reach it record no
// marker. The history length is the one of the current workflow task's
// start event: the same on replay.
func (l *lifecycle) historyDue(length int) bool {
	if length < l.set.canEvents {
		return false
	}
	return l.canEventsChange.takenIn(l.dctx, canEventsChange)
}

// runLive is the live phase: it stores coalesced appends, disposes on
// Dispose, cancellation or owner unload, and continues as new when canDue
// (the server's suggestion or the history length), once every handler has
// finished.
func (l *lifecycle) runLive() (DisposeResult, error) {
	for {
		l.syncCancel()
		_ = workflow.Await(l.dctx, func() bool {
			if l.disposeWanted || l.flushDue || (l.ctx.Err() != nil && !l.cancelSeen) || l.turnDue() {
				return true
			}
			return l.canDue() && (len(l.pending) > 0 || workflow.AllHandlersFinished(l.dctx) || l.releaseDue())
		})
		l.syncCancel()
		switch {
		case l.disposeWanted:
			return l.dispose()
		case l.flushDue || (l.canDue() && len(l.pending) > 0):
			l.flushDue = false
			_ = l.flushOnce()
		case l.turnDue():
			l.runTurn()
		case l.releaseDue():
			// Waits for a turn still to come are answered before the run
			// continues as new; their clients send them again.
			l.agent.releaseWaiters = true
		case l.canDue() && workflow.AllHandlersFinished(l.dctx):
			// Let updates delivered in this workflow task reach their
			// handlers before deciding: a new coroutine runs after them.
			l.yield()
			if len(l.pending) == 0 && !l.disposeWanted && !l.turnDue() && workflow.AllHandlersFinished(l.dctx) {
				return DisposeResult{}, workflow.NewContinueAsNewError(l.ctx, LiveSession, l.liveState())
			}
		}
	}
}

// releaseDue reports whether the run would continue as new but for
// WaitTurn waits not yet answered.
func (l *lifecycle) releaseDue() bool {
	return l.canDue() && l.agent.waiters > 0 && !l.agent.releaseWaiters
}

// yield lets every coroutine that is ready run once before the main one
// continues.
func (l *lifecycle) yield() {
	done := false
	workflow.Go(l.dctx, func(workflow.Context) { done = true })
	_ = workflow.Await(l.dctx, func() bool { return done })
}

func (l *lifecycle) liveState() LiveState {
	return LiveState{
		SessionID:           l.id,
		Handle:              *l.ref,
		NextSeq:             l.nextSeq,
		FirstLiveSeq:        l.firstLiveSeq,
		Source:              l.source,
		Header:              l.header,
		InheritedEventCount: l.inherited,
		LastTurn:            l.lastTurn,
		Lifecycle:           append([]LifecycleEntry{}, l.entries...),
		DisposeActivity:     l.hooks.DisposeActivity,
		Options:             l.options,
		AgentOptions:        l.agent.options,
		Inbox:               l.agent.inbox.state(),
		RecentTurns:         slices.Clone(l.agent.recent),
	}
}

// dispose is LIFECYCLE.md §10: the dispose hook (the machine's teardown), then the
// drain of pending appends and the close of the handle; failures collected
// in that order.
func (l *lifecycle) dispose() (DisposeResult, error) {
	l.setPhase(PhaseDisposing)
	var errs []error
	if l.hooks.DisposeActivity != "" {
		err := workflow.ExecuteActivity(l.hookCtx(l.dctx), l.hooks.DisposeActivity,
			DisposeInput{SessionID: l.id, Reason: "dispose"}).Get(l.dctx, nil)
		if err != nil {
			errs = append(errs, unwrapActivity(err))
		}
	}
	var drainErr error
	for len(l.pending) > 0 {
		if err := l.flushOnce(); err != nil && drainErr == nil {
			drainErr = err
		}
	}
	if drainErr != nil {
		errs = append(errs, drainErr)
	}
	if err := l.closeHandle(l.dctx); err != nil {
		errs = append(errs, err)
	}
	l.handleOpen = false
	l.setPhase(PhaseClosed)
	l.disposeErr = aggregate(l.id, errs)
	l.disposeDone = true
	l.awaitHandlers()
	return DisposeResult{NextSeq: l.nextSeq}, l.disposeErr
}

// LiveSession continues a live session after continue-as-new: it owns the
// handle given in state and runs the live phase.
func LiveSession(ctx workflow.Context, state LiveState) (DisposeResult, error) {
	set, err := resolveOptions(state.Options)
	if err != nil {
		return DisposeResult{}, err
	}
	l := newLifecycle(ctx, state.SessionID, state.Source, Hooks{DisposeActivity: state.DisposeActivity}, set)
	l.options = state.Options
	ref := state.Handle
	l.ref = &ref
	l.handleOpen = true
	l.header = state.Header
	l.inherited = state.InheritedEventCount
	l.nextSeq = state.NextSeq
	l.firstLiveSeq = state.FirstLiveSeq
	l.lastTurn = state.LastTurn
	l.entries = append([]LifecycleEntry{}, state.Lifecycle...)
	l.agent.options = state.AgentOptions
	l.agent.inbox.restore(state.Inbox)
	l.agent.recent = slices.Clone(state.RecentTurns)
	l.setPhase(PhaseLive)
	l.ready = l.sessionInfo()
	if err := l.register(); err != nil {
		return DisposeResult{}, err
	}
	return l.runLive()
}
