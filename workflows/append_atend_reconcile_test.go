package workflows_test

// A workflow task attempt that stored a group of AtEnd Appends and left no
// history is retried; the retry admits the updates in another order or
// grouping. The group store adopts what the log holds (the log is the
// truth): each caller is answered with the seqs its events are stored at,
// and nothing is stored twice. The earlier attempt's write is planted
// through the handle, just before the retry's first group store.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// plantEarlierAttempt makes the first group store find planted (the
// batches an unrecorded attempt stored, numbered from the workflow's
// cursor in order) already in the log, written through the handle. It
// returns the number of group stores that ran.
func plantEarlierAttempt(t *testing.T, h *sessiontest.Harness, planted ...[]session.Event) *int {
	stores := new(int)
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			if len(in.Group) > 0 {
				*stores++
				if *stores == 1 {
					var events []session.Event
					for _, b := range planted {
						events = append(events, b...)
					}
					events = session.CloneEvents(events)
					for i := range events {
						events[i].Seq = in.Cursor + int64(i)
					}
					require.NoError(t, h.Store.Attach(in.Ref).Append(ctx, events))
				}
			}
			return h.Acts.AppendBatch(ctx, in)
		})
	return stores
}

// atEndRun runs a session whose callers send AtEnd batches at the times
// given (callers at one time reach the session together), then disposes
// it; it returns each caller's result.
func atEndRun(t *testing.T, h *sessiontest.Harness, id string, sends map[time.Duration][]int, batches map[int][]session.Event) map[int]wire.AppendResult {
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	res := map[int]*sessiontest.Result{}
	for at, callers := range sends {
		h.At(at, func() {
			for _, c := range callers {
				res[c] = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: batches[c], AtEnd: true})
			}
		})
	}
	disp := h.UpdateAt(10*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	out := map[int]wire.AppendResult{}
	for c, r := range res {
		var a wire.AppendResult
		r.Decode(t, &a)
		out[c] = a
	}
	return out
}

// sizes is the length of each caller's batch.
func sizes(batches map[int][]session.Event) map[int]int {
	out := map[int]int{}
	for c, b := range batches {
		out[c] = len(b)
	}
	return out
}

// The earlier attempt stored [A, B]; the retry brings [B, A]: both are
// answered with the seqs they hold, nothing is written again.
func TestAtEndRetryInOtherOrderAdoptsTheLog(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("retry-swap")
	a, b := callerBatch(t, 0, 2), callerBatch(t, 1, 3)
	stores := plantEarlierAttempt(t, h, a, b)
	batches := map[int][]session.Event{0: a, 1: b}
	got := atEndRun(t, h, "retry-swap", map[time.Duration][]int{2 * time.Second: {1, 0}}, batches)
	require.Equal(t, map[int]wire.AppendResult{0: {NextSeq: 2}, 1: {NextSeq: 5}}, got)
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "retry-swap"), sizes(batches), got)
	require.Equal(t, 1, *stores, "B's store found A too: A's update was answered from what it found")
}

// The retry brings B only; A comes in a later workflow task and is
// answered with the seqs the earlier attempt stored it at, not stored
// again.
func TestAtEndRetryLaterUpdateClaimsWhatIsStoredAhead(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("retry-later")
	a, b := callerBatch(t, 0, 2), callerBatch(t, 1, 3)
	stores := plantEarlierAttempt(t, h, a, b)
	batches := map[int][]session.Event{0: a, 1: b}
	got := atEndRun(t, h, "retry-later", map[time.Duration][]int{2 * time.Second: {1}, 4 * time.Second: {0}}, batches)
	require.Equal(t, map[int]wire.AppendResult{0: {NextSeq: 2}, 1: {NextSeq: 5}}, got)
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "retry-later"), sizes(batches), got)
	require.Equal(t, 1, *stores, "A was not stored again")
}

// The retry brings [C, B, A]: A and B are found, C is stored after them.
func TestAtEndRetryWithANewBatch(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("retry-more")
	a, b, c := callerBatch(t, 0, 2), callerBatch(t, 1, 3), callerBatch(t, 2, 1)
	plantEarlierAttempt(t, h, a, b)
	batches := map[int][]session.Event{0: a, 1: b, 2: c}
	got := atEndRun(t, h, "retry-more", map[time.Duration][]int{2 * time.Second: {2, 1, 0}}, batches)
	require.Equal(t, map[int]wire.AppendResult{0: {NextSeq: 2}, 1: {NextSeq: 5}, 2: {NextSeq: 6}}, got)
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "retry-more"), sizes(batches), got)
}

// The earlier write was cut short: A whole and the first of B's three
// events (a torn write repaired to whole lines). B's head is found and
// completed, A is found.
func TestAtEndRetryCompletesAPartialWrite(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("retry-torn")
	a, b := callerBatch(t, 0, 2), callerBatch(t, 1, 3)
	plantEarlierAttempt(t, h, a, b[:1])
	batches := map[int][]session.Event{0: a, 1: b}
	got := atEndRun(t, h, "retry-torn", map[time.Duration][]int{2 * time.Second: {1, 0}}, batches)
	require.Equal(t, map[int]wire.AppendResult{0: {NextSeq: 2}, 1: {NextSeq: 5}}, got)
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "retry-torn"), sizes(batches), got)
}

