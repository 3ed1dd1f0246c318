package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRPCCounterCountsFailedAttemptsSinceASnapshot(t *testing.T) {
	r := newRPCCounter()
	closing := status.Error(codes.ResourceExhausted, "workflow operation can not be applied because workflow is closing")
	r.add("UpdateWorkflowExecution", "0", closing)
	before := r.snapshot()
	r.add("UpdateWorkflowExecution", "0", nil)
	r.add("UpdateWorkflowExecution", "0", closing)
	r.add("UpdateWorkflowExecution", "0", closing)
	r.add("UpdateWorkflowExecution", "1", closing)
	r.add("UpdateWorkflowExecution", "0", errors.New("no status"))
	r.add("SignalWorkflowExecution", "0", closing)
	got := r.failuresSince(before, "UpdateWorkflowExecution")
	assert.Equal(t, map[string]int{
		"ResourceExhausted (retry 0): workflow operation can not be applied because workflow is cl": 2,
		"ResourceExhausted (retry 1): workflow operation can not be applied because workflow is cl": 1,
		"Unknown (retry 0): no status": 1,
	}, got)
	assert.Equal(t, "2 x ResourceExhausted (retry 0): workflow operation can not be applied because workflow is cl; "+
		"1 x ResourceExhausted (retry 1): workflow operation can not be applied because workflow is cl; "+
		"1 x Unknown (retry 0): no status", formatFailures(got))
	assert.Equal(t, "none", formatFailures(r.failuresSince(r.snapshot(), "UpdateWorkflowExecution")))
}

func TestSlowAcrossCAN(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	starts := []time.Time{t0, t0.Add(10 * ms), t0.Add(400 * ms), t0.Add(1000 * ms)}
	lats := []time.Duration{20 * ms, 450 * ms, 100 * ms, 500 * ms}
	// The continue-as-new at 100 ms falls in the second append, those at
	// 700 ms and 2 s in none.
	cans := []time.Time{t0.Add(100 * ms), t0.Add(700 * ms), t0.Add(2000 * ms)}
	assert.Equal(t, "2 appends over 250.0 ms (89% of the callers' time), 1 of them in flight at one of 3 continue-as-new",
		slowAcrossCAN(starts, lats, cans, 250*ms))
	assert.Equal(t, "0 appends over 250.0 ms (0% of the callers' time), 0 of them in flight at one of 0 continue-as-new",
		slowAcrossCAN(nil, nil, nil, 250*ms))
}

func TestSummarizeMax(t *testing.T) {
	s := summarize([]time.Duration{3 * time.Millisecond, 9 * time.Millisecond, 1 * time.Millisecond})
	assert.Equal(t, 9*time.Millisecond, s.Max)
	assert.Equal(t, 3*time.Millisecond, s.Median)
}
