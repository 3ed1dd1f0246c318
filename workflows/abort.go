package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

func (l *lifecycle) normalizeAbort(a AbortRequest) error {
	if a.IsError {
		typ := a.Type
		if typ == "" {
			typ = ErrTypeError
		}
		return temporal.NewNonRetryableApplicationError(a.Reason, typ, nil)
	}
	return CreationAbortedError(l.id, a.Reason)
}

// preLive reports whether the lifecycle has not published yet.
func (l *lifecycle) preLive() bool {
	return l.phase == PhasePreparing || l.phase == PhaseSetup || l.phase == PhaseCommitting
}

// setAbort records the first abort and cancels the step in flight.
func (l *lifecycle) setAbort(err error) {
	if l.abortErr != nil || !l.preLive() {
		return
	}
	l.abortErr = err
	if l.stepCancel != nil {
		l.stepCancel()
	}
}

// onCancel handles the root context's cancellation: before live it aborts
// (with a reason signalled earlier, else `creation aborted`); while live it
// disposes.
func (l *lifecycle) onCancel(abortChs, ownerChs []workflow.ReceiveChannel) {
	if l.cancelSeen {
		return
	}
	l.cancelSeen = true
	l.drainSignals(abortChs, ownerChs)
	if l.preLive() {
		l.setAbort(CreationAbortedError(l.id, ""))
		return
	}
	l.requestDispose()
}

func (l *lifecycle) drainSignals(abortChs, ownerChs []workflow.ReceiveChannel) {
	for _, abortCh := range abortChs {
		for {
			var a AbortRequest
			if !abortCh.ReceiveAsync(&a) {
				break
			}
			l.onAbort(a)
		}
	}
	for _, ownerCh := range ownerChs {
		for ownerCh.ReceiveAsync(nil) {
			l.onOwnerUnload()
		}
	}
}

func (l *lifecycle) onAbort(a AbortRequest) {
	if l.preLive() {
		l.setAbort(l.normalizeAbort(a))
	}
}

func (l *lifecycle) onOwnerUnload() {
	if l.preLive() {
		l.setAbort(OwnerDisposedError(l.id))
		return
	}
	l.requestDispose()
}

func (l *lifecycle) requestDispose() {
	if l.phase == PhaseLive {
		l.disposeWanted = true
		// A running turn ends first, aborted with cause "disposed".
		l.cancelTurn(l.agent.turn, CauseDisposed)
	}
}

// watch receives the Abort and OwnerUnload signals (under their current and
// their legacy names) and the root cancellation for the whole run.
func (l *lifecycle) watch() {
	abortChs := signalChannels(l.ctx, SignalAbort, LegacySignalAbort)
	ownerChs := signalChannels(l.ctx, SignalOwnerUnload, LegacySignalOwnerUnload)
	root := l.ctx
	workflow.Go(l.dctx, func(gctx workflow.Context) {
		rootDone := false
		for {
			sel := workflow.NewSelector(gctx)
			for _, abortCh := range abortChs {
				sel.AddReceive(abortCh, func(c workflow.ReceiveChannel, _ bool) {
					var a AbortRequest
					c.Receive(gctx, &a)
					l.onAbort(a)
				})
			}
			for _, ownerCh := range ownerChs {
				sel.AddReceive(ownerCh, func(c workflow.ReceiveChannel, _ bool) {
					c.Receive(gctx, nil)
					l.onOwnerUnload()
				})
			}
			if !rootDone {
				sel.AddReceive(root.Done(), func(workflow.ReceiveChannel, bool) {
					rootDone = true
					l.onCancel(abortChs, ownerChs)
				})
			}
			sel.Select(gctx)
		}
	})
}

// syncCancel makes sure a root cancellation is accounted for before a
// decision, even if the watcher has not run yet in this workflow task. The
// watcher accounts for it: an Abort or OwnerUnload signal that arrived in
// the same workflow task as the cancellation is already held by the
// watcher's blocked selector, where a receive from here would not see it,
// so the decision waits until the watcher has handled that signal and then
// the cancellation.
func (l *lifecycle) syncCancel() {
	if l.ctx.Err() != nil && !l.cancelSeen {
		_ = workflow.Await(l.dctx, func() bool { return l.cancelSeen })
	}
}

// checkAbort returns the normalized abort, if any.
func (l *lifecycle) checkAbort() error {
	l.syncCancel()
	return l.abortErr
}

// race runs a step that an abort interrupts: it waits for the future start
// returns or for an abort, whichever comes first. On an abort it cancels the
// step and returns the normalized reason at once; the abandoned step is
// awaited (it runs with wait-for-cancellation) only after the rollback.
func (l *lifecycle) race(start func(workflow.Context) workflow.Future, out any) error {
	if err := l.checkAbort(); err != nil {
		return err
	}
	sctx, cancel := workflow.WithCancel(l.ctx)
	f := start(sctx)
	l.stepCancel = cancel
	_ = workflow.Await(l.dctx, func() bool { return f.IsReady() || l.abortErr != nil || l.ctx.Err() != nil })
	l.stepCancel = nil
	if err := l.checkAbort(); err != nil {
		cancel()
		if !f.IsReady() {
			l.outstanding = append(l.outstanding, f)
		}
		return err
	}
	return unwrapActivity(f.Get(l.dctx, out))
}
