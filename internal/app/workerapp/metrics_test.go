package workerapp

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// histogramCount returns the sample count and sum of a registered histogram.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0, 0
}

func TestMetricsRecordStoreEvents(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)

	m.Fsync(3 * time.Millisecond)
	m.Fsync(5 * time.Millisecond)
	m.BytesWritten(100)
	m.BytesWritten(28)
	m.TornTailCut()
	m.LeaseAcquired()
	m.LeaseAcquired()
	m.LeaseReleased()
	m.ClosersAppended(3)

	n, sum := histogramCount(t, reg, MetricFsyncSeconds)
	assert.Equal(t, uint64(2), n)
	assert.InDelta(t, 0.008, sum, 1e-9)
	assert.Equal(t, 128.0, testutil.ToFloat64(m.bytesWritten))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.tornTails))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.leasesHeld))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.leasesAcquired))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.leasesReleased))
	assert.Equal(t, 3.0, testutil.ToFloat64(m.closers))

	names := map[string]bool{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, name := range []string{MetricFsyncSeconds, MetricBytesWritten, MetricTornTailsRepaired, MetricLeasesHeld, MetricLeasesAcquired, MetricLeasesReleased, MetricClosersAppended} {
		assert.True(t, names[name], name)
	}

	_, err = NewMetrics(reg)
	assert.Error(t, err, "registering the same metrics twice fails")
}

// event builds a session event.
func event(t *testing.T, typ string, seq int64, data any) session.Event {
	t.Helper()
	e, err := session.NewEvent(typ, seq, 1000+seq, data)
	require.NoError(t, err)
	return e
}

func turnEvents(t *testing.T, seq, turn int64) []session.Event {
	return []session.Event{
		event(t, wire.TypeTurnStart, seq, map[string]any{"turn": turn}),
		event(t, wire.TypeTurnEnd, seq+1, map[string]any{"turn": turn, "reason": map[string]any{"kind": "completed"}}),
	}
}

func TestMetricsObserveARealStore(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone, Metrics: m, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)

	h, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: "s1", CreatedAt: 1}, jsonl.CreateOptions{HandleID: "h1"})
	require.NoError(t, err)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.leasesHeld))
	require.NoError(t, h.Append(ctx, turnEvents(t, 0, 1)))
	require.NoError(t, h.Close(ctx))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.leasesHeld))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.leasesAcquired))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.leasesReleased))

	snap, err := st.Stat(ctx, "s1")
	require.NoError(t, err)
	require.NotNil(t, snap)
	assert.Equal(t, float64(snap.SizeBytes), testutil.ToFloat64(m.bytesWritten), "every byte of the log was counted")
	n, _ := histogramCount(t, reg, MetricFsyncSeconds)
	assert.NotZero(t, n)

	// A crash mid-write leaves an incomplete record; the next write through
	// a write handle cuts it.
	f, err := os.OpenFile(snap.Path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"type":"turn/start","seq":2,`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	h, err = st.Open(ctx, "s1", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "h2"})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, turnEvents(t, 2, 2)))
	require.NoError(t, h.Close(ctx))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.tornTails))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.leasesHeld))
}
