package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// abortGuard is what interrupts a run before it is live: the Abort and
// OwnerUnload signals and the root cancellation (watch), the first abort
// they cause, and the step in flight it cancels (race). Once live, they
// ask for disposal instead (dispose). Only its methods write its fields.
type abortGuard struct {
	*env
	// phase is read: whether the run is before publication.
	phase *phaseState
	// dispose asks a live session to dispose (lifecycle.requestDispose).
	dispose func()

	abortErr   error
	stepCancel workflow.CancelFunc
	cancelSeen bool
	// outstanding are the steps abandoned to an abort, awaited after the
	// rollback.
	outstanding []workflow.Future
}

// normalizeAbort is the error of the abort a: the caller's error, or
// `creation aborted` with its reason.
func normalizeAbort(id string, a wire.AbortRequest) error {
	if a.IsError {
		typ := a.Type
		if typ == "" {
			typ = wire.ErrTypeError
		}
		return temporal.NewNonRetryableApplicationError(a.Reason, typ, nil)
	}
	return CreationAbortedError(id, a.Reason)
}

// setAbort records the first abort and cancels the step in flight.
func (g *abortGuard) setAbort(err error) {
	if g.abortErr != nil || !g.phase.preLive() {
		return
	}
	g.abortErr = err
	if g.stepCancel != nil {
		g.stepCancel()
	}
}

// onCancel handles the root context's cancellation: before live it aborts
// (with a reason signalled earlier, else `creation aborted`); while live it
// disposes.
func (g *abortGuard) onCancel(abortChs, ownerChs []workflow.ReceiveChannel) {
	if g.cancelSeen {
		return
	}
	g.cancelSeen = true
	g.drainSignals(abortChs, ownerChs)
	if g.phase.preLive() {
		g.setAbort(CreationAbortedError(g.id, ""))
		return
	}
	g.dispose()
}

func (g *abortGuard) drainSignals(abortChs, ownerChs []workflow.ReceiveChannel) {
	for _, abortCh := range abortChs {
		for {
			var a wire.AbortRequest
			if !abortCh.ReceiveAsync(&a) {
				break
			}
			g.onAbort(a)
		}
	}
	for _, ownerCh := range ownerChs {
		for ownerCh.ReceiveAsync(nil) {
			g.onOwnerUnload()
		}
	}
}

func (g *abortGuard) onAbort(a wire.AbortRequest) {
	if g.phase.preLive() {
		g.setAbort(normalizeAbort(g.id, a))
	}
}

func (g *abortGuard) onOwnerUnload() {
	if g.phase.preLive() {
		g.setAbort(OwnerDisposedError(g.id))
		return
	}
	g.dispose()
}

// watch receives the Abort and OwnerUnload signals (under their current and
// their legacy names) and the root cancellation for the whole run.
func (g *abortGuard) watch() {
	abortChs := signalChannels(g.ctx, wire.SignalAbort, wire.LegacySignalAbort)
	ownerChs := signalChannels(g.ctx, wire.SignalOwnerUnload, wire.LegacySignalOwnerUnload)
	root := g.ctx
	workflow.Go(g.dctx, func(gctx workflow.Context) {
		rootDone := false
		for {
			sel := workflow.NewSelector(gctx)
			for _, abortCh := range abortChs {
				sel.AddReceive(abortCh, func(c workflow.ReceiveChannel, _ bool) {
					var a wire.AbortRequest
					c.Receive(gctx, &a)
					g.onAbort(a)
				})
			}
			for _, ownerCh := range ownerChs {
				sel.AddReceive(ownerCh, func(c workflow.ReceiveChannel, _ bool) {
					c.Receive(gctx, nil)
					g.onOwnerUnload()
				})
			}
			if !rootDone {
				sel.AddReceive(root.Done(), func(workflow.ReceiveChannel, bool) {
					rootDone = true
					g.onCancel(abortChs, ownerChs)
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
func (g *abortGuard) syncCancel() {
	if g.ctx.Err() != nil && !g.cancelSeen {
		_ = workflow.Await(g.dctx, func() bool { return g.cancelSeen })
	}
}

// check returns the normalized abort, if any.
func (g *abortGuard) check() error {
	g.syncCancel()
	return g.abortErr
}

// race runs a step that an abort interrupts: it waits for the future start
// returns or for an abort, whichever comes first. On an abort it cancels the
// step and returns the normalized reason at once; the abandoned step is
// awaited (it runs with wait-for-cancellation) only after the rollback.
func (g *abortGuard) race(start func(workflow.Context) workflow.Future, out any) error {
	if err := g.check(); err != nil {
		return err
	}
	sctx, cancel := workflow.WithCancel(g.ctx)
	f := start(sctx)
	g.stepCancel = cancel
	_ = workflow.Await(g.dctx, func() bool { return f.IsReady() || g.abortErr != nil || g.ctx.Err() != nil })
	g.stepCancel = nil
	if err := g.check(); err != nil {
		cancel()
		if !f.IsReady() {
			g.outstanding = append(g.outstanding, f)
		}
		return err
	}
	return unwrapActivity(f.Get(g.dctx, out))
}

// awaitAbandoned waits for the steps abandoned to an abort.
func (g *abortGuard) awaitAbandoned() {
	for _, f := range g.outstanding {
		_ = f.Get(g.dctx, nil)
	}
	g.outstanding = nil
}
