package workflows_test

// A workflow task attempt that left no history (its completion refused,
// its time run out) may have stored a group of Appends, or may store it
// late: the SDK does not stop an abandoned attempt's local activity. The
// group store must never write inside a turn another attempt opened: an
// unclaimed turn/start (or any event of a type the workflow's own stores
// write) held past the group's cursor is a barrier after which nothing is
// written (jsonl.Handle.AppendGroup). The abandoned attempt's store is
// simulated by running the activity with its input in the middle of the
// retried attempt's stores.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// lateGroupStore is the group store of the AtEnd batch x that an
// abandoned attempt whose cursor was cursor runs late.
func lateGroupStore(ref wire.HandleRef, cursor int64, x []session.Event) activities.AppendBatchInput {
	events := session.CloneEvents(x)
	for i := range events {
		events[i].Seq = cursor + int64(i)
	}
	return activities.AppendBatchInput{Ref: ref, Events: events, Rerun: true, Cursor: cursor,
		Group: []activities.GroupSpan{{Len: len(x), AtEnd: true}}}
}

// The retried attempt opened a turn at the cursor; the abandoned attempt's
// group store of X lands right after that opening, while the turn runs. It
// writes nothing and fails; the turn completes; X's update, after the
// turn, stores X once, after the turn.
func TestLateGroupStoreAfterATurnOpeningWritesNothing(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("late-group")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	x := callerBatch(t, 0, 2)
	var lateErr error
	late := 0
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			res, err := h.Acts.AppendBatch(ctx, in)
			if err == nil && len(in.Events) > 0 && in.Events[0].Type == wire.TypeTurnStart && late == 0 {
				late++
				_, lateErr = h.Acts.AppendBatch(ctx, lateGroupStore(in.Ref, in.Events[0].Seq, x))
			}
			return res, err
		})
	var rx *sessiontest.Result
	fu, st, evs := turnAfterPlant(t, h, "late-group", func() {
		rx = h.UpdateAt(4*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: x, AtEnd: true})
	})
	fu.OK(t)
	require.Equal(t, 1, late)
	app := sessiontest.AppErr(t, lateErr)
	require.Equal(t, "SeqMismatch", app.Type())
	require.Contains(t, app.Error(), "the turn/start stored at seq 0 past the group's cursor is no batch's: nothing is written after it")
	var gx wire.AppendResult
	rx.Decode(t, &gx)
	require.Equal(t, int64(8), gx.NextSeq, "X stored once, after the turn")
	require.Equal(t, append(append([]string{}, turnTypes...), "todo/write", "todo/write"), sessiontest.Types(evs))
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"caller 0 event 0", "caller 0 event 1"}, []string{text(t, evs[6]), text(t, evs[7])})
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Len(t, st.Recent, 1)
	require.Equal(t, int64(0), st.Recent[0].StartSeq)
}

// sendThenFollowup runs a session with a route whose callers' AtEnd
// batches and then a Followup reach it at 2 s, in one workflow task; once
// the turn has ended, the steps then schedules run. It returns the
// Appends' results, the Followup's and the stored log.
func sendThenFollowup(t *testing.T, h *sessiontest.Harness, id string, then func(), batches ...[]session.Event) ([]*sessiontest.Result, *sessiontest.Result, []session.Event) {
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var rs []*sessiontest.Result
	var fu *sessiontest.Result
	h.At(2*time.Second, func() {
		for _, b := range batches {
			rs = append(rs, h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: b, AtEnd: true}))
		}
		fu = h.Update("", wire.UpdateFollowup, sessiontest.PromptID("m-1", "hi"))
	})
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	if then != nil {
		then()
	}
	disp := h.UpdateAt(9*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	return rs, fu, sessiontest.Stored(t, h.Store, id)
}

// The earlier attempt stored X and then opened the turn after it (one
// workflow task: the Append, then the Followup). The retry's group store
// of X finds it and stops at the opening, which it does not keep ahead:
// the retry's turn reconciles that opening (D77) instead of opening the
// turn a second time after it.
func TestRetryGroupStoreStopsAtAnEarlierTurnOpening(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("retry-before-turn")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	x := callerBatch(t, 0, 2)
	opening := sessiontest.TurnStart(t, 0, 1)
	stores := plantEarlierAttempt(t, h, x, []session.Event{opening})
	rs, fu, evs := sendThenFollowup(t, h, "retry-before-turn", nil, x)
	fu.OK(t)
	var gx wire.AppendResult
	rs[0].Decode(t, &gx)
	require.Equal(t, int64(2), gx.NextSeq, "X answered where the earlier attempt stored it")
	require.Equal(t, 1, *stores)
	require.Equal(t, append([]string{"todo/write", "todo/write"}, turnTypes...), sessiontest.Types(evs))
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, opening.Time, evs[2].Time, "the turn/start the earlier attempt stored")
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}

// The earlier attempt opened the turn (X's update reached it only while
// the turn ran, and was refused); the retry admits X first. Its group
// store cannot write X inside the turn: X's Append fails with the refusal,
// nothing written; the turn reconciles the opening and completes; X sent
// again after the turn is stored once.
func TestRetryGroupStoreRefusedAfterAnEarlierTurnOpening(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("retry-after-turn")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	x := callerBatch(t, 0, 2)
	opening := sessiontest.TurnStart(t, 0, 1)
	plantEarlierAttempt(t, h, []session.Event{opening})
	var again *sessiontest.Result
	rs, fu, evs := sendThenFollowup(t, h, "retry-after-turn", func() {
		again = h.UpdateAt(5*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: x, AtEnd: true})
	}, x)
	fu.OK(t)
	app := sessiontest.AppErr(t, rs[0].Failure(t))
	require.Equal(t, "SeqMismatch", app.Type())
	var ga wire.AppendResult
	again.Decode(t, &ga)
	require.Equal(t, int64(8), ga.NextSeq)
	require.Equal(t, append(append([]string{}, turnTypes...), "todo/write", "todo/write"), sessiontest.Types(evs))
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, opening.Time, evs[0].Time)
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}
