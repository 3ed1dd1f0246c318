package workerapp

import (
	"context"
	"errors"
	"log/slog"
	"sync"
)

// Running is a worker started in this process by Start.
type Running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// Start runs Run in the background and returns once the worker polls, or
// with Run's error if it stops first, or with the context's cause. A
// cfg.OnStarted callback is still called.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Running, error) {
	started := make(chan struct{})
	onStarted := cfg.OnStarted
	cfg.OnStarted = func(s Started) {
		if onStarted != nil {
			onStarted(s)
		}
		close(started)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Run(wctx, cfg, logger) }()
	select {
	case <-started:
		return r, nil
	case err := <-r.done:
		cancel()
		if err == nil {
			err = errors.New("workerapp: the worker stopped before it polled")
		}
		return nil, err
	case <-ctx.Done():
		_ = r.Stop()
		return nil, context.Cause(ctx)
	}
}

// Stop stops the worker gracefully and returns what Run returned. It is
// idempotent.
func (r *Running) Stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}
