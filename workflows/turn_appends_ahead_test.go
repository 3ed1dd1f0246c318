package workflows_test

// A workflow task attempt that left no history stored a group of Appends
// at the workflow's cursor (or its local store wrote them late, after the
// retried attempt went on without them); the retried attempt starts a
// turn there. The turn's opening store finds the appended events where
// its turn/start goes: they are a well-formed append, so the turn keeps
// them ahead (by seq and print) for the update that brings them, and its
// own events go after them. Anything else there is still refused, as
// before (D77: the log is the truth). The unrecorded write is planted
// through the handle just before the turn's first store.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// plantBeforeTurn makes the first store of a batch opening a turn find
// planted (numbered from that batch's first seq) already in the log,
// written through the handle. It returns the number of such stores.
func plantBeforeTurn(t *testing.T, h *sessiontest.Harness, planted []session.Event) *int {
	return plantBeforeTurnFrom(t, h, func([]session.Event) []session.Event { return planted })
}

// plantBeforeTurnFrom is plantBeforeTurn of the events plant returns for
// the batch the store was given.
func plantBeforeTurnFrom(t *testing.T, h *sessiontest.Harness, plant func([]session.Event) []session.Event) *int {
	stores := new(int)
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			if len(in.Events) > 0 && in.Events[0].Type == wire.TypeTurnStart {
				*stores++
				if *stores == 1 {
					events := session.CloneEvents(plant(session.CloneEvents(in.Events)))
					for i := range events {
						events[i].Seq = in.Events[0].Seq + int64(i)
					}
					require.NoError(t, h.Store.Attach(in.Ref).Append(ctx, events))
				}
			}
			return h.Acts.AppendBatch(ctx, in)
		})
	return stores
}

// turnAfterPlant runs a session with a route: a Followup at 2 s (the
// turn), after its end the updates send schedules, then Dispose. It
// returns the Followup's result, the loop's state after the turn and the
// stored log.
func turnAfterPlant(t *testing.T, h *sessiontest.Harness, id string, send func()) (*sessiontest.Result, wire.LoopState, []session.Event) {
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("m-1", "hi"))
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	var st wire.LoopState
	h.At(3*time.Second, func() { st = h.LoopState() })
	if send != nil {
		send()
	}
	disp := h.UpdateAt(9*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	return fu, st, sessiontest.Stored(t, h.Store, id)
}

// turnTypes are the events of a one-step turn answered with text.
var turnTypes = []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}

// The turn finds an AtEnd batch where its turn/start goes: the batch is
// kept ahead and the turn's events go after it; the turn completes.
func TestTurnKeepsAStoredAppendAhead(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("turn-ahead")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	x := callerBatch(t, 0, 2)
	stores := plantBeforeTurn(t, h, x)
	fu, st, evs := turnAfterPlant(t, h, "turn-ahead", nil)
	fu.OK(t)
	require.Equal(t, 2, *stores, "the first store found the append; the second stored the turn after it")
	require.Equal(t, append([]string{"todo/write", "todo/write"}, turnTypes...), sessiontest.Types(evs))
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, []string{"caller 0 event 0", "caller 0 event 1"}, []string{text(t, evs[0]), text(t, evs[1])})
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Len(t, st.Recent, 1)
	require.Equal(t, int64(2), st.Recent[0].StartSeq, "the turn starts after the append")
	require.Equal(t, []string{"m-1"}, st.Recent[0].Claimed)
}

// The AtEnd Append whose batch the turn kept ahead comes after the turn:
// it is answered with the seqs the log holds it at and not stored again.
func TestTurnKeptAheadAppendAnsweredWithItsSeqs(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("turn-ahead-claim")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	x, y := callerBatch(t, 0, 2), callerBatch(t, 1, 1)
	plantBeforeTurn(t, h, x)
	var late, next *sessiontest.Result
	fu, _, evs := turnAfterPlant(t, h, "turn-ahead-claim", func() {
		late = h.UpdateAt(4*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: x, AtEnd: true})
		next = h.UpdateAt(5*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: y, AtEnd: true})
	})
	fu.OK(t)
	var gl, gn wire.AppendResult
	late.Decode(t, &gl)
	next.Decode(t, &gn)
	require.Equal(t, int64(2), gl.NextSeq, "answered with the seqs the turn kept ahead")
	require.Equal(t, int64(9), gn.NextSeq, "the next Append goes after the turn")
	require.Equal(t, append(append([]string{"todo/write", "todo/write"}, turnTypes...), "todo/write"), sessiontest.Types(evs))
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, "caller 1 event 0", text(t, evs[8]))
}

