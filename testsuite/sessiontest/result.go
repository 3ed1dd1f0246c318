package sessiontest

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/sessionflow/sessionflow/wire"
)

// Result is the outcome of an update sent through the environment. Every
// update a test sends must be checked (Decode, OK, Rejection or Failure);
// the harness fails a test that leaves one unchecked.
type Result struct {
	name     string
	done     bool
	rejected error
	value    any
	err      error
	checked  bool
	// then, when set, runs once the update settles (inside the
	// environment, so it may send further updates).
	then func()
}

// Decode requires that the update completed without error and converts its
// value into out.
func (r *Result) Decode(t *testing.T, out any) {
	t.Helper()
	r.OK(t)
	if ev, ok := r.value.(converter.EncodedValue); ok {
		require.NoError(t, ev.Get(out))
		return
	}
	b, err := json.Marshal(r.value)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, out))
}

// Settled reports whether the update has settled (completed, failed or
// been rejected) by now; read it in a step (At, AtNoWait) to learn whether
// it settled before something else happened. It does not count as a check.
func (r *Result) Settled() bool { return r.done }

// OK requires that the update was accepted and completed without error.
func (r *Result) OK(t *testing.T) {
	t.Helper()
	r.checked = true
	require.True(t, r.done, "update %s did not complete", r.name)
	require.NoError(t, r.rejected, "update %s was rejected", r.name)
	require.NoError(t, r.err, "update %s failed", r.name)
}

// Outcome marks r checked and returns why it did not complete without
// error: its rejection, its failure, or that it has not settled; nil when
// it completed. It is for tests that report an outcome instead of
// requiring one.
func (r *Result) Outcome() error {
	r.checked = true
	switch {
	case !r.done:
		return fmt.Errorf("update %s did not complete", r.name)
	case r.rejected != nil:
		return fmt.Errorf("update %s was rejected: %w", r.name, r.rejected)
	case r.err != nil:
		return fmt.Errorf("update %s failed: %w", r.name, r.err)
	}
	return nil
}

// Rejection requires that the update was rejected (by its validator or
// because its workflow did not take it) and returns why.
func (r *Result) Rejection(t *testing.T) error {
	t.Helper()
	r.checked = true
	require.True(t, r.done, "update %s did not complete", r.name)
	require.Error(t, r.rejected, "update %s was not rejected", r.name)
	return r.rejected
}

// Failure requires that the update was accepted and then failed, and
// returns its error.
func (r *Result) Failure(t *testing.T) error {
	t.Helper()
	r.checked = true
	require.True(t, r.done, "update %s did not complete", r.name)
	require.NoError(t, r.rejected, "update %s was rejected", r.name)
	require.Error(t, r.err, "update %s did not fail", r.name)
	return r.err
}

// updateSeq numbers the updates sent, for their update ids.
var updateSeq atomic.Int64

// Update sends an update to the workflow (wid "" = the top-level one) now.
func (h *Harness) Update(wid, name string, args ...any) *Result {
	r := h.NewResult(name)
	h.Send(r, wid, name, args...)
	return r
}

// NewResult registers a result the test must check.
func (h *Harness) NewResult(name string) *Result {
	r := &Result{name: name}
	h.mu.Lock()
	h.results = append(h.results, r)
	h.mu.Unlock()
	return r
}

// requireChecked fails the test when an update's outcome was never looked
// At: an unchecked update can fail (or never be sent) unnoticed.
func (h *Harness) requireChecked() {
	if h.T.Failed() {
		return
	}
	if w := h.seq.waitingFor(); w != "" {
		h.T.Errorf("the run ended while a step still waited for: %s", w)
	}
	if left, scheduled := h.seq.unfinished(); left > 0 {
		h.T.Errorf("the run ended before %d of its %d scheduled steps ran", left, scheduled)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range h.results {
		if !r.checked {
			h.T.Errorf("the outcome of update #%d (%s) was never checked (done %v, rejected %v, err %v)", i+1, r.name, r.done, r.rejected, r.err)
		}
	}
}

// Send sends the update of r now (wid "" = the top-level workflow);
// r settles when the update completes or is rejected.
func (h *Harness) Send(r *Result, wid, name string, args ...any) {
	id := fmt.Sprintf("u%d", updateSeq.Add(1))
	settled := func() {
		if r.then != nil {
			r.then()
		}
	}
	cb := &sdktest.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) {
			r.rejected, r.done = err, true
			settled()
		},
		OnComplete: func(v any, err error) {
			r.value, r.err, r.done = v, err, true
			settled()
		},
	}
	if wid == "" {
		h.Env.UpdateWorkflow(name, id, cb, args...)
		return
	}
	if err := h.Env.UpdateWorkflowByID(wid, name, id, cb, args...); err != nil {
		r.rejected, r.done = err, true
		settled()
	}
}

// ReadyThenDispose sends WaitReady at d and, once it returns, Dispose; it
// returns both results.
func (h *Harness) ReadyThenDispose(d time.Duration, wid string) (ready, dispose *Result) {
	ready = h.UpdateAt(d, wid, wire.UpdateWaitReady)
	dispose = h.UpdateAt(d, wid, wire.UpdateDispose)
	return ready, dispose
}
