package integration

// A compaction survives a kill -9 of its worker process at any of its
// points a process can die at: mid-summary (its compaction/start stored),
// and after its end before the step's model call. After the restart the
// session holds complete brackets only: the interrupted one completed
// under its own id, one summary each, and the turn ends completed.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// compactionScript is a looping script whose answers fill a 3000-token
// window in a few turns; summary is its compaction response.
func compactionScript(t *testing.T, answer scripted.Response, summary scripted.Response) string {
	t.Helper()
	s := scripted.Responses(answer).WithContextWindow(3000).WithCompaction(summary)
	s.Loop = true
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return writeScript(t, string(b))
}

// bracketIDs checks that every compaction of evs is one complete bracket
// (start, at most one summary followed by its replacement, end with the
// same id) and returns the ids in order.
func bracketIDs(t *testing.T, evs []session.Event) []string {
	t.Helper()
	var ids []string
	open, summarized := "", false
	for i, e := range evs {
		var d struct {
			CompactionID string `json:"compactionId"`
		}
		switch e.Type {
		case wire.TypeCompactionStart, wire.TypeCompactionSummary, wire.TypeCompactionEnd:
			require.NoError(t, json.Unmarshal(e.Data, &d))
		}
		switch e.Type {
		case wire.TypeCompactionStart:
			require.Empty(t, open, "compaction/start@%d while %s is open", e.Seq, open)
			open, summarized = d.CompactionID, false
			ids = append(ids, d.CompactionID)
		case wire.TypeCompactionSummary:
			require.Equal(t, open, d.CompactionID, "summary@%d", e.Seq)
			require.False(t, summarized, "a second summary@%d in %s", e.Seq, open)
			summarized = true
			require.Equal(t, wire.TypeUserMessage, evs[i+1].Type)
			require.Equal(t, session.SurfaceReplace, evs[i+1].SurfaceOp.Op)
		case wire.TypeCompactionEnd:
			require.Equal(t, open, d.CompactionID, "end@%d", e.Seq)
			require.True(t, summarized, "end@%d of %s without a summary", e.Seq, open)
			open = ""
		case wire.TypeUserMessage:
			if e.SurfaceOp != nil && e.SurfaceOp.Op == session.SurfaceReplace {
				require.NotEmpty(t, open, "a replacement@%d outside a bracket", e.Seq)
			}
		}
	}
	require.Empty(t, open, "a bracket left open")
	return ids
}

// followUntil sends long questions, one turn at a time, until the log holds
// an event of type typ (the turn is left running), and returns the message
// id of the turn that stored it.
func (w *world) followUntil(id string, typ string, turns int) string {
	w.t.Helper()
	c := w.client()
	for i := range turns {
		in, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: fmt.Sprintf("m%d", i),
			Content: json.RawMessage(fmt.Sprintf("%q", fmt.Sprintf("question %d %s", i, strings.Repeat("words ", 100))))})
		require.NoError(w.t, err)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			evs := readAll(w.t, w, id)
			if countType(evs, typ) > 0 {
				return in.MessageID
			}
			if n := countType(evs, wire.TypeTurnEnd); n == i+1 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	w.t.Fatalf("no %s after %d turns", typ, turns)
	return ""
}

func TestCrashMidCompaction(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	answer := scripted.Text(strings.Repeat("answer words ", 60))
	summary := scripted.Text("the gist of it")
	// The first worker's summarisation stalls until the kill; the next
	// worker's answers.
	first := w.startProc(workerBin, "--provider-script", compactionScript(t, answer, summary.WithStall(0)), "--log-level", "warn")
	id := w.id("crash-compaction")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Options: crashOptions})
	w.awaitLive(id)
	msg := w.followUntil(id, wire.TypeCompactionStart, 12)
	first.kill()
	evs := readAll(t, w, id)
	require.Equal(t, wire.TypeCompactionStart, evs[len(evs)-1].Type, "killed mid-summary")
	require.Zero(t, countType(evs, wire.TypeCompactionSummary))

	w.startProc(workerBin, "--provider-script", compactionScript(t, answer, summary), "--log-level", "warn")
	end := w.watchEnd(id, msg)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	evs = readAll(t, w, id)
	ids := bracketIDs(t, evs)
	require.NotEmpty(t, ids)
	var startID struct {
		CompactionID string `json:"compactionId"`
	}
	for _, e := range evs {
		if e.Type == wire.TypeCompactionStart {
			require.NoError(t, json.Unmarshal(e.Data, &startID))
			break
		}
	}
	require.Equal(t, startID.CompactionID, ids[0], "the interrupted compaction completed under its own id")
	attempts := attemptsOf(w.history(wid, run.GetRunID()), wire.CompactActivity)
	require.GreaterOrEqual(t, attempts[0], int32(2), "the compaction was retried after the kill")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
}

// A kill -9 as soon as a compaction's end is stored (the step's model
// call about to run, or running): the next worker goes on from the log,
// whose stored events are kept, and every bracket is complete.
func TestCrashAfterCompactionEnd(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	answer := scripted.Text(strings.Repeat("answer words ", 60))
	summary := scripted.Text("the gist of it")
	first := w.startProc(workerBin, "--provider-script", compactionScript(t, answer, summary), "--log-level", "warn")
	id := w.id("crash-after-compaction")
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Options: crashOptions})
	w.awaitLive(id)
	msg := w.followUntil(id, wire.TypeCompactionEnd, 12)
	first.kill()
	before := readAll(t, w, id)
	w.startProc(workerBin, "--provider-script", compactionScript(t, answer, summary), "--log-level", "warn")
	end := w.watchEnd(id, msg)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	evs := readAll(t, w, id)
	bracketIDs(t, evs)
	require.Equal(t, before, evs[:len(before)], "what was stored before the kill is kept")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
}
