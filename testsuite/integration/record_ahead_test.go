package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths,
		recordPath{name: "turn-keeps-appends-ahead", agent: scriptedAgent(scripted.Text("after them")), run: recordTurnKeepsAppendsAhead})
}

// recordTurnKeepsAppendsAhead: the turn-keeps-appends-ahead version. Two
// events an Append at the end stored at the workflow's cursor without its
// update being answered (what an unrecorded attempt of a workflow task
// leaves; written here through the session's write handle from another
// store instance) are found by turn 1's opening store: kept ahead, the turn
// goes after them. The Append at the end that brings them afterwards is
// answered with their seqs and stores nothing; Dispose.
func recordTurnKeepsAppendsAhead(t *testing.T, w *world) []fixture {
	id := w.id("rec-ahead")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	w.awaitLive(id)
	l := w.lease(id)
	require.NotNil(t, l)
	at := int64(len(w.storedEvents(id)))
	var ahead []session.Event
	for i, text := range []string{"first", "second"} {
		e, err := session.NewEvent(wire.TypeTodoWrite, at+int64(i), 1_700_000_000_000+int64(i), map[string]any{"text": text})
		require.NoError(t, err)
		ahead = append(ahead, e)
	}
	hd := w.store.Attach(jsonl.HandleRef{SessionID: id, HandleID: l.HandleID, Access: jsonl.AccessWrite})
	require.NoError(t, hd.Append(w.ctx(), ahead))

	res, err := w.client().RunTurn(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"go on"`)})
	require.NoError(t, err)
	require.Equal(t, "completed", res.Ended.Reason.Kind)

	again := w.appendAtEnd(id, renumbered(ahead, 0))
	require.Equal(t, at+2, again.NextSeq, "answered with the seqs the events hold")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	evs := withoutRecords(t, readAll(t, w, id))
	var types []string
	for _, e := range evs {
		if e.Seq >= at {
			types = append(types, e.Type)
		}
	}
	require.Equal(t, []string{"todo/write", "todo/write", "turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, types,
		"the appended events once, the turn after them")
	return only("turn-keeps-appends-ahead", wid, run)
}
