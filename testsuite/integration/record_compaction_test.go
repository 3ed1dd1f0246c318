package integration

// Recorded path of compaction (the turn-compaction gate): turns against a
// model with a small context window, so that a step compacts under
// pressure, a refusal is recovered from, and a Compact update runs between
// turns.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths, recordPath{name: "turn-compaction", agent: func(t *testing.T) workerapp.AgentConfig {
		s := scripted.Responses(scripted.Text(strings.Repeat("answer words ", 60))).WithContextWindow(3000)
		s.Loop = true
		p, err := scripted.New(s)
		require.NoError(t, err)
		// The tools are part of each request's size: the path keeps the
		// tool set it was recorded with (no subagent tool).
		noSubagents := -1
		return workerapp.AgentConfig{Providers: provider.Set{"scripted": p}, SubagentMaxDepth: &noSubagents}
	}, run: recordTurnCompaction})
}

// recordTurnCompaction: turns of long questions and answers in a 3000-token
// window with the default threshold: the later steps compact first (the
// turn-compaction marker); then a Compact update between turns; Dispose.
func recordTurnCompaction(t *testing.T, w *world) []fixture {
	id := w.id("rec-turn-compaction")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	w.awaitLive(id)
	c := w.client()
	for i := range 6 {
		in, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: fmt.Sprintf("m%d", i), Content: json.RawMessage(fmt.Sprintf("%q", fmt.Sprintf("question %d %s", i, strings.Repeat("words ", 100))))})
		require.NoError(t, err)
		end := w.watchEnd(id, in.MessageID)
		require.Equal(t, "completed", end.Info.Reason.Kind)
	}
	var res wire.CompactResult
	require.NoError(t, w.update(wid, wire.UpdateCompact, &res, wire.CompactRequest{CommandID: "cmd-1"}))
	require.True(t, res.Compacted, "%+v", res)
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := readAll(t, w, id)
	summaries := 0
	for _, e := range evs {
		if e.Type == wire.TypeCompactionSummary {
			summaries++
		}
	}
	require.Greater(t, summaries, 1, "the turns compacted under pressure, and the update once more")
	require.Equal(t, 1, countType(evs, wire.TypeCommandRun))
	require.Equal(t, 1, countType(evs, wire.TypeCommandDone))
	return only("turn-compaction", wid, run)
}

// countType counts the events of type typ.
func countType(evs []session.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}
