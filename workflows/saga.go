package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// saga is the compensation stack of creation and resume: the undo steps
// pushed as their side effects are taken, run in reverse by a rollback,
// and the compensation errors the rollback recorded. Only its methods
// write its fields.
type saga struct {
	*env
	comps []compensation
	errs  []wire.CompensationError
}

// compensation is one undo step of the rollback stack.
type compensation struct {
	step string
	fn   func(ctx workflow.Context) error
}

// push pushes the undo step fn, named step.
func (s *saga) push(step string, fn func(workflow.Context) error) {
	s.comps = append(s.comps, compensation{step: step, fn: fn})
}

// pushDisposeHook pushes the agent machine's teardown (the dispose hook).
func (s *saga) pushDisposeHook() {
	if s.hooks.DisposeActivity == "" {
		return
	}
	s.push("dispose-hook", func(ctx workflow.Context) error {
		return unwrapActivity(workflow.ExecuteActivity(s.act(s.set.hookCtx(ctx), "dispose hook (rollback)"), s.hooks.DisposeActivity,
			wire.DisposeInput{SessionID: s.id, Reason: "rollback"}).Get(ctx, nil))
	})
}

// clear forgets the stack: the session is live, and what it undid now
// belongs to disposal.
func (s *saga) clear() {
	s.comps = nil
}

// unwind runs the compensation stack in reverse in a disconnected context,
// recording (and logging) every compensation error and swallowing it.
func (s *saga) unwind() {
	ctx, _ := workflow.NewDisconnectedContext(s.ctx)
	for i := len(s.comps) - 1; i >= 0; i-- {
		c := s.comps[i]
		if err := c.fn(ctx); err != nil {
			s.errs = append(s.errs, wire.CompensationError{Step: c.step, Error: errorInfo(err)})
			workflow.GetLogger(s.ctx).Warn("compensation failed", "session", s.id, "step", c.step, "error", errorMessage(err))
		}
	}
	s.comps = nil
}
