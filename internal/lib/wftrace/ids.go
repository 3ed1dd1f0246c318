package wftrace

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// forcedIDs are the ids a span started under a context carrying them gets
// from the provider's id generator.
type forcedIDs struct {
	traceID trace.TraceID
	spanID  trace.SpanID
}

type forcedIDsKey struct{}

// withForcedIDs returns ctx with ids the next span started under it takes.
func withForcedIDs(ctx context.Context, ids forcedIDs) context.Context {
	return context.WithValue(ctx, forcedIDsKey{}, ids)
}

// IDGenerator is the OpenTelemetry SDK's random id generator, except for a
// span started under a context carrying forced ids: that one takes the
// given ids. This is how a WorkflowSpan, whose id was derived in workflow
// code (and already named as the parent of other spans), is exported under
// that id. A tracer provider that exports workflow spans takes it as its
// id generator (sdktrace.WithIDGenerator).
type IDGenerator struct {
	mu  sync.Mutex
	rnd *rand.ChaCha8
}

// NewIDGenerator returns an IDGenerator seeded from crypto/rand.
func NewIDGenerator() *IDGenerator {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	return &IDGenerator{rnd: rand.NewChaCha8(seed)}
}

// NewIDs returns a new trace and span id.
func (g *IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(forcedIDsKey{}).(forcedIDs); ok {
		return f.traceID, f.spanID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var tid trace.TraceID
	for !tid.IsValid() {
		_, _ = g.rnd.Read(tid[:])
	}
	return tid, g.randomSpanID()
}

// NewSpanID returns a new span id in traceID.
func (g *IDGenerator) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(forcedIDsKey{}).(forcedIDs); ok && f.traceID == traceID {
		return f.spanID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.randomSpanID()
}

// randomSpanID returns a valid random span id; g.mu is held.
func (g *IDGenerator) randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		_, _ = g.rnd.Read(sid[:])
	}
	return sid
}

// derivedIDs derives a trace id and a span id from parts: the same parts
// give the same ids in every process.
func derivedIDs(parts ...string) (trace.TraceID, trace.SpanID) {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	if !tid.IsValid() {
		tid[15] = 1
	}
	if !sid.IsValid() {
		sid[7] = 1
	}
	return tid, sid
}
