package workerapp

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The worker's sticky schedule-to-start timeout is 1 s unless configured:
// the sessions of a killed worker wait that long on its sticky queue.
func TestWorkerOptionsStickyTimeout(t *testing.T) {
	fatal := make(chan error, 1)
	cfg := DefaultConfig()
	require.Equal(t, time.Second, workerOptions(cfg, nil, fatal).StickyScheduleToStartTimeout)
	cfg.StickyTimeout = 0
	require.Equal(t, time.Second, workerOptions(cfg, nil, fatal).StickyScheduleToStartTimeout, "zero takes the default")
	cfg.StickyTimeout = 3 * time.Second
	opts := workerOptions(cfg, nil, fatal)
	require.Equal(t, 3*time.Second, opts.StickyScheduleToStartTimeout)
	require.Equal(t, 30*time.Second, opts.WorkerStopTimeout)

	opts.OnFatalError(errors.New("first"))
	opts.OnFatalError(errors.New("second"))
	require.EqualError(t, <-fatal, "first", "a fatal error is reported without blocking")
}
