package bench

import (
	"context"

	"github.com/sessionflow/sessionflow/workflows"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Names of the baseline workflows and activity the harness registers on the
// sessionflow worker.
const (
	// NoopWorkflowName runs one no-op activity and completes: the floor of
	// what any workflow that does work costs on the server.
	NoopWorkflowName = "bench.Noop"
	// NoopActivityName is the activity of NoopWorkflowName.
	NoopActivityName = "bench.noop"
	// EntityWorkflowName is the history-bound alternative: the events live
	// in workflow state.
	EntityWorkflowName = "bench.Entity"
	// EntityQueryEvents returns the events an entity holds.
	EntityQueryEvents = "events"
	// EntitySignalDone ends an entity.
	EntitySignalDone = "done"
)

// Register registers the harness's baseline workflows and activity; pass it
// as workerapp.Config.Register.
func Register(r worker.Registry) {
	r.RegisterWorkflowWithOptions(NoopWorkflow, workflow.RegisterOptions{Name: NoopWorkflowName})
	r.RegisterActivityWithOptions(NoopActivity, activity.RegisterOptions{Name: NoopActivityName})
	r.RegisterWorkflowWithOptions(EntityWorkflow, workflow.RegisterOptions{Name: EntityWorkflowName})
}

// NoopActivity does nothing.
func NoopActivity(context.Context) error { return nil }

// NoopWorkflow runs NoopActivity once.
func NoopWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: workflowTimeout})
	return workflow.ExecuteActivity(ctx, NoopActivityName).Get(ctx, nil)
}

// EntityState is what an entity workflow carries: every event appended so
// far, and the number of runs it took.
type EntityState struct {
	// Events are the appended events, in order.
	Events []session.Event `json:"events"`
	// Runs counts the continue-as-new generations before this run.
	Runs int `json:"runs"`
	// LocalNoop runs NoopActivity as a local activity in every append
	// before it is answered: the cost of a local activity in an update's
	// workflow task, without a store.
	LocalNoop bool `json:"localNoop,omitempty"`
}

// EntityWorkflow is the pattern of Temporal's agent samples: an Append
// update adds the batch to a slice in workflow state, a query returns the
// slice, and the workflow continues as new, carrying the slice, when the
// server suggests it. It ends on the done signal.
func EntityWorkflow(ctx workflow.Context, st EntityState) (int, error) {
	if err := workflow.SetQueryHandler(ctx, EntityQueryEvents, func() ([]session.Event, error) {
		return st.Events, nil
	}); err != nil {
		return 0, err
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: workflowTimeout})
	if err := workflow.SetUpdateHandler(ctx, wire.UpdateAppend, func(ctx workflow.Context, req workflows.AppendRequest) (wire.AppendResult, error) {
		if st.LocalNoop {
			if err := workflow.ExecuteLocalActivity(lctx, NoopActivity).Get(ctx, nil); err != nil {
				return wire.AppendResult{}, err
			}
		}
		st.Events = append(st.Events, req.Events...)
		return wire.AppendResult{NextSeq: int64(len(st.Events))}, nil
	}); err != nil {
		return 0, err
	}
	done := false
	sig := workflow.GetSignalChannel(ctx, EntitySignalDone)
	workflow.Go(ctx, func(ctx workflow.Context) {
		sig.Receive(ctx, nil)
		done = true
	})
	if err := workflow.Await(ctx, func() bool {
		return done || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
	}); err != nil {
		return 0, err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return 0, err
	}
	if done {
		return len(st.Events), nil
	}
	st.Runs++
	return 0, workflow.NewContinueAsNewError(ctx, EntityWorkflowName, st)
}
