package workflows

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/wire"
)

// compensation is one undo step of the rollback stack.
type compensation struct {
	step string
	fn   func(ctx workflow.Context) error
}

// nextHandleID returns a fresh handle id: a per-run random nonce recorded
// once through SideEffect, and a counter, so replays choose the same ids and
// no two runs share one.
func (l *lifecycle) nextHandleID() string {
	if l.nonce == "" {
		_ = workflow.SideEffect(l.dctx, func(workflow.Context) any {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			return hex.EncodeToString(b)
		}).Get(&l.nonce)
	}
	l.handleN++
	return fmt.Sprintf("h-%s-%d", l.nonce, l.handleN)
}

func (l *lifecycle) owner() wire.Owner {
	info := workflow.GetInfo(l.ctx)
	return wire.Owner{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}
}

// chooseHandle picks the write handle id before the create or open
// activity runs and pushes its close: a compensation closes the handle id
// whatever happened to the activity.
func (l *lifecycle) chooseHandle() wire.HandleRef {
	ref := wire.HandleRef{SessionID: l.id, HandleID: l.nextHandleID(), Access: wire.AccessWrite}
	l.ref = &ref
	l.push("close-handle", func(ctx workflow.Context) error {
		err := l.closeHandle(ctx)
		l.handleOpen = false
		return err
	})
	return ref
}

func (l *lifecycle) closeHandle(ctx workflow.Context) error {
	return unwrapActivity(workflow.ExecuteActivity(l.storeCtx(ctx), acts.CloseHandle,
		activities.HandleInput{Ref: *l.ref}).Get(ctx, nil))
}

// pushDisposeHook pushes the agent machine's teardown (the dispose hook).
func (l *lifecycle) pushDisposeHook() {
	if l.hooks.DisposeActivity == "" {
		return
	}
	l.push("dispose-hook", func(ctx workflow.Context) error {
		return unwrapActivity(workflow.ExecuteActivity(l.hookCtx(ctx), l.hooks.DisposeActivity,
			DisposeInput{SessionID: l.id, Reason: "rollback"}).Get(ctx, nil))
	})
}

func (l *lifecycle) push(step string, fn func(workflow.Context) error) {
	l.comps = append(l.comps, compensation{step: step, fn: fn})
}

// unwind runs the compensation stack in reverse in a disconnected context,
// recording (and logging) every compensation error and swallowing it.
func (l *lifecycle) unwind() {
	ctx, _ := workflow.NewDisconnectedContext(l.ctx)
	for i := len(l.comps) - 1; i >= 0; i-- {
		c := l.comps[i]
		if err := c.fn(ctx); err != nil {
			l.compErrs = append(l.compErrs, CompensationError{Step: c.step, Error: errorInfo(err)})
			workflow.GetLogger(l.ctx).Warn("compensation failed", "session", l.id, "step", c.step, "error", errorMessage(err))
		}
	}
	l.comps = nil
}

// fail records the failure, unwinds the compensation stack, waits for
// abandoned steps and running handlers, and returns err unchanged. WaitReady
// returns the failure once the rollback is done, in the workflow task that
// completes the run: a caller who sees it can start a new run of the id at
// once (runs recorded before the failAfterRollback change answered first).
func (l *lifecycle) fail(err error) error {
	l.failure = err
	answerLate := workflow.GetVersion(l.dctx, failAfterRollbackChange, workflow.DefaultVersion, 1) >= 1
	l.failureAnswered = !answerLate
	workflow.GetLogger(l.ctx).Info("session lifecycle failed", "session", l.id, "error", errorMessage(err))
	l.unwind()
	for _, f := range l.outstanding {
		_ = f.Get(l.dctx, nil)
	}
	l.outstanding = nil
	l.setPhase(PhaseClosed)
	l.failureAnswered = true
	l.awaitHandlers()
	return err
}

func (l *lifecycle) awaitHandlers() {
	_ = workflow.Await(l.dctx, func() bool { return workflow.AllHandlersFinished(l.dctx) })
}
