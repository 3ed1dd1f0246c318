package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestAppendLeavingTurnOpenRefusedWhileAgentRuns: in a session whose agent
// has a model route, an Append that opens a turn (with a step and a tool
// call) and does not end it is refused as TurnLeftOpen and stores nothing,
// so the agent's next turn is not nested inside it; whole turns are
// accepted; a session without a route still takes an open turn (a harness
// writing its own turns across appends).
func TestAppendLeavingTurnOpenRefusedWhileAgentRuns(t *testing.T) {
	w := newWorld(t, shared, jsonl.CompressionNone)
	// The agent answers after the harness turn (response index 1).
	w.agent = scriptedAgent(scripted.Text("unused"), scripted.Text("agent answer"))(t)
	w.startWorker()
	c := w.client()
	id := w.id("append-open")
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	info, err := c.WaitReady(w.ctx(), id)
	require.NoError(t, err)
	next := info.NextSeq

	msg := ev(t, wire.TypeAssistantMessage, next+2, map[string]any{
		"turn": 1, "step": 1, "stream": []any{},
		"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool-call", "id": "call-1", "name": "read_file", "arguments": map[string]any{"path": "a.txt"}}}},
	})
	msg.SurfaceOp = session.AppendOp()
	open := []session.Event{
		turnStart(t, next, 1),
		ev(t, wire.TypeStepStart, next+1, map[string]any{"turn": 1, "step": 1}),
		msg,
	}
	_, err = c.Append(w.ctx(), id, session.WireEvents(open))
	require.ErrorIs(t, err, sfclient.ErrTurnLeftOpen)
	require.Equal(t, `agent "`+id+`" runs its own turns: the append batch leaves turn 1 open (its turn/start at index 0, seq `+
		jsonInt(next)+`, has no turn/end); append whole turns`, err.Error())
	require.Len(t, w.storedEvents(id), int(next), "the refused batch was stored")

	// A whole turn is accepted, and the agent's turn follows it.
	res, err := c.Append(w.ctx(), id, session.WireEvents([]session.Event{turnStart(t, next, 1), assistantText(t, next+1, 1, "harness turn"), turnEnd(t, next+2, 1)}))
	require.NoError(t, err)
	require.Equal(t, next+3, res.NextSeq)
	turn, err := c.RunTurn(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"hi"`)})
	require.NoError(t, err)
	require.Equal(t, int64(2), turn.Ended.Turn)
	require.Equal(t, "completed", turn.Ended.Reason.Kind)
	_, err = c.Dispose(w.ctx(), id)
	require.NoError(t, err)
	require.NoError(t, run.Get(w.ctx(), nil))

	// Without a route, no turn of the agent can nest: the open turn is
	// stored (a resume closes it).
	plain := w.id("append-open-plain")
	prun := w.create(wire.CreateSessionRequest{SessionID: plain})
	info, err = c.WaitReady(w.ctx(), plain)
	require.NoError(t, err)
	res, err = c.Append(w.ctx(), plain, session.WireEvents([]session.Event{turnStart(t, info.NextSeq, 1)}))
	require.NoError(t, err)
	require.Equal(t, info.NextSeq+1, res.NextSeq)
	_, err = c.Dispose(w.ctx(), plain)
	require.NoError(t, err)
	require.NoError(t, prun.Get(w.ctx(), nil))
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
