package jsonl

import "time"

// Metrics observes store activity. Implementations must be safe for
// concurrent use and cheap; the worker exports them for Prometheus.
type Metrics interface {
	// Fsync reports one fsync of a log file and how long it took.
	Fsync(d time.Duration)
	// BytesWritten reports bytes appended to log files.
	BytesWritten(n int)
	// TornTailCut reports one torn or invalid suffix cut off a log.
	TornTailCut()
	// LeaseAcquired and LeaseReleased track write leases held by this store.
	LeaseAcquired()
	LeaseReleased()
}

type nopMetrics struct{}

func (nopMetrics) Fsync(time.Duration) {}
func (nopMetrics) BytesWritten(int)    {}
func (nopMetrics) TornTailCut()        {}
func (nopMetrics) LeaseAcquired()      {}
func (nopMetrics) LeaseReleased()      {}
