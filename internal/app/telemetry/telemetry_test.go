package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sessionflow/sessionflow/internal/app/telemetry"
)

// env is a fake environment for telemetry.Options.LookupEnv.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestOffWithoutEndpoint: without an OTLP endpoint (or with the SDK
// disabled, or the traces exporter "none") tracing is off: no interceptor,
// a provider whose spans record nothing, and Shutdown does nothing.
func TestOffWithoutEndpoint(t *testing.T) {
	for name, lookup := range map[string]func(string) (string, bool){
		"no variables":      env(),
		"empty endpoint":    env("OTEL_EXPORTER_OTLP_ENDPOINT", " "),
		"sdk disabled":      env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_SDK_DISABLED", "true"),
		"exporter none":     env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER", "none"),
		"only the protocol": env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := telemetry.New(context.Background(), telemetry.Options{LookupEnv: lookup})
			require.NoError(t, err)
			require.False(t, tr.Enabled())
			require.Nil(t, tr.Interceptor())
			require.Empty(t, tr.ClientInterceptors())
			require.Empty(t, tr.WorkerInterceptors(false))
			_, span := tr.TracerProvider().Tracer("x").Start(context.Background(), "s")
			require.False(t, span.IsRecording())
			require.False(t, span.SpanContext().IsValid())
			require.NoError(t, tr.Shutdown(context.Background()))
		})
	}
	var nilTracing *telemetry.Tracing
	require.False(t, nilTracing.Enabled())
	require.Nil(t, nilTracing.Interceptor())
}

// TestUnsupportedProtocol: a protocol the exporters do not speak is a
// typed error, not a silent fallback.
func TestUnsupportedProtocol(t *testing.T) {
	_, err := telemetry.New(context.Background(), telemetry.Options{LookupEnv: env(
		"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")})
	require.ErrorIs(t, err, telemetry.ErrUnsupportedProtocol)
	require.ErrorContains(t, err, `"http/json"`)
}

// spanNames returns the names of the spans of an OTLP export request.
func spanNames(req *collectorpb.ExportTraceServiceRequest) []string {
	var out []string
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				out = append(out, s.GetName())
			}
		}
	}
	return out
}

func serviceName(req *collectorpb.ExportTraceServiceRequest) string {
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				return a.GetValue().GetStringValue()
			}
		}
	}
	return ""
}

// TestExportsOverOTLPHTTP: with OTEL_EXPORTER_OTLP_ENDPOINT alone the
// spans go to <endpoint>/v1/traces as OTLP http/protobuf (the default
// protocol), batched, and Shutdown flushes them.
func TestExportsOverOTLPHTTP(t *testing.T) {
	var (
		mu    sync.Mutex
		names []string
		svc   string
		paths []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectorpb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		names = append(names, spanNames(&req)...)
		svc = serviceName(&req)
		paths = append(paths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "svc-under-test")
	tr, err := telemetry.New(context.Background(), telemetry.Options{})
	require.NoError(t, err)
	require.True(t, tr.Enabled())
	require.NotNil(t, tr.Interceptor())
	_, span := tr.TracerProvider().Tracer("x").Start(context.Background(), "exported-span")
	span.End()
	mu.Lock()
	require.Empty(t, names, "spans are batched until a flush")
	mu.Unlock()
	require.NoError(t, tr.Shutdown(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"exported-span"}, names)
	require.Equal(t, "svc-under-test", svc)
	require.Equal(t, []string{"POST /v1/traces application/x-protobuf"}, paths)
}

// collector is an OTLP gRPC trace service recording span names.
type collector struct {
	collectorpb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (c *collector) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, spanNames(req)...)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// TestExportsOverOTLPGRPC: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc with the
// traces endpoint exports to an OTLP gRPC collector.
func TestExportsOverOTLPGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	c := &collector{}
	collectorpb.RegisterTraceServiceServer(gs, c)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
	tr, err := telemetry.New(context.Background(), telemetry.Options{})
	require.NoError(t, err)
	_, span := tr.TracerProvider().Tracer("x").Start(context.Background(), "grpc-span")
	span.End()
	require.NoError(t, tr.Shutdown(context.Background()))
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Equal(t, []string{"grpc-span"}, c.names)
}
