package workflows_test

// The live phase's Append: its validator, coalescing within the window,
// group commit, and a failed append that fails the pending ones.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestAppendsCoalesceWithinWindow(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("co")
	turn := sessiontest.LiveTurn(t, 0, 1, "x")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	a := h.UpdateNoWaitAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: turn[:2]})
	b := h.UpdateNoWaitAt(2*time.Second+50*time.Millisecond, "", wire.UpdateAppend, workflows.AppendRequest{Events: turn[2:4]})
	c := h.UpdateNoWaitAt(2*time.Second+150*time.Millisecond, "", wire.UpdateAppend, workflows.AppendRequest{Events: turn[4:]})
	late := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 5, 2, "y")})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "co", Options: &wire.Options{AppendWindowMs: 200}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	var ra, rb, rc, rl wire.AppendResult
	a.Decode(t, &ra)
	b.Decode(t, &rb)
	c.Decode(t, &rc)
	late.Decode(t, &rl)
	require.Equal(t, int64(2), ra.NextSeq, "each append learns the end of its own batch")
	require.Equal(t, int64(4), rb.NextSeq)
	require.Equal(t, int64(5), rc.NextSeq)
	require.Equal(t, int64(10), rl.NextSeq)
	require.Equal(t, 2, h.Count(wire.AppendBatchName), "three appends in one window, one later")
	evs := sessiontest.Stored(t, h.Store, "co")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 10)
}

// Without an explicit window, appends are group-committed: a lone append is
// stored at once (no timer), and appends that arrive while a store is in
// flight are stored together by the next one.
func TestAppendsGroupCommit(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("gc")
	turn := sessiontest.LiveTurn(t, 0, 1, "x")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	// The store takes 500 ms; b and c arrive while a's store runs.
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).After(500 * time.Millisecond).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			return h.Acts.AppendBatch(ctx, in)
		})
	a := h.UpdateNoWaitAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: turn[:2]})
	b := h.UpdateNoWaitAt(2*time.Second+100*time.Millisecond, "", wire.UpdateAppend, workflows.AppendRequest{Events: turn[2:4]})
	c := h.UpdateNoWaitAt(2*time.Second+200*time.Millisecond, "", wire.UpdateAppend, workflows.AppendRequest{Events: turn[4:]})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "gc"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	var ra, rb, rc wire.AppendResult
	a.Decode(t, &ra)
	b.Decode(t, &rb)
	c.Decode(t, &rc)
	require.Equal(t, int64(2), ra.NextSeq, "a is stored alone, without waiting for a window")
	require.Equal(t, int64(4), rb.NextSeq, "b and c share the next store, each learning its own end")
	require.Equal(t, int64(5), rc.NextSeq)
	require.Equal(t, 2, h.Count(wire.AppendBatchName))
	evs := sessiontest.Stored(t, h.Store, "gc")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 5)
}

func TestAppendValidator(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("val")
	big := sessiontest.Ev(t, "todo/write", 0, map[string]any{"text": strings.Repeat("x", 4096)})
	surface := sessiontest.TurnStart(t, 0, 1)
	surface.SurfaceOp = session.AppendOp()
	var early *sessiontest.Result
	h.At(0, func() {
		early = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.TurnStart(t, 0, 1)}})
	})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	gap := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.TurnStart(t, 5, 1)}})
	empty := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{})
	tooBig := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{big}})
	invalid := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{surface}})
	first := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	retry := h.UpdateAt(4*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	conflict := h.UpdateAt(5*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "different")})
	after := h.NewResult(wire.UpdateAppend)
	var disp *sessiontest.Result
	h.At(6*time.Second, func() {
		disp = h.Update("", wire.UpdateDispose)
		h.Send(after, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.TurnStart(t, 5, 2)}})
	})
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "val", Options: &wire.Options{MaxBatchBytes: 2048}})
	require.NoError(t, h.Env.GetWorkflowError())

	ready.OK(t)
	require.ErrorContains(t, early.Rejection(t), `session "val" is not live`)
	require.ErrorContains(t, gap.Rejection(t), `append seq mismatch for "val": expected 0 at index 0, got 5`)
	require.ErrorContains(t, empty.Rejection(t), "append batch must not be empty")
	require.ErrorContains(t, tooBig.Rejection(t), "exceeds the batch limit of 2048 bytes")
	require.ErrorContains(t, invalid.Rejection(t), "invalid session event")
	var r wire.AppendResult
	first.Decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	retry.Decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Equal(t, "SeqMismatch", sessiontest.AppErr(t, conflict.Failure(t)).Type())
	require.ErrorContains(t, after.Rejection(t), `agent "val" lifecycle disposed`)
	disp.OK(t)
	require.Len(t, sessiontest.Stored(t, h.Store, "val"), 5)
}

