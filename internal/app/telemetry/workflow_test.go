package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/internal/app/telemetry"
	"github.com/sessionflow/sessionflow/internal/lib/wftrace"
)

// spanFlow starts a workflow span (parented by the carrier it is given),
// runs an activity under it and one outside it, and ends the span.
func spanFlow(ctx workflow.Context, parent wftrace.Carrier) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	sctx, span := wftrace.StartWorkflowSpan(ctx, "turn-span", "turn/1", parent, workflow.Now(ctx), attribute.Int64("n", 1))
	if err := workflow.ExecuteActivity(sctx, "Inner").Get(ctx, nil); err != nil {
		return "", err
	}
	if err := workflow.ExecuteActivity(ctx, "Outside").Get(ctx, nil); err != nil {
		return "", err
	}
	span.End(ctx, workflow.Now(ctx), "it failed", attribute.String("end", "yes"))
	return span.SpanContext().SpanID().String(), nil
}

func runSpanFlow(t *testing.T, tr *telemetry.Tracing, parent wftrace.Carrier) string {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: tr.WorkerInterceptors(false)})
	env.RegisterWorkflowWithOptions(spanFlow, workflow.RegisterOptions{Name: "SpanFlow"})
	inner := func(ctx context.Context) error {
		_, s := tr.TracerProvider().Tracer("test").Start(ctx, "inner-work")
		s.End()
		return nil
	}
	env.RegisterActivityWithOptions(inner, activity.RegisterOptions{Name: "Inner"})
	env.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "Outside"})
	env.ExecuteWorkflow("SpanFlow", parent)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var id string
	require.NoError(t, env.GetWorkflowResult(&id))
	return id
}

func byName(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "spans named %q", name)
	return found[0]
}

// TestWorkflowSpan: a span started in workflow code is exported once,
// with the ids it announced, its start and end times and attributes, an
// error status when ended with one; the activities scheduled under it are
// its children through the Temporal interceptor's StartActivity and
// RunActivity spans, and the spans an activity starts are theirs; an
// activity scheduled outside it is not. Its ids are derived, so a second
// run of the same workflow names the same span.
func TestWorkflowSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := telemetry.New(context.Background(), telemetry.Options{Exporter: exp})
	require.NoError(t, err)
	id := runSpanFlow(t, tr, nil)
	spans := exp.GetSpans()

	turn := byName(t, spans, "turn-span")
	require.Equal(t, id, turn.SpanContext.SpanID().String())
	require.False(t, turn.Parent.IsValid(), "without a carrier the span is a root")
	require.Equal(t, codes.Error, turn.Status.Code)
	require.Contains(t, turn.Attributes, attribute.Int64("n", 1))
	require.Contains(t, turn.Attributes, attribute.String("end", "yes"))
	require.False(t, turn.StartTime.IsZero())
	require.False(t, turn.EndTime.Before(turn.StartTime))

	start := byName(t, spans, "StartActivity:Inner")
	require.Equal(t, turn.SpanContext.SpanID(), start.Parent.SpanID())
	require.Equal(t, turn.SpanContext.TraceID(), start.SpanContext.TraceID())
	run := byName(t, spans, "RunActivity:Inner")
	require.Equal(t, start.SpanContext.SpanID(), run.Parent.SpanID())
	inner := byName(t, spans, "inner-work")
	require.Equal(t, run.SpanContext.SpanID(), inner.Parent.SpanID())
	outside := byName(t, spans, "StartActivity:Outside")
	require.NotEqual(t, turn.SpanContext.SpanID(), outside.Parent.SpanID())
	require.NotEqual(t, turn.SpanContext.TraceID(), outside.SpanContext.TraceID())

	exp.Reset()
	require.Equal(t, id, runSpanFlow(t, tr, nil), "the same workflow and key name the same span")
	require.Equal(t, turn.SpanContext.TraceID(), byName(t, exp.GetSpans(), "turn-span").SpanContext.TraceID())
}

// TestWorkflowSpanParent: a carrier (the trace context of an update's
// header) makes the span its child, in its trace.
func TestWorkflowSpanParent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := telemetry.New(context.Background(), telemetry.Options{Exporter: exp})
	require.NoError(t, err)
	parent := wftrace.Carrier{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	runSpanFlow(t, tr, parent)
	turn := byName(t, exp.GetSpans(), "turn-span")
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", turn.SpanContext.TraceID().String())
	require.Equal(t, "b7ad6b7169203331", turn.Parent.SpanID().String())
	require.True(t, turn.Parent.IsRemote())
	run := byName(t, exp.GetSpans(), "RunActivity:Inner")
	require.Equal(t, turn.SpanContext.TraceID(), run.SpanContext.TraceID())
}

// TestWorkflowSpanOff: without the worker's tracing, workflow code gets a
// nil span whose methods do nothing.
func TestWorkflowSpanOff(t *testing.T) {
	off, err := telemetry.New(context.Background(), telemetry.Options{LookupEnv: env()})
	require.NoError(t, err)
	runSpanFlow(t, off, nil)
	var s *wftrace.WorkflowSpan
	require.Equal(t, trace.SpanContext{}, s.SpanContext())
}
