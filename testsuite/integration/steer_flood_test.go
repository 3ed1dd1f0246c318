package integration

// A flood of steers during a running turn (issue 23): 1,000 Steer calls, 50
// at a time, through the public client against the dev server and a worker
// process. Under this load workflow tasks time out and are retried, and a
// retried task admits a different set of updates than the attempt whose
// local store already ran; the session must still store every
// acknowledged steer exactly once and end its turns normally.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

// Size of the flood: the 1,000 steers, 50 in flight.
const (
	floodSteers      = 1000
	floodConcurrency = 50
	// floodDeadline bounds the test; it fires only when the session
	// hangs (a flood takes two to three minutes on a loaded 2-core
	// machine; one run starved by concurrent builds took over five).
	floodDeadline = 8 * time.Minute
)

// floodRun numbers the runs of TestSteerFloodDuringTurn in one process
// (-count=3 runs it three times, each on its own session).
var floodRun atomic.Int64

// TestSteerFloodDuringTurn floods a running turn with steers and checks
// that every acknowledged steer is stored exactly once as a user/message,
// that nothing is stored twice, that no turn ends store-failed and that
// the session is still live and idle afterwards. The issue saw the loss in
// 2 of 3 runs: run it with -count=3.
func TestSteerFloodDuringTurn(t *testing.T) {
	workerBin, _ := workerBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), floodDeadline)
	defer cancel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	w.base = ctx
	w.taskQueue += fmt.Sprintf("-%d", floodRun.Add(1))
	// Each model call streams for about 0.4 s, so steps end while steers
	// keep arriving.
	b, err := json.Marshal(scripted.Script{Loop: true, Responses: []scripted.Response{{Text: "ok", ChunkSize: 1, DelayMs: 200}}})
	require.NoError(t, err)
	proc := w.startProc(workerBin, "--provider-script", writeScript(t, string(b)), "--log-level", "warn")
	id := w.id(fmt.Sprintf("steer-flood-%d", floodRun.Load()))
	t.Cleanup(func() {
		if t.Failed() {
			w.logFloodFailure(id, proc)
		}
	})
	floodSession(t, w, id)
	// What the flood provoked: retried workflow tasks (the case of D77)
	// come with load, and the adoptions with them.
	out := proc.out.String()
	t.Logf("worker: %d workflow task attempts failed, %d batches adopted",
		strings.Count(out, "Failed to process workflow task"), strings.Count(out, "as an earlier attempt of the workflow task stored it; adopted"))
}

// logFloodFailure logs what a failed flood leaves: the worker's log and
// the tail of the session's history.
func (w *world) logFloodFailure(id string, proc *workerProc) {
	out := proc.out.String()
	if len(out) > 6000 {
		out = out[len(out)-6000:]
	}
	w.t.Logf("worker log tail:\n%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := w.c.GetWorkflowHistory(ctx, wire.WorkflowID(id), "", false, 0)
	var lines []string
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			lines = append(lines, "history: "+err.Error())
			break
		}
		lines = append(lines, fmt.Sprintf("%d %s", e.GetEventId(), e.GetEventType()))
	}
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	w.t.Logf("history tail:\n%s", strings.Join(lines, "\n"))
}

// logDeliveries logs, for each duplicated message (dup holds "id×n"), the
// update events of every run of the session that carry it.
func (w *world) logDeliveries(firstRunID, id string, dup []string) {
	wid := wire.WorkflowID(id)
	for i, runID := range w.runs(wid, firstRunID) {
		for _, e := range w.history(wid, runID).Events {
			raw := e.String()
			for _, d := range dup {
				msg := strings.Split(d, "×")[0]
				if strings.Contains(raw, msg) {
					w.t.Logf("%s: run %d event %d %s", msg, i+1, e.GetEventId(), e.GetEventType())
				}
			}
		}
	}
}

// floodSession creates session id, starts a turn, floods it and checks the
// log.
func floodSession(t *testing.T, w *world, id string) {
	c := w.client()
	run, _ := w.startTurn(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute}, "start")

	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		errs  = map[string]int{}
	)
	sem := make(chan struct{}, floodConcurrency)
	var wg sync.WaitGroup
	for i := range floodSteers {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			msg := fmt.Sprintf("s-%04d", i)
			_, err := c.Steer(w.ctx(), id, wire.InputRequest{MessageID: msg, Content: json.RawMessage(fmt.Sprintf("%q", "steer "+msg))})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[err.Error()]++
				return
			}
			acked[msg] = true
			if len(acked)%100 == 0 {
				t.Logf("%s: %d steers acknowledged", time.Now().Format(time.TimeOnly), len(acked))
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of %d steers acknowledged; refusals: %v", len(acked), floodSteers, errs)
	require.NotEmpty(t, acked, "no steer was acknowledged")

	// A client sends a steer whose answer it did not get again, with the
	// same message id: whether or not the first one was stored, it is
	// stored once.
	for i := range floodSteers {
		msg := fmt.Sprintf("s-%04d", i)
		if acked[msg] {
			continue
		}
		_, err := c.Steer(w.ctx(), id, wire.InputRequest{MessageID: msg, Content: json.RawMessage(fmt.Sprintf("%q", "steer "+msg))})
		require.NoError(t, err, "steer %s sent again", msg)
		acked[msg] = true
	}

	// Wait until the loop is idle with nothing pending (or the session is
	// gone, which the checks below report).
	var last wire.LoopState
	idle := awaitCtx(w.ctx(), func() bool {
		st, err := c.LoopState(w.ctx(), id)
		if err != nil {
			return true
		}
		last = st
		return st.State == "idle" && len(st.Pending.NextStep) == 0 && len(st.Pending.NextTurn) == 0
	})
	evs := readAll(t, w, id)
	requireContiguous(t, evs)
	stored := map[string]int{}
	var ends []string
	for _, e := range evs {
		switch e.Type {
		case wire.TypeUserMessage:
			var m struct {
				ID string `json:"id"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &m))
			stored[m.ID]++
		case wire.TypeTurnEnd:
			ends = append(ends, string(e.Data))
		}
	}
	var missing, dup, unknown []string
	for m := range acked {
		if stored[m] == 0 {
			missing = append(missing, m)
		}
	}
	for m, n := range stored {
		if n > 1 {
			dup = append(dup, fmt.Sprintf("%s×%d", m, n))
		}
		if !acked[m] && m != "m1" && !strings.HasPrefix(m, "s-") {
			unknown = append(unknown, m)
		}
	}
	sort.Strings(missing)
	sort.Strings(dup)
	require.Empty(t, missing, "acknowledged steers not stored (%d of %d acknowledged)", len(missing), len(acked))
	if len(dup) > 0 {
		w.logDeliveries(run.GetRunID(), id, dup)
	}
	require.Empty(t, dup, "inputs stored more than once")
	require.Empty(t, unknown, "user messages nobody sent")
	require.True(t, idle, "the loop did not become idle with nothing pending; last state %+v", last)
	for _, e := range ends {
		require.NotContains(t, e, "store-failed", "a turn ended store-failed")
		require.Contains(t, e, `"kind":"completed"`, "a turn did not complete: %s", e)
	}
	require.NotEmpty(t, ends, "no turn ended")
	d, err := c.Describe(w.ctx(), id)
	require.NoError(t, err, "the session is not live after the flood")
	require.Equal(t, wire.PhaseLive, d.Phase, "the session is not live after the flood")
	_, err = c.Dispose(w.ctx(), id)
	require.NoError(t, err)
	require.NoError(t, run.Get(w.ctx(), nil))
}