func TestAppendFailureFailsPendingAndRecovers(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("af")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, sessiontest.PlainErr("disk full")).Once()
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(h.Acts.AppendBatch)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	failed := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	again := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "af"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	sessiontest.RequireMessage(t, failed.Failure(t), "disk full")
	var r wire.AppendResult
	again.Decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Len(t, sessiontest.Stored(t, h.Store, "af"), 5)
}

// When the store refuses a group of several Appends (a refusal the
// validator did not foresee: here a store that refuses a poisoned event),
// each Append is stored on its own: the ones before the refused one are
// stored and learn their own end, the refused one fails with its own
// refusal, the one that continued it fails its seq check, and the session
// goes on from what is stored.
func TestAppendRefusedInAGroupFailsAlone(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("apart")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).After(500 * time.Millisecond).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			for _, e := range in.Events {
				if strings.Contains(string(e.Data), "poison") {
					return activities.AppendResult{}, temporal.NewNonRetryableApplicationError("the store refuses the poison", wire.ErrTypeInvalidArgument, nil)
				}
			}
			return h.Acts.AppendBatch(ctx, in)
		})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	ev := func(seq int64, text string) session.Event {
		return sessiontest.Ev(t, wire.TypeTodoWrite, seq, map[string]any{"text": text})
	}
	// a is stored alone; b, c, d and e arrive while a's store runs and are
	// stored together by the next one, which the poison in d refuses.
	a := h.UpdateNoWaitAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{ev(0, "a")}})
	b := h.UpdateNoWaitAt(2*time.Second+100*time.Millisecond, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{ev(1, "b0"), ev(2, "b1")}})
	c := h.UpdateNoWaitAt(2*time.Second+150*time.Millisecond, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{ev(3, "c")}})
	d := h.UpdateNoWaitAt(2*time.Second+200*time.Millisecond, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{ev(4, "poison")}})
	e := h.UpdateNoWaitAt(2*time.Second+250*time.Millisecond, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{ev(5, "e")}})
	after := h.UpdateAt(4*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{ev(4, "after")}})
	disp := h.UpdateAt(5*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "apart"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	var ra, rb, rc, rafter wire.AppendResult
	a.Decode(t, &ra)
	b.Decode(t, &rb)
	c.Decode(t, &rc)
	after.Decode(t, &rafter)
	require.Equal(t, int64(1), ra.NextSeq)
	require.Equal(t, int64(3), rb.NextSeq, "b is stored and learns its own end")
	require.Equal(t, int64(4), rc.NextSeq)
	refusal := sessiontest.AppErr(t, d.Failure(t))
	require.Equal(t, "InvalidArgument", refusal.Type())
	require.Contains(t, refusal.Error(), "the store refuses the poison")
	mismatch := sessiontest.AppErr(t, e.Failure(t))
	require.Equal(t, "SeqMismatch", mismatch.Type(), "e continued the refused batch")
	require.Equal(t, int64(5), rafter.NextSeq, "the session goes on from what is stored")
	evs := sessiontest.Stored(t, h.Store, "apart")
	sessiontest.RequireContiguous(t, evs)
	var texts []string
	for _, x := range evs {
		var dd struct{ Text string }
		require.NoError(t, json.Unmarshal(x.Data, &dd))
		texts = append(texts, dd.Text)
	}
	require.Equal(t, []string{"a", "b0", "b1", "c", "after"}, texts, "the log holds exactly what was acknowledged")
}
