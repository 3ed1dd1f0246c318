// Package readiness waits for a started process to become ready.
//
// A wait polls a health probe until it succeeds. It fails at once when the
// watched process exits (a process that died never becomes ready, so there
// is nothing to wait for), and otherwise gives up only after a deadline long
// enough for a loaded machine: a cold start of the Temporal dev server on two
// cores busy with builds can take well over a minute. A failure carries the
// process's own log, so the reason it did not come up is in the error.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring (internal/app). It may import any package below the
// client's row, the client and the other program-wiring packages; only
// programs and tests import it.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DefaultTimeout is how long Wait waits for a probe to succeed unless told
// otherwise. It is generous on purpose: since Wait fails as soon as the
// process exits, a long deadline costs nothing when the start really failed.
const DefaultTimeout = 5 * time.Minute

// DefaultInterval is the pause between two probes unless told otherwise.
const DefaultInterval = 100 * time.Millisecond

// Reasons a wait fails, matched with errors.Is on the *Error Wait returns.
var (
	// ErrExited means the process exited before the probe succeeded.
	ErrExited = errors.New("the process exited before it was ready")
	// ErrTimedOut means the probe did not succeed within the timeout.
	ErrTimedOut = errors.New("not ready within the timeout")
)

// Options configure Wait.
type Options struct {
	// What names the process in the error, e.g. "the Temporal dev server".
	What string
	// Timeout bounds the whole wait; 0 means DefaultTimeout.
	Timeout time.Duration
	// Interval is the pause between probes; 0 means DefaultInterval.
	Interval time.Duration
	// Exited, when not nil, is closed once the process has exited; Wait then
	// fails with ErrExited without waiting for the timeout.
	Exited <-chan struct{}
	// ExitErr, when not nil, returns the process's exit status once Exited
	// is closed; it is reported with ErrExited.
	ExitErr func() error
	// Log, when not nil, returns the process's own output; a failure
	// carries it.
	Log func() string
}

// Error is the failure of a wait.
type Error struct {
	// What names the process.
	What string
	// Reason is ErrExited, ErrTimedOut or the caller's context error.
	Reason error
	// Exit is the process's exit status, when it exited and it is known.
	Exit error
	// Last is the last probe's error, if any.
	Last error
	// Waited is how long the wait lasted.
	Waited time.Duration
	// Log is the process's own output, when Options.Log was given.
	Log string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v after %s", e.What, e.Reason, e.Waited.Round(time.Millisecond))
	if e.Exit != nil {
		fmt.Fprintf(&b, " (%v)", e.Exit)
	}
	if e.Last != nil {
		fmt.Fprintf(&b, "; last probe: %v", e.Last)
	}
	if e.Log != "" {
		fmt.Fprintf(&b, "\n%s output:\n%s", e.What, strings.TrimRight(e.Log, "\n"))
	} else if e.Reason != nil {
		fmt.Fprintf(&b, " (%s wrote nothing)", e.What)
	}
	return b.String()
}

// Unwrap returns the reason and the last probe's error.
func (e *Error) Unwrap() []error {
	out := []error{e.Reason}
	if e.Last != nil {
		out = append(out, e.Last)
	}
	return out
}

// Wait calls probe until it returns nil and then returns nil. It returns an
// *Error when the process exits first (ErrExited), when the timeout passes
// (ErrTimedOut) or when ctx ends (its error). The context a probe gets ends
// with the wait, so a probe blocked on the network cannot outlast it.
func Wait(ctx context.Context, opts Options, probe func(ctx context.Context) error) error {
	timeout, interval := opts.Timeout, opts.Interval
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	what := opts.What
	if what == "" {
		what = "the process"
	}
	begin := time.Now()
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wctx, cancelTimeout := context.WithTimeoutCause(wctx, timeout, ErrTimedOut)
	defer cancelTimeout()
	if opts.Exited != nil {
		go func() {
			select {
			case <-opts.Exited:
				cancel(ErrExited)
			case <-wctx.Done():
			}
		}()
	}
	fail := func(last error) error {
		e := &Error{What: what, Reason: context.Cause(wctx), Last: last, Waited: time.Since(begin)}
		if ctx.Err() != nil {
			e.Reason = ctx.Err()
		}
		if errors.Is(e.Reason, ErrExited) && opts.ExitErr != nil {
			e.Exit = opts.ExitErr()
		}
		if opts.Log != nil {
			e.Log = opts.Log()
		}
		return e
	}
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		// An exit is checked before each probe: a process that is gone
		// cannot be ready, whatever a stale listener might answer.
		if opts.Exited != nil {
			select {
			case <-opts.Exited:
				cancel(ErrExited)
				return fail(nil)
			default:
			}
		}
		last := probe(wctx)
		if last == nil && wctx.Err() == nil {
			return nil
		}
		if wctx.Err() != nil {
			return fail(last)
		}
		select {
		case <-wctx.Done():
			return fail(last)
		case <-timer.C:
			timer.Reset(interval)
		}
	}
}
