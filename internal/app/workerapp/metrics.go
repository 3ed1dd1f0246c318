package workerapp

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"

	"github.com/sessionflow/sessionflow/jsonl"
)

// Names of the store metrics exported by Metrics.
const (
	MetricFsyncSeconds      = "sessionflow_store_fsync_seconds"
	MetricBytesWritten      = "sessionflow_store_bytes_written_total"
	MetricTornTailsRepaired = "sessionflow_store_torn_tails_repaired_total"
	MetricLeasesHeld        = "sessionflow_store_leases_held"
	MetricLeasesAcquired    = "sessionflow_store_leases_acquired_total"
	MetricLeasesReleased    = "sessionflow_store_leases_released_total"
	MetricClosersAppended   = "sessionflow_repair_closers_appended_total"
)

// Metrics implements jsonl.Metrics with Prometheus collectors and counts the
// crash closers that repairs append.
type Metrics struct {
	fsync          prometheus.Histogram
	bytesWritten   prometheus.Counter
	tornTails      prometheus.Counter
	leasesHeld     prometheus.Gauge
	leasesAcquired prometheus.Counter
	leasesReleased prometheus.Counter
	closers        prometheus.Counter
}

var _ jsonl.Metrics = (*Metrics)(nil)

// NewMetrics creates the store metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricFsyncSeconds,
			Help:    "Latency of fsync calls on session logs.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricBytesWritten,
			Help: "Bytes appended to session logs.",
		}),
		tornTails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricTornTailsRepaired,
			Help: "Torn or invalid log suffixes cut off during repair.",
		}),
		leasesHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricLeasesHeld,
			Help: "Write leases currently held by this worker's store.",
		}),
		leasesAcquired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricLeasesAcquired,
			Help: "Write leases acquired.",
		}),
		leasesReleased: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricLeasesReleased,
			Help: "Write leases released.",
		}),
		closers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricClosersAppended,
			Help: "Crash closers appended by resume repairs (the Repair activity).",
		}),
	}
	for _, c := range []prometheus.Collector{m.fsync, m.bytesWritten, m.tornTails, m.leasesHeld, m.leasesAcquired, m.leasesReleased, m.closers} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering store metrics: %w", err)
		}
	}
	return m, nil
}

// Fsync observes one fsync of a log file.
func (m *Metrics) Fsync(d time.Duration) { m.fsync.Observe(d.Seconds()) }

// BytesWritten counts bytes appended to log files.
func (m *Metrics) BytesWritten(n int) { m.bytesWritten.Add(float64(n)) }

// TornTailCut counts one torn or invalid suffix cut off a log.
func (m *Metrics) TornTailCut() { m.tornTails.Inc() }

// LeaseAcquired counts a write lease taken.
func (m *Metrics) LeaseAcquired() {
	m.leasesAcquired.Inc()
	m.leasesHeld.Inc()
}

// LeaseReleased counts a write lease given back.
func (m *Metrics) LeaseReleased() {
	m.leasesReleased.Inc()
	m.leasesHeld.Dec()
}

// ClosersAppended counts crash closers appended by a repair.
func (m *Metrics) ClosersAppended(n int) { m.closers.Add(float64(n)) }

// newRegistry returns a registry with the Go runtime and process collectors.
func newRegistry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("registering Go metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("registering process metrics: %w", err)
	}
	return reg, nil
}

// newSDKMetrics returns a Temporal SDK metrics handler that exports through
// OpenTelemetry into reg (names prefixed temporal_), and the meter provider
// to shut down when the worker is done.
func newSDKMetrics(reg prometheus.Registerer, logger *slog.Logger) (client.MetricsHandler, *sdkmetric.MeterProvider, error) {
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, nil, fmt.Errorf("creating the Prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	h := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                mp.Meter("temporal-sdk-go"),
		UseMonotonicCounters: true,
		OnError: func(err error) {
			logger.Warn("SDK metric not recorded", "error", err)
		},
	})
	return h, mp, nil
}
