// Package tracing is sessionflow's OpenTelemetry tracing: a tracer provider
// that exports over OTLP when the standard OTEL_EXPORTER_OTLP_* variables
// ask for it (and is off otherwise), the Temporal SDK's tracing interceptor
// for clients and workers, and the span of a turn, started in workflow
// code with a span id derived from the workflow's identity so that replays
// and other workers agree on it.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/interceptor"

	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// The standard OpenTelemetry environment variables New reads. The OTLP
// exporters read the rest of theirs (headers, timeouts, TLS, compression)
// themselves.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvServiceName    = "OTEL_SERVICE_NAME"
)

// OTLP protocols (the values of OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
	// DefaultProtocol is the protocol when none is set, as the
	// OpenTelemetry specification recommends.
	DefaultProtocol = ProtocolHTTPProtobuf
)

// ScopeName is the instrumentation scope of sessionflow's own spans.
const ScopeName = "github.com/sessionflow/sessionflow"

// ErrUnsupportedProtocol is the error of an OTLP protocol New cannot
// export with.
var ErrUnsupportedProtocol = errors.New("unsupported OTLP protocol")

// Options configure New.
type Options struct {
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Exporter, when set, receives every span synchronously instead of an
	// OTLP exporter, whatever the environment says (tests pass an
	// in-memory exporter).
	Exporter sdktrace.SpanExporter
	// ServiceName is the service.name resource attribute unless
	// OTEL_SERVICE_NAME sets one; empty means "sessionflow".
	ServiceName string
}

// Tracing is a process's tracing: the tracer provider and the Temporal
// interceptor that joins sessionflow's spans to Temporal's. The zero value
// and a nil *Tracing are off: a no-op provider and no interceptor.
type Tracing struct {
	sdk    *sdktrace.TracerProvider
	tracer interceptor.Tracer
	icpt   interceptor.Interceptor
}

// New returns the tracing the environment asks for: exporting over OTLP
// when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is
// set (protocol from OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL: grpc or http/protobuf, the default), off
// when neither is set, when OTEL_SDK_DISABLED=true or when
// OTEL_TRACES_EXPORTER=none. Off costs nothing: no provider, no
// interceptor. Call Shutdown to flush.
func New(ctx context.Context, opts Options) (*Tracing, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	var exporter sdktrace.SpanExporter
	sync := false
	switch {
	case opts.Exporter != nil:
		exporter, sync = opts.Exporter, true
	case strings.EqualFold(get(EnvSDKDisabled), "true"),
		strings.EqualFold(get(EnvTracesExporter), "none"),
		get(EnvEndpoint) == "" && get(EnvTracesEndpoint) == "":
		return &Tracing{}, nil
	default:
		protocol := get(EnvTracesProtocol)
		if protocol == "" {
			protocol = get(EnvProtocol)
		}
		if protocol == "" {
			protocol = DefaultProtocol
		}
		var err error
		switch protocol {
		case ProtocolGRPC:
			exporter, err = otlptracegrpc.New(ctx)
		case ProtocolHTTPProtobuf:
			exporter, err = otlptracehttp.New(ctx)
		default:
			return nil, fmt.Errorf("%s=%q: %w (use %s or %s)", EnvProtocol, protocol, ErrUnsupportedProtocol, ProtocolGRPC, ProtocolHTTPProtobuf)
		}
		if err != nil {
			return nil, fmt.Errorf("creating the OTLP trace exporter: %w", err)
		}
	}
	name := opts.ServiceName
	if name == "" {
		name = "sessionflow"
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		return nil, fmt.Errorf("the trace resource: %w", err)
	}
	if v := get(EnvServiceName); v != "" {
		res, _ = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", v)))
	}
	processor := sdktrace.NewBatchSpanProcessor(exporter)
	if sync {
		processor = sdktrace.NewSimpleSpanProcessor(exporter)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(processor),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(newIDGenerator()),
	)
	t := &Tracing{sdk: tp}
	if t.tracer, err = temporalotel.NewTracer(temporalotel.TracerOptions{
		Tracer:         tp.Tracer("temporal-sdk-go"),
		SpanContextKey: spanContextKey{},
		// Watching a turn polls queries many times a second: each poll
		// would be a trace of its own, and a replay re-creates the
		// handler's span.
		DisableQueryTracing: true,
	}); err != nil {
		return nil, fmt.Errorf("the Temporal tracer: %w", err)
	}
	t.tracer = &wfTracer{Tracer: t.tracer}
	t.icpt = interceptor.NewTracingInterceptor(t.tracer)
	return t, nil
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// TracerProvider returns the provider of sessionflow's spans: a no-op one
// when tracing is off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if !t.Enabled() {
		return noop.NewTracerProvider()
	}
	return t.sdk
}

// Interceptor returns the Temporal tracing interceptor to set on clients
// (client.Options.Interceptors, which workers built on the client inherit)
// and the interceptor that offers the turn span to workflow code (set both
// on a worker with WorkerInterceptors). It returns nil when tracing is off.
func (t *Tracing) Interceptor() interceptor.Interceptor {
	if !t.Enabled() {
		return nil
	}
	return t.icpt
}

// ClientInterceptors returns the interceptors to append to a client's
// options: none when tracing is off.
func (t *Tracing) ClientInterceptors() []interceptor.ClientInterceptor {
	if !t.Enabled() {
		return nil
	}
	return []interceptor.ClientInterceptor{t.icpt}
}

// WorkerInterceptors returns the interceptors to append to a worker's
// options: the tracing interceptor (unless the worker's client already
// carries it) and the one that offers workflow code its spans. None when
// tracing is off.
func (t *Tracing) WorkerInterceptors(clientTraced bool) []interceptor.WorkerInterceptor {
	if !t.Enabled() {
		return nil
	}
	out := []interceptor.WorkerInterceptor{}
	if !clientTraced {
		out = append(out, t.icpt)
	}
	return append(out, &workflowSpans{t: t})
}

// Shutdown flushes the spans not yet exported and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flushing traces: %w", err)
	}
	return nil
}

// ForceFlush exports the spans not yet exported.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.sdk.ForceFlush(ctx)
}
