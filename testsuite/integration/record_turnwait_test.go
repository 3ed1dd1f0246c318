package integration

// A recorded path of the waits for a turn's end: RunTurn (a Followup that
// waits), WaitTurn for the ended turn, and a WaitTurn for a turn still to
// come that the disposal answers.

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths,
		recordPath{name: "turn-wait", agent: scriptedAgent(scripted.Text("waited")), run: recordTurnWait})
}

// recordTurnWait: RunTurn, whose Followup completes with the turn's end;
// WaitTurn {turn: 1} answered at once; WaitTurn {turn: 2} pending until
// Dispose answers it LifecycleDisposed.
func recordTurnWait(t *testing.T, w *world) []fixture {
	id := w.id("rec-turn-wait")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	w.awaitLive(id)
	c := w.client()
	res, err := c.RunTurn(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"wait for me"`)})
	require.NoError(t, err)
	require.Equal(t, "completed", res.Ended.Reason.Kind)
	require.Equal(t, []string{"m1"}, res.Ended.Claimed)
	info, err := c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{Turn: 1})
	require.NoError(t, err)
	require.Equal(t, *res.Ended, info)
	future := make(chan error, 1)
	go func() {
		_, err := c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{Turn: 2})
		future <- err
	}()
	// The wait is accepted before the dispose is sent.
	w.awaitCond("the history of "+wid+" to show the pending WaitTurn {turn: 2} accepted (two accepted WaitTurn updates)", func() bool {
		return acceptedUpdates(w.history(wid, ""), wire.UpdateWaitTurn) == 2
	})
	w.dispose(id)
	require.ErrorIs(t, <-future, sfclient.ErrLifecycleDisposed)
	require.NoError(t, run.Get(w.ctx(), nil))
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, eventTypes(withoutRecords(t, readAll(t, w, id))))
	return only("turn-wait", wid, run)
}

// acceptedUpdates counts the updates named name that hist accepted.
func acceptedUpdates(hist *historypb.History, name string) int {
	n := 0
	for _, e := range hist.GetEvents() {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED &&
			e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == name {
			n++
		}
	}
	return n
}
