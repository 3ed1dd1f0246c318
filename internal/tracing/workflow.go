package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// headerKey is the Temporal header field the SDKs' tracing interceptors
// carry the trace context in.
const headerKey = "_tracer-data"

// spanContextKey is the workflow context key under which the tracing
// interceptor keeps the current span (TracerOptions.SpanContextKey).
type spanContextKey struct{}

// tracingKey is the workflow context key of the worker's *Tracing.
type tracingKey struct{}

// Carrier is a serialized trace context (W3C traceparent, tracestate,
// baggage), as the tracing interceptor carries it in Temporal headers.
type Carrier map[string]string

// HeaderCarrier returns the trace context of the message being handled
// (the Temporal header of an update, a signal or the workflow's start), or
// nil when it carries none. Headers are part of the history, so a replay
// reads the same carrier.
func HeaderCarrier(ctx workflow.Context) Carrier {
	p := interceptor.WorkflowHeader(ctx)[headerKey]
	if p == nil {
		return nil
	}
	var c Carrier
	if err := converter.GetDefaultDataConverter().FromPayload(p, &c); err != nil || c["traceparent"] == "" {
		return nil
	}
	return c
}

// WorkflowSpan is a span started by workflow code with StartWorkflowSpan.
// Its ids are derived from the workflow's identity and a key, so every
// replay of the workflow, on any worker, names the same span: the spans of
// activities scheduled under it are its children wherever they run, and it
// is exported once, by the worker that runs its end for the first time.
// A nil *WorkflowSpan does nothing.
type WorkflowSpan struct {
	t      *Tracing
	name   string
	sc     trace.SpanContext
	parent trace.SpanContext
	start  time.Time
	attrs  []attribute.KeyValue
}

// workflowSpan is a WorkflowSpan as the tracing interceptor keeps it in a
// workflow context: the parent of the spans started under it.
type workflowSpan struct {
	sc  trace.SpanContext
	ref interceptor.TracerSpanRef
}

// Finish does nothing: a WorkflowSpan ends with its End method.
func (*workflowSpan) Finish(*interceptor.TracerFinishSpanOptions) {}

// StartWorkflowSpan starts a span in workflow code at start (a time from
// workflow.Now) and returns the context under which activities and child
// workflows scheduled become its children. key tells the workflow's spans
// apart (e.g. "turn/3"); parent, when valid, is the span's parent (e.g. the
// HeaderCarrier of the update that caused it), otherwise the span is the
// root of a trace whose id is derived from the same identity. Without the
// worker's tracing (no interceptor, as in a replayer) it returns ctx and a
// nil span.
func StartWorkflowSpan(ctx workflow.Context, name, key string, parent Carrier, start time.Time, attrs ...attribute.KeyValue) (workflow.Context, *WorkflowSpan) {
	t, _ := ctx.Value(tracingKey{}).(*Tracing)
	if !t.Enabled() {
		return ctx, nil
	}
	info := workflow.GetInfo(ctx)
	tid, sid := derivedIDs(info.Namespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, key)
	psc := parent.spanContext()
	if psc.IsValid() {
		tid = psc.TraceID()
	}
	flags := trace.FlagsSampled
	if psc.IsValid() {
		flags = psc.TraceFlags()
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	s := &WorkflowSpan{t: t, name: name, sc: sc, parent: psc, start: start, attrs: attrs}
	return s.Context(ctx), s
}

// SpanContext returns the span's context; invalid for a nil span.
func (s *WorkflowSpan) SpanContext() trace.SpanContext {
	if s == nil {
		return trace.SpanContext{}
	}
	return s.sc
}

// End exports the span, ending at end (a time from workflow.Now), with more
// attributes and, when errText is not empty, an error status. A replay does
// not export it again.
func (s *WorkflowSpan) End(ctx workflow.Context, end time.Time, errText string, attrs ...attribute.KeyValue) {
	if s == nil || workflow.IsReplaying(ctx) {
		return
	}
	s.export(end, errText, attrs) //workflowcheck:ignore exporting a span sends nothing to the workflow's history
}

func (s *WorkflowSpan) export(end time.Time, errText string, attrs []attribute.KeyValue) {
	pctx := context.Background()
	if s.parent.IsValid() {
		pctx = trace.ContextWithRemoteSpanContext(pctx, s.parent)
	}
	pctx = withForcedIDs(pctx, forcedIDs{traceID: s.sc.TraceID(), spanID: s.sc.SpanID()})
	_, span := s.t.sdk.Tracer(ScopeName).Start(pctx, s.name,
		trace.WithTimestamp(s.start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(s.attrs...), trace.WithAttributes(attrs...))
	if errText != "" {
		span.SetStatus(codes.Error, errText)
	}
	span.End(trace.WithTimestamp(end))
}

func (c Carrier) spanContext() trace.SpanContext {
	if len(c) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(c)))
}

func carrierOf(sc trace.SpanContext) map[string]string {
	m := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), m)
	return m
}

// wfTracer is the contrib tracer that also takes a workflowSpan as a
// parent.
type wfTracer struct {
	interceptor.Tracer
}

// StartSpan starts a span; a workflowSpan parent is passed on as the span
// reference it stands for.
func (t *wfTracer) StartSpan(opts *interceptor.TracerStartSpanOptions) (interceptor.TracerSpan, error) {
	if p, ok := opts.Parent.(*workflowSpan); ok {
		o := *opts
		o.Parent = p.ref
		return t.Tracer.StartSpan(&o)
	}
	return t.Tracer.StartSpan(opts)
}

// MarshalSpan serializes a span for a header.
func (t *wfTracer) MarshalSpan(span interceptor.TracerSpan) (map[string]string, error) {
	if p, ok := span.(*workflowSpan); ok {
		return carrierOf(p.sc), nil
	}
	return t.Tracer.MarshalSpan(span)
}

// workflowSpans is the worker interceptor that offers workflow code the
// worker's tracing (StartWorkflowSpan reads it from the context).
type workflowSpans struct {
	interceptor.WorkerInterceptorBase
	t *Tracing
}

// InterceptWorkflow wraps a workflow execution.
func (w *workflowSpans) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &workflowSpansInbound{t: w.t}
	i.Next = next
	return i
}

type workflowSpansInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	t *Tracing
}

// ExecuteWorkflow runs the workflow with the tracing in its context.
func (w *workflowSpansInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return w.Next.ExecuteWorkflow(workflow.WithValue(ctx, tracingKey{}, w.t), in)
}

// Context returns ctx with s as the current span: the activities and child
// workflows scheduled under it become the span's children. A nil span
// returns ctx.
func (s *WorkflowSpan) Context(ctx workflow.Context) workflow.Context {
	if s == nil {
		return ctx
	}
	ref, err := s.t.tracer.UnmarshalSpan(carrierOf(s.sc))
	if err != nil || ref == nil {
		return ctx
	}
	return workflow.WithValue(ctx, spanContextKey{}, &workflowSpan{sc: s.sc, ref: ref})
}
