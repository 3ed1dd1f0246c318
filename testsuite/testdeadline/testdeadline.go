// Package testdeadline gives a test that drives a workflow, a worker or a
// server its own deadline, so that a hang fails that named test within
// minutes, saying what it was waiting for, instead of the whole package at
// go test's global timeout (docs/TESTING.md, "Deadlines").
//
// Context bounds the test's calls; Watch is a watchdog for waits that take
// no context (the SDK's test workflow environment, a process's exit): when
// its limit passes it fails the test with a description of the state it
// was waiting on and aborts the wait; a test still running a grace period
// later panics with the same description, which ends the test binary at
// once and names the test.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; of testsuite, only this
// harness (sessiontest, testdeadline) may be imported, by the tests of any
// package, never by production code.
package testdeadline

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Margin is left between a test's deadline and the end of go test's
// -timeout, so that the test fails by itself, with its own message, before
// the global timeout ends the binary.
const Margin = 30 * time.Second

// Grace is how long Watch lets an aborted wait return before it panics;
// shorter than Margin, so the panic too comes before go test's -timeout.
const Grace = 15 * time.Second

// T is the part of *testing.T the package uses.
type T interface {
	Helper()
	Name() string
	Errorf(format string, args ...any)
	Cleanup(func())
}

// deadliner is implemented by *testing.T: the end of go test's -timeout.
type deadliner interface {
	Deadline() (time.Time, bool)
}

// Limit returns the time a test may still spend: limit, or less when go
// test's -timeout ends sooner than limit plus Margin from now (at least a
// second: a test that starts with its -timeout all but spent fails by
// itself at once rather than with the whole binary).
func Limit(t T, limit time.Duration) time.Duration {
	d, ok := t.(deadliner)
	if !ok {
		return limit
	}
	end, ok := d.Deadline()
	if !ok {
		return limit
	}
	left := time.Until(end) - Margin
	return max(min(limit, left), time.Second)
}

// Context returns a context that ends after Limit(t, limit) and is
// cancelled when the test ends.
func Context(t T, limit time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Limit(t, limit))
	t.Cleanup(cancel)
	return ctx
}

// Watchdog fails a test that is still waiting when its limit passes.
type Watchdog struct {
	t     T
	limit time.Duration
	what  func() string
	abort func()

	once     sync.Once
	done     chan struct{}
	finished chan struct{} // closed when run returns
}

// Watch starts a watchdog over the rest of test t. If t has not ended after
// Limit(t, limit), the watchdog fails t with what() (the state the test
// waits on, as seen at that moment) and calls abort (when not nil) to end
// the wait; if t still runs Grace later, it panics with the same
// description. The watchdog stops when t ends or Stop is called.
func Watch(t T, limit time.Duration, what func() string, abort func()) *Watchdog {
	t.Helper()
	w := &Watchdog{t: t, limit: Limit(t, limit), what: what, abort: abort, done: make(chan struct{}), finished: make(chan struct{})}
	go w.run()
	t.Cleanup(w.Stop)
	return w
}

// Stop ends the watchdog and waits until it no longer reports to the test
// (a report after the test ended would panic); it is safe to call more
// than once.
func (w *Watchdog) Stop() {
	w.once.Do(func() { close(w.done) })
	<-w.finished
}

func (w *Watchdog) run() {
	defer close(w.finished)
	timer := time.NewTimer(w.limit)
	defer timer.Stop()
	select {
	case <-w.done:
		return
	case <-timer.C:
	}
	msg := fmt.Sprintf("%s: still running after its deadline of %v; waiting on: %s", w.t.Name(), w.limit, w.what())
	w.t.Errorf("%s", msg)
	if w.abort != nil {
		w.abort()
	}
	timer.Reset(Grace)
	select {
	case <-w.done:
	case <-timer.C:
		panic(fmt.Sprintf("%s (the wait did not end %v after it was aborted)", msg, Grace))
	}
}
