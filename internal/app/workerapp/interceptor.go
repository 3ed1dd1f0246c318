package workerapp

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// workerInterceptor applies the worker's append window to session requests
// that leave it unset and counts the closers appended by repairs.
type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	// appendWindowMs is the window to apply; 0 leaves requests unchanged.
	appendWindowMs int64
	metrics        *Metrics
}

func newWorkerInterceptor(cfg Config, m *Metrics) *workerInterceptor {
	i := &workerInterceptor{metrics: m}
	if cfg.AppendWindow > 0 {
		i.appendWindowMs = cfg.AppendWindow.Milliseconds()
		if i.appendWindowMs == 0 {
			i.appendWindowMs = 1
		}
	}
	return i
}

// InterceptActivity wraps activity executions.
func (i *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &activityInbound{parent: i}
	a.Next = next
	return a
}

// InterceptWorkflow wraps workflow executions.
func (i *workerInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	w := &workflowInbound{parent: i}
	w.Next = next
	return w
}

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	parent *workerInterceptor
}

// ExecuteActivity runs the activity and counts the closers of a repair.
func (a *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	if err == nil && a.parent.metrics != nil && isRepair(activity.GetInfo(ctx).ActivityType.Name) {
		if r, ok := res.(activities.RepairResult); ok {
			a.parent.metrics.ClosersAppended(r.Closers)
		}
	}
	return res, err
}

// isRepair reports whether an activity type is the crash repair, under its
// current or its earlier name.
func isRepair(name string) bool {
	return name == wire.RepairName || name == wire.LegacyRepairAndMarkName
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	parent *workerInterceptor
}

// ExecuteWorkflow fills the append window of a session request that leaves
// it unset. The window only times the coalescing of appends: it changes no
// command, so a replay under another window stays deterministic.
func (w *workflowInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if ms := w.parent.appendWindowMs; ms > 0 && len(in.Args) == 1 {
		switch req := in.Args[0].(type) {
		case workflows.CreateSessionRequest:
			req.Options = withAppendWindow(req.Options, ms)
			in.Args[0] = req
		case wire.ResumeSessionRequest:
			req.Options = withAppendWindow(req.Options, ms)
			in.Args[0] = req
		case workflows.LiveState:
			req.Options = withAppendWindow(req.Options, ms)
			in.Args[0] = req
		case wire.SessionLoopInput:
			req.Options = withAppendWindow(req.Options, ms)
			in.Args[0] = req
		}
	}
	return w.Next.ExecuteWorkflow(ctx, in)
}

// withAppendWindow returns o with AppendWindowMs set to ms when unset,
// copying rather than changing the caller's options.
func withAppendWindow(o *wire.Options, ms int64) *wire.Options {
	var out wire.Options
	if o != nil {
		if o.AppendWindowMs != 0 {
			return o
		}
		out = *o
	}
	out.AppendWindowMs = ms
	return &out
}
