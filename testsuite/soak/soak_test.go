package soak

import (
	"flag"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
)

// The short variant runs under `go test ./...`; the long one with, e.g.,
// `go test ./testsuite/soak -run TestSoak -soak.kills=200 -soak.sessions=8 -timeout 60m`.
var (
	kills    = flag.Int("soak.kills", 10, "number of SIGKILLs of the worker")
	sessions = flag.Int("soak.sessions", 4, "number of sessions appended to concurrently")
	cycles   = flag.Int("soak.lifecycles", DefaultLifecycles, "number of concurrent lifecycle loops (create, append, dispose, resume, append, dispose), negative for none")
	seed     = flag.Int64("soak.seed", 1, "seed of the kill intervals and batch sizes")
	minIv    = flag.Duration("soak.min-interval", DefaultMinInterval, "shortest time a polling worker runs before it is killed")
	maxIv    = flag.Duration("soak.max-interval", DefaultMaxInterval, "longest time a polling worker runs before it is killed")
	batch    = flag.Int("soak.batch", DefaultBatch, "largest number of events of one append")
	// Both variants run with sessionflow's default timeouts (the client's
	// workflow task timeout, checked to hold across continue-as-new, and
	// the worker's sticky timeout).
	taskTimeout   = flag.Duration("soak.workflow-task-timeout", 0, "workflow task timeout of the sessions, 0 = the client's default, negative = the server's")
	stickyTimeout = flag.Duration("soak.sticky-timeout", 0, "the worker's sticky schedule-to-start timeout, 0 = the worker's default")
	canEvents     = flag.Int("soak.continue-as-new-events", 400, "history length at which the server suggests continue-as-new, 0 = the server's default")
	turns         = flag.Int("soak.turns", 2, "number of sessions whose agent runs turns (scripted model, built-in tools) during the kills, 0 for none")
)

// lineWriter logs every line written to it through t.Log.
type lineWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf strings.Builder
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	s := w.buf.String()
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		w.t.Log(s[:i])
		s = s[i+1:]
	}
	w.buf.Reset()
	w.buf.WriteString(s)
	return len(p), nil
}

// The worker, a separate process, is killed with SIGKILL at random moments
// and restarted while sessions are appended to: no acknowledged event is
// lost, no seq is stored twice or skipped, every session resumes and no
// lease outlives its disposed workflow; sessions created, disposed and
// resumed while the kills go on come up and keep what was acknowledged.
func TestSoak(t *testing.T) {
	// The long soak (-soak.kills 200) needs an hour and a -timeout to match;
	// the default one ends half a minute before go test's -timeout, so a
	// hung soak fails here with its summary.
	ctx := testdeadline.Context(t, 90*time.Minute)
	sum, err := Run(ctx, Config{
		Kills: *kills, Sessions: *sessions, Lifecycles: *cycles, Seed: *seed,
		MinInterval: *minIv, MaxInterval: *maxIv, Batch: *batch,
		WorkflowTaskTimeout: *taskTimeout, StickyTimeout: *stickyTimeout, ContinueAsNewEvents: *canEvents,
		Turns: *turns, Progress: &lineWriter{t: t},
	})
	t.Log(sum)
	t.Log(sum.Failover)
	t.Logf("took %v", sum.Elapsed.Round(time.Second))
	require.NoError(t, err)
	require.Empty(t, sum.Failures)
	require.Equal(t, *kills, sum.Kills)
	require.Equal(t, *sessions+sum.Lifecycles+*turns, sum.Sessions)
	if *turns > 0 {
		require.GreaterOrEqual(t, sum.Turns.Turns, *turns, "every turn session ran turns during the kills")
		require.Equal(t, 2*sum.Turns.Turns, sum.Turns.ModelCalls, "two steps per turn, one assistant/message each")
		require.Equal(t, 4*sum.Turns.Turns, sum.Turns.ToolCalls, "four tool calls per turn")
	}
	if *cycles > 0 {
		require.Positive(t, sum.Lifecycles, "sessions were created, disposed and resumed during the kills")
	}
	require.Positive(t, sum.Acked, "the sessions were appended to")
	require.Contains(t, sum.String(), " lost=0 duplicates=0 unresumable=0")
	require.True(t, sum.OK())
}