// A batch whose caller chose its seqs, kept ahead by the turn: its update,
// after the turn, is verified at those seqs and not stored again.
func TestTurnKeptAheadSeqChosenAppendVerifiedAtItsSeqs(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("turn-ahead-seqs")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	x := callerBatch(t, 0, 2)
	plantBeforeTurn(t, h, x)
	var late *sessiontest.Result
	fu, _, evs := turnAfterPlant(t, h, "turn-ahead-seqs", func() {
		late = h.UpdateAt(4*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: x})
	})
	fu.OK(t)
	var gl wire.AppendResult
	late.Decode(t, &gl)
	require.Equal(t, int64(8), gl.NextSeq, "a batch below the cursor is answered with the cursor, as before")
	require.Equal(t, append([]string{"todo/write", "todo/write"}, turnTypes...), sessiontest.Types(evs))
}

// The unrecorded attempt stored an append and then opened this turn after
// it: the append is kept ahead and the opening found after it (equal but
// for time) is the turn's, stored once with the earlier time.
func TestTurnKeepsAppendAheadOfAnEarlierOpening(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("turn-ahead-rerun")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	x := callerBatch(t, 0, 2)
	var firstTime int64
	stores := plantBeforeTurnFrom(t, h, func(batch []session.Event) []session.Event {
		for i := range batch {
			batch[i].Time -= 1500
		}
		firstTime = batch[0].Time
		return append(session.CloneEvents(x), batch...)
	})
	fu, st, evs := turnAfterPlant(t, h, "turn-ahead-rerun", nil)
	fu.OK(t)
	require.Equal(t, 2, *stores)
	require.Equal(t, append([]string{"todo/write", "todo/write"}, turnTypes...), sessiontest.Types(evs))
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, firstTime, evs[2].Time, "the turn/start the earlier attempt stored")
	require.Equal(t, []string{"hi"}, sessiontest.UserTexts(t, evs))
	require.Equal(t, int64(2), st.Recent[0].StartSeq)
	require.Equal(t, "completed", st.Recent[0].Reason.Kind)
}

// A run that predates the change (its version marker the default) refuses
// the appended events as before: the turn fails to store and the session
// is disposed, with nothing written after them.
func TestTurnAheadBeforeTheChangeRefuses(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("turn-ahead-before")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	h.Env.OnGetVersion("turn-keeps-appends-ahead", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	x := callerBatch(t, 0, 2)
	stores := plantBeforeTurn(t, h, x)
	requireTurnRefused(t, h, "turn-ahead-before", x)
	require.Equal(t, 1, *stores)
}

// requireTurnRefused runs a session with a route whose first turn's store
// must fail: the session is disposed and the log holds planted only.
func requireTurnRefused(t *testing.T, h *sessiontest.Harness, id string, planted []session.Event) {
	t.Helper()
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("m-1", "hi"))
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError(), "the session is disposed")
	ready.OK(t)
	fu.OK(t)
	require.Len(t, h.Logs.Warnings("turn failed to store; disposing the session"), 1)
	require.Equal(t, sessiontest.Types(planted), sessiontest.Types(sessiontest.Stored(t, h.Store, id)), "nothing stored after them")
}

// Events the workflow's own stores write are not an append a later update
// claims: found where the turn's turn/start goes, the turn fails to store,
// as before.
func TestTurnRefusesOtherEventsWhereItStarts(t *testing.T) {
	for name, planted := range map[string][]session.Event{
		"a step of another turn": {sessiontest.Ev(t, wire.TypeStepStart, 0, map[string]any{"turn": 1, "step": 1})},
		"an inbox splice": {sessiontest.Ev(t, wire.TypeInboxSpliced, 0, map[string]any{
			"target": "next-turn", "start": 0, "removedCount": 0, "inserted": []any{}})},
		"an append, then a step": {callerBatch(t, 0, 1)[0], sessiontest.Ev(t, wire.TypeStepStart, 1, map[string]any{"turn": 1, "step": 1})},
	} {
		t.Run(name, func(t *testing.T) {
			h := sessiontest.NewHarness(t).WithID("turn-refused")
			sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
			plantBeforeTurn(t, h, planted)
			requireTurnRefused(t, h, "turn-refused", planted)
		})
	}
}
