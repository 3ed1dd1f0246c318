package wftrace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// TestIDGeneratorForcedIDs: a context carrying forced ids gets exactly
// those ids from NewIDs, and the forced span id from NewSpanID in the
// forced trace only; any other context gets valid random ids.
func TestIDGeneratorForcedIDs(t *testing.T) {
	g := NewIDGenerator()
	tid := trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	sid := trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}
	forced := withForcedIDs(context.Background(), forcedIDs{traceID: tid, spanID: sid})

	gotT, gotS := g.NewIDs(forced)
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", gotT.String())
	require.Equal(t, "b7ad6b7169203331", gotS.String())
	require.Equal(t, "b7ad6b7169203331", g.NewSpanID(forced, tid).String())

	other := trace.TraceID{1}
	s := g.NewSpanID(forced, other)
	require.True(t, s.IsValid())
	require.NotEqual(t, "b7ad6b7169203331", s.String(), "a span of another trace is not forced")

	t1, s1 := g.NewIDs(context.Background())
	t2, s2 := g.NewIDs(context.Background())
	require.True(t, t1.IsValid() && s1.IsValid() && t2.IsValid() && s2.IsValid())
	require.NotEqual(t, t1, t2)
	require.NotEqual(t, s1, s2)
}

// TestDerivedIDs: the same parts give the same ids; parts are told apart
// by their lengths, so moving a byte from one part to the next gives other
// ids.
func TestDerivedIDs(t *testing.T) {
	t1, s1 := derivedIDs("default", "wf-1", "run-1", "turn/3")
	t2, s2 := derivedIDs("default", "wf-1", "run-1", "turn/3")
	require.Equal(t, t1, t2)
	require.Equal(t, s1, s2)
	require.True(t, t1.IsValid() && s1.IsValid())

	t3, s3 := derivedIDs("default", "wf-1", "run-1", "turn/4")
	require.NotEqual(t, t1, t3)
	require.NotEqual(t, s1, s3)

	ta, sa := derivedIDs("ab", "c")
	tb, sb := derivedIDs("a", "bc")
	require.NotEqual(t, ta, tb)
	require.NotEqual(t, sa, sb)
}
