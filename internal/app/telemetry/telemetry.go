// Package telemetry is a sessionflow process's OpenTelemetry tracing setup:
// a tracer provider that exports over OTLP when the standard
// OTEL_EXPORTER_OTLP_* variables ask for it (and is off otherwise), the
// Temporal SDK's tracing interceptor for clients and workers, and the
// worker interceptor that offers workflow code the span of a turn
// (internal/lib/wftrace, whose spans it exports under their derived ids).
//
// It is program wiring: it imports the OpenTelemetry SDK and its OTLP
// exporters, the Temporal SDK and its OpenTelemetry contrib module, and
// internal/lib/wftrace; only programs (workers, the starter, tests) import
// it, never workflow code.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring (internal/app). It may import any package below the
// client's row, the client and the other program-wiring packages; only
// programs and tests import it.
package telemetry

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

	"github.com/sessionflow/sessionflow/internal/lib/wftrace"
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
	sdk   *sdktrace.TracerProvider
	spans *wftrace.Spans
	icpt  interceptor.Interceptor
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
		sdktrace.WithIDGenerator(wftrace.NewIDGenerator()),
	)
	tracer, err := temporalotel.NewTracer(temporalotel.TracerOptions{
		Tracer:         tp.Tracer("temporal-sdk-go"),
		SpanContextKey: wftrace.SpanContextKey(),
		// Watching a turn polls queries many times a second: each poll
		// would be a trace of its own, and a replay re-creates the
		// handler's span.
		DisableQueryTracing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("the Temporal tracer: %w", err)
	}
	spans := wftrace.NewSpans(tp, tracer)
	return &Tracing{sdk: tp, spans: spans, icpt: interceptor.NewTracingInterceptor(spans.Tracer())}, nil
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
	return append(out, t.spans.WorkerInterceptor())
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
