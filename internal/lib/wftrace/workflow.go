// Package wftrace is the workflow side of sessionflow's tracing: the trace
// context carried in Temporal headers (Carrier, HeaderCarrier), the span of
// a turn started by workflow code with ids derived from the workflow's
// identity (StartWorkflowSpan), so that replays and other workers agree on
// it, and the id generator that exports such a span under those ids.
//
// It imports only the OpenTelemetry API (go.opentelemetry.io/otel and its
// trace package) and the Temporal SDK: no OpenTelemetry SDK, no exporter,
// no sessionflow package, so that workflow code compiles without them. The
// process's exporter setup, which installs these spans on a worker, is
// internal/app/telemetry.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 1 of
// the house, internal/lib. It imports no sessionflow package; every package
// may import it.
package wftrace

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

// spansKey is the workflow context key of the worker's *Spans.
type spansKey struct{}

// ScopeName is the instrumentation scope of sessionflow's own spans.
const ScopeName = "github.com/sessionflow/sessionflow"

// SpanContextKey returns the workflow context key under which the Temporal
// tracing interceptor keeps the current span: the contrib tracer's
// TracerOptions.SpanContextKey (go.temporal.io/sdk/contrib/opentelemetry)
// must be this key for WorkflowSpan.Context to parent the spans started
// under it.
func SpanContextKey() any { return spanContextKey{} }

// Spans is what workflow code needs of a worker's tracing to start and
// export WorkflowSpans: the tracer provider that exports them and the
// Temporal tracer the tracing interceptor is built on.
type Spans struct {
	provider trace.TracerProvider
	tracer   interceptor.Tracer
}

// NewSpans returns the Spans of a worker whose spans provider exports; the
// provider's id generator must be an IDGenerator, so that a WorkflowSpan is
// exported under its derived ids. temporal is the Temporal tracer created
// with SpanContextKey; build the tracing interceptor on Tracer, not on it.
func NewSpans(provider trace.TracerProvider, temporal interceptor.Tracer) *Spans {
	return &Spans{provider: provider, tracer: &wfTracer{Tracer: temporal}}
}

// Tracer returns the Temporal tracer to build the tracing interceptor on
// (interceptor.NewTracingInterceptor): the one given to NewSpans, which
// also takes a WorkflowSpan as a parent.
func (s *Spans) Tracer() interceptor.Tracer { return s.tracer }

// WorkerInterceptor returns the worker interceptor that offers workflow
// code these spans (StartWorkflowSpan reads them from the workflow
// context).
func (s *Spans) WorkerInterceptor() interceptor.WorkerInterceptor {
	return &workflowSpans{s: s}
}

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
	spans  *Spans
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
	spans, _ := ctx.Value(spansKey{}).(*Spans)
	if spans == nil {
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
	s := &WorkflowSpan{spans: spans, name: name, sc: sc, parent: psc, start: start, attrs: attrs}
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
	_, span := s.spans.provider.Tracer(ScopeName).Start(pctx, s.name,
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
// worker's spans (StartWorkflowSpan reads them from the context).
type workflowSpans struct {
	interceptor.WorkerInterceptorBase
	s *Spans
}

// InterceptWorkflow wraps a workflow execution.
func (w *workflowSpans) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &workflowSpansInbound{s: w.s}
	i.Next = next
	return i
}

type workflowSpansInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	s *Spans
}

// ExecuteWorkflow runs the workflow with the spans in its context.
func (w *workflowSpansInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return w.Next.ExecuteWorkflow(workflow.WithValue(ctx, spansKey{}, w.s), in)
}

// Context returns ctx with s as the current span: the activities and child
// workflows scheduled under it become the span's children. A nil span
// returns ctx.
func (s *WorkflowSpan) Context(ctx workflow.Context) workflow.Context {
	if s == nil {
		return ctx
	}
	ref, err := s.spans.tracer.UnmarshalSpan(carrierOf(s.sc))
	if err != nil || ref == nil {
		return ctx
	}
	return workflow.WithValue(ctx, spanContextKey{}, &workflowSpan{sc: s.sc, ref: ref})
}
