package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// Defaults of Options.
const (
	DefaultAppendWindow     = 200 * time.Millisecond
	DefaultActivityTimeout  = 10 * time.Minute
	DefaultHeartbeatTimeout = 10 * time.Second
	DefaultMaxAttempts      = 10
	// DefaultStoreHeartbeatTimeout is the heartbeat timeout of the store
	// activities when Options.HeartbeatTimeoutMs is zero: how long a store
	// activity lost with a killed worker waits before it is retried
	// (docs/DECISIONS.md D49). The agent's model and tool activities keep
	// DefaultHeartbeatTimeout.
	DefaultStoreHeartbeatTimeout = 5 * time.Second
	// DefaultStoreRetryInterval is the first backoff of a store activity's
	// retry, multiplied by StoreRetryBackoff after each attempt up to a
	// minute: ten attempts span about as long as Temporal's 1 s doubling
	// (docs/DECISIONS.md D49).
	DefaultStoreRetryInterval = 200 * time.Millisecond
	// StoreRetryBackoff is the backoff coefficient of the store activities.
	StoreRetryBackoff = 3
	// DefaultContinueAsNewEvents is the history length at which a live
	// session continues as new when Options.ContinueAsNewEvents is zero:
	// short enough that a worker replays a run well within the 1 s workflow
	// task timeout, several sessions at once (docs/DECISIONS.md D64).
	DefaultContinueAsNewEvents = 1000
	// MinContinueAsNewEvents is the smallest Options.ContinueAsNewEvents: a
	// run's own start and first workflow tasks stay below it.
	MinContinueAsNewEvents = 100
	// MaxContinueAsNewEvents is the largest Options.ContinueAsNewEvents,
	// below the server's default hard limit of 51200 events a run.
	MaxContinueAsNewEvents = 50000
)

// settings are Options with the defaults applied.
type settings struct {
	window        time.Duration
	maxBatchBytes int
	taskQueue     string
	hookTaskQueue string
	timeout       time.Duration
	heartbeat     time.Duration
	// storeHeartbeat is the heartbeat timeout of the store activities.
	storeHeartbeat time.Duration
	attempts       int32
	// canEvents is the history length at which the live run continues as
	// new.
	canEvents int
}

func resolveOptions(o *wire.Options) (settings, error) {
	s := settings{
		window:         DefaultAppendWindow,
		maxBatchBytes:  wire.DefaultMaxBatchBytes,
		timeout:        DefaultActivityTimeout,
		heartbeat:      DefaultHeartbeatTimeout,
		storeHeartbeat: DefaultStoreHeartbeatTimeout,
		attempts:       DefaultMaxAttempts,
		canEvents:      DefaultContinueAsNewEvents,
	}
	if o == nil {
		return s, nil
	}
	switch {
	case o.AppendWindowMs < 0, o.MaxBatchBytes < 0, o.ActivityTimeoutMs < 0, o.HeartbeatTimeoutMs < 0, o.MaxAttempts < 0, o.ContinueAsNewEvents < 0:
		return s, invalidArgument("session options must not be negative")
	case o.MaxBatchBytes > wire.MaxMaxBatchBytes:
		return s, invalidArgument(fmt.Sprintf("maxBatchBytes must be at most %d", wire.MaxMaxBatchBytes))
	case o.ContinueAsNewEvents != 0 && (o.ContinueAsNewEvents < MinContinueAsNewEvents || o.ContinueAsNewEvents > MaxContinueAsNewEvents):
		return s, invalidArgument(fmt.Sprintf("continueAsNewEvents must be between %d and %d, got %d",
			MinContinueAsNewEvents, MaxContinueAsNewEvents, o.ContinueAsNewEvents))
	}
	if o.AppendWindowMs > 0 {
		s.window = time.Duration(o.AppendWindowMs) * time.Millisecond
	}
	if o.MaxBatchBytes > 0 {
		s.maxBatchBytes = o.MaxBatchBytes
	}
	if o.ActivityTimeoutMs > 0 {
		s.timeout = time.Duration(o.ActivityTimeoutMs) * time.Millisecond
	}
	if o.HeartbeatTimeoutMs > 0 {
		s.heartbeat = time.Duration(o.HeartbeatTimeoutMs) * time.Millisecond
		s.storeHeartbeat = s.heartbeat
	}
	if o.MaxAttempts > 0 {
		s.attempts = o.MaxAttempts
	}
	if o.ContinueAsNewEvents > 0 {
		s.canEvents = o.ContinueAsNewEvents
	}
	s.taskQueue, s.hookTaskQueue = o.TaskQueue, o.HookTaskQueue
	return s, nil
}

// storeCtx returns ctx with the options of the store activities. They
// heartbeat, so a cancellation reaches them promptly and an attempt lost
// with its worker is retried soon (a short heartbeat timeout, a short first
// backoff: docs/DECISIONS.md D49), and they run with wait-for-cancellation:
// an abandoned create or open is awaited after the rollback closed its
// handle id. The options are not part of the command sequence (a replay does
// not compare them), so changing them needs no version gate.
func (s settings) storeCtx(ctx workflow.Context) workflow.Context {
	rp := s.retry()
	rp.InitialInterval = DefaultStoreRetryInterval
	rp.BackoffCoefficient = StoreRetryBackoff
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           s.taskQueue,
		StartToCloseTimeout: s.timeout,
		HeartbeatTimeout:    s.storeHeartbeat,
		WaitForCancellation: true,
		RetryPolicy:         rp,
	})
}

// hookCtx returns ctx with the options of the hook activities. An
// abandoned hook is not waited for: it holds nothing the rollback must
// release, and its late result is ignored.
func (s settings) hookCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           s.hookTaskQueue,
		StartToCloseTimeout: s.timeout,
		RetryPolicy:         s.retry(),
	})
}

func (s settings) retry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    s.attempts,
		// A validation failure fails the same way on every attempt, even
		// from an activity (a hook, a worker in another SDK) that forgot to
		// mark it non-retryable.
		NonRetryableErrorTypes: []string{wire.ErrTypeInvalidArgument},
	}
}

// validateAgentOptions applies LIFECYCLE.md §4 step 4.
func validateAgentOptions(o *wire.AgentOptions) error {
	if o == nil {
		return nil
	}
	for _, c := range []struct {
		v    *float64
		text string
	}{{o.MaxTokens, MaxTokensText}, {o.MaxSteps, MaxStepsText}, {o.MaxParallelToolCalls, MaxParallelToolCallsText}, {o.ContextWindow, ContextWindowText}} {
		if c.v == nil {
			continue
		}
		if v := *c.v; v < 1 || v > wire.MaxSafeInteger || v != float64(int64(v)) {
			return temporal.NewNonRetryableApplicationError(c.text, wire.ErrTypeTypeError, nil)
		}
	}
	if o.SandboxMode != "" && !slices.Contains(wire.SandboxModes, o.SandboxMode) {
		return temporal.NewNonRetryableApplicationError(SandboxModeText, wire.ErrTypeTypeError, nil)
	}
	return validatePermissionOptions(o)
}