// An AtEnd batch and a batch whose caller chose its seqs (continuing the
// AtEnd one): the earlier attempt stored both. The AtEnd one is found by
// content, the other verified at its seqs (today's rule), each stored once.
func TestAtEndRetryBesideASeqChosenBatch(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("retry-mixed")
	a, s := callerBatch(t, 0, 2), callerBatch(t, 1, 2)
	for i := range s {
		s[i].Seq = 2 + int64(i)
	}
	plantEarlierAttempt(t, h, a, s)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var ra, rs *sessiontest.Result
	h.At(2*time.Second, func() {
		ra = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: a, AtEnd: true})
		rs = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: s})
	})
	later := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: callerBatch(t, 2, 1), AtEnd: true})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "retry-mixed"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	var ga, gs, gl wire.AppendResult
	ra.Decode(t, &ga)
	rs.Decode(t, &gs)
	later.Decode(t, &gl)
	require.Equal(t, int64(2), ga.NextSeq)
	require.Equal(t, int64(4), gs.NextSeq)
	require.Equal(t, int64(5), gl.NextSeq)
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "retry-mixed"), map[int]int{0: 2, 1: 2, 2: 1},
		map[int]wire.AppendResult{0: ga, 1: gs, 2: gl})
}

// One caller's batch the store refuses, in a retried group: it fails
// alone with its refusal, the others are answered where the log holds
// them.
func TestAtEndRetryRefusedBatchFailsAlone(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("retry-refused")
	a, b := callerBatch(t, 0, 2), callerBatch(t, 1, 3)
	bad := callerBatch(t, 2, 1)
	bad[0] = sessiontest.Ev(t, wire.TypeTodoWrite, 0, map[string]any{"text": "poison"})
	planted := false
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			if len(in.Group) > 0 && !planted {
				planted = true
				events := append(session.CloneEvents(a), session.CloneEvents(b)...)
				for i := range events {
					events[i].Seq = in.Cursor + int64(i)
				}
				require.NoError(t, h.Store.Attach(in.Ref).Append(ctx, events))
			}
			if poisoned(in) {
				return activities.AppendResult{}, temporal.NewNonRetryableApplicationError("the store refuses the poison", wire.ErrTypeInvalidArgument, nil)
			}
			return h.Acts.AppendBatch(ctx, in)
		})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	res := map[int]*sessiontest.Result{}
	h.At(2*time.Second, func() {
		res[1] = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: b, AtEnd: true})
		res[2] = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: bad, AtEnd: true})
		res[0] = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: a, AtEnd: true})
	})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "retry-refused"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	app := sessiontest.AppErr(t, res[2].Failure(t))
	require.Equal(t, "InvalidArgument", app.Type())
	require.Contains(t, app.Error(), "the store refuses the poison")
	got := map[int]wire.AppendResult{}
	for _, c := range []int{0, 1} {
		var r wire.AppendResult
		res[c].Decode(t, &r)
		got[c] = r
	}
	require.Equal(t, map[int]wire.AppendResult{0: {NextSeq: 2}, 1: {NextSeq: 5}}, got)
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "retry-refused"), map[int]int{0: 2, 1: 3}, got)
}

// sendAs sends an AtEnd Append of batch under update id at d and returns
// where its result goes.
func sendAs(h *sessiontest.Harness, d time.Duration, id string, batch []session.Event) *updateOutcome {
	out := &updateOutcome{}
	h.At(d, func() {
		h.Env.UpdateWorkflow(wire.UpdateAppend, id, &sdktest.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { out.err, out.done = err, true },
			OnComplete: func(res any, err error) {
				out.done, out.err = true, err
				if r, ok := res.(wire.AppendResult); ok {
					out.res = r
				}
			},
		}, workflows.AppendRequest{Events: batch, AtEnd: true})
	})
	return out
}

// updateOutcome is the outcome of an update sendAs sent.
type updateOutcome struct {
	done bool
	res  wire.AppendResult
	err  error
}

// A run that found A stored ahead (its update not admitted yet) and
// answered B continues as new: the next run answers B's update, which the
// server delivers again under the same id, without storing it again, and
// A's update from what the first run kept ahead.
func TestAtEndAnswersAndAheadCarriedAcrossContinueAsNew(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("carry-atend")
	a, b := callerBatch(t, 0, 2), callerBatch(t, 1, 3)
	plantEarlierAttempt(t, h, a, b)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	first := sendAs(h, 2*time.Second, "update-b", b)
	h.AtNoWait(3*time.Second, func() { h.Env.SetContinueAsNewSuggested(true) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "carry-atend"})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, h.Env.GetWorkflowError(), &can)
	ready.OK(t)
	require.True(t, first.done)
	require.NoError(t, first.err)
	require.Equal(t, int64(5), first.res.NextSeq)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	require.Len(t, state.AppendsAhead, 2, "A's events, kept ahead")
	require.Equal(t, []workflows.AnsweredAppend{{ID: "update-b", NextSeq: 5}}, state.AnsweredAtEnd)

	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("carry-atend")
	again := sendAs(h2, 2*time.Second, "update-b", b)
	late := sendAs(h2, 3*time.Second, "update-a", a)
	disp := h2.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.LiveSession, state)
	require.NoError(t, h2.Env.GetWorkflowError())
	disp.OK(t)
	require.NoError(t, again.err)
	require.NoError(t, late.err)
	require.Equal(t, int64(5), again.res.NextSeq, "B's update delivered again: answered as before")
	require.Equal(t, int64(2), late.res.NextSeq, "A's update: answered from what the first run kept ahead")
	require.Zero(t, h2.Count(wire.AppendBatchName), "nothing stored by the second run")
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "carry-atend"), map[int]int{0: 2, 1: 3},
		map[int]wire.AppendResult{0: late.res, 1: again.res})
}
