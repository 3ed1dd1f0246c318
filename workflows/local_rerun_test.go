package workflows_test

// A local store run again by a later attempt of its workflow task: the
// attempt that ran it first was never recorded (its worker died, or the task
// timed out), so the next attempt builds the batch anew, with a later time
// on the same events and, for live appends, possibly more events grouped
// behind them. What the first run stored is stored once (FORMAT.md §4.6).

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/wire"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/workflows"
)

// storeFirstAttempt makes the first local AppendBatch that matches run the
// real store twice: first as the unrecorded attempt did (earlier's events),
// then with the batch it was given.
func storeFirstAttempt(h *sessiontest.Harness, match func(activities.AppendBatchInput) bool, earlier func([]session.Event) []session.Event) *int {
	ran := 0
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			if ran == 0 && match(in) {
				ran++
				first := in
				first.Events = earlier(session.CloneEvents(in.Events))
				if _, err := h.Acts.AppendBatch(ctx, first); err != nil {
					return activities.AppendResult{}, err
				}
			}
			return h.Acts.AppendBatch(ctx, in)
		})
	return &ran
}

// The turn's opening batch (turn/start, step/start, the claimed message)
// carries the workflow's clock, which is later in the next attempt: the
// turn goes on and the log holds each event once, with the first time.
func TestTurnOpeningStoreRunAgainStoresOnce(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rerun-turn")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "Hello there"})
	var firstTime int64
	ran := storeFirstAttempt(h,
		func(in activities.AppendBatchInput) bool {
			return len(in.Events) > 0 && in.Events[0].Type == "turn/start"
		},
		func(evs []session.Event) []session.Event {
			for i := range evs {
				evs[i].Time -= 1500
			}
			firstTime = evs[0].Time
			return evs
		})
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "rerun-turn", AgentOptions: sessiontest.Route()}, sessiontest.PromptID("m-1", "hi"))
	require.Equal(t, 1, *ran)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Equal(t, firstTime, evs[0].Time, "the stored turn/start keeps the first attempt's time")
	require.Equal(t, 1, h.LocalCount(wire.AppendBatchName), "stored by the local activity")
}

// A live append whose first run stored only the head of the group: the
// next attempt's batch holds it and more, and only the rest is written.
func TestLocalAppendRunAgainWithMoreEventsStoresTheRest(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rerun-append")
	ran := storeFirstAttempt(h,
		func(in activities.AppendBatchInput) bool { return len(in.Events) == 5 },
		func(evs []session.Event) []session.Event { return evs[:2] })
	evs := appendTwice(t, h, "rerun-append", nil)
	require.Equal(t, 1, *ran)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs[:5]))
}

// Events that differ in anything but time are not the same events: the
// store refuses the batch, as it refuses any other overlap.
func TestLocalAppendRunAgainWithOtherContentIsRefused(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rerun-other")
	storeFirstAttempt(h,
		func(in activities.AppendBatchInput) bool { return len(in.Events) == 5 },
		func(evs []session.Event) []session.Event {
			evs[1].Data = []byte(`{"turn":1,"step":1,"other":true}`)
			return evs[:2]
		})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	a := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "rerun-other"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	err := a.Failure(t)
	require.Equal(t, "SeqMismatch", sessiontest.AppErr(t, err).Type())
	sessiontest.RequireMessage(t, err, `append seq mismatch for "rerun-other": expected 2 at index 0, got 0`)
	evs := sessiontest.Stored(t, h.Store, "rerun-other")
	require.Len(t, evs, 2, "the first run's two events, nothing more")
	require.JSONEq(t, `{"turn":1,"step":1,"other":true}`, string(evs[1].Data))
}

// userMessageData is the data of the user/message event of a text input.
func userMessageData(id, text string) []byte {
	return []byte(`{"id":"` + id + `","role":"user","content":[{"type":"text","text":"` + text + `"}],"source":{"kind":"user"}}`)
}

// steerRerun runs turn 1 of session id: f1 opens it, s1 is steered while
// the model streams; the batch of step 2 is first stored as the unrecorded
// attempt built it (earlier, from the batch this attempt builds: step/end
// 1, step/start 2, user/message s1), and s9, an input that attempt had
// admitted, is steered again after the step. It returns the stored log and
// the answer to s9.
func steerRerun(t *testing.T, id string, earlier func([]session.Event) []session.Event) ([]session.Event, wire.InputResult, wire.LoopState) {
	h := sessiontest.NewHarness(t).WithID(id)
	first := &sessiontest.FakeResponse{Text: "first", Hold: true}
	sessiontest.NewFakeAgent(h, first, &sessiontest.FakeResponse{Text: "second"}, &sessiontest.FakeResponse{Text: "third"})
	ran := storeFirstAttempt(h,
		func(in activities.AppendBatchInput) bool {
			return len(in.Events) > 1 && in.Events[1].Type == "step/start" && string(in.Events[1].Data) == `{"turn":1,"step":2}`
		}, earlier)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	steer := h.UpdateAt(3*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s1", "steer"))
	h.At(3*time.Second, func() { close(first.Release) })
	again := h.UpdateAt(4*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s9", "nine"))
	h.WaitFor(5*time.Second, "the turn ended", h.TurnsEnded(1))
	var st wire.LoopState
	h.At(6*time.Second, func() { st = h.LoopState() })
	disp := h.UpdateAt(7*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	require.Equal(t, 1, *ran, "the step's batch was stored first as the earlier attempt built it")
	ready.OK(t)
	fu.OK(t)
	steer.OK(t)
	disp.OK(t)
	var res wire.InputResult
	again.Decode(t, &res)
	evs := sessiontest.Stored(t, h.Store, id)
	sessiontest.RequireContiguous(t, evs)
	sessiontest.RequireBalanced(t, evs)
	return evs, res, st
}

// The observed flood case: the unrecorded attempt claimed s1 and s9, this
// one only s1 (s9's update comes back later). The log holds both once; the
// turn goes on from what is stored, and s9's update is answered as claimed
// by turn 1 without being stored again.
func TestTurnStepStoredWithMoreInputsByEarlierAttempt(t *testing.T) {
	evs, res, st := steerRerun(t, "rerun-more", func(evs []session.Event) []session.Event {
		nine := evs[len(evs)-1]
		nine.Seq++
		nine.Data = userMessageData("s9", "nine")
		return append(evs, nine)
	})
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message",
		"step/end", "step/start", "user/message", "user/message", "assistant/message", "step/end", "turn/end",
	}, sessiontest.Types(evs))
	require.Equal(t, []string{"one", "steer", "nine"}, sessiontest.UserTexts(t, evs))
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Equal(t, wire.InputResult{MessageID: "s9", Target: "next-step", Turn: 1, SplicedSeq: -1}, res)
	require.Len(t, st.Recent, 1)
	require.Equal(t, []string{"f1", "s1", "s9"}, st.Recent[0].Claimed)
	require.Empty(t, st.Pending.NextStep)
}

// The unrecorded attempt claimed another input (s9) than this one (s1):
// the log holds s9 in step 2, s1 goes back to the inbox and step 3 claims
// it; s9's update is answered without storing it again. Each input is
// stored once and the turn completes.
func TestTurnStepStoredWithOtherInputsByEarlierAttempt(t *testing.T) {
	evs, res, st := steerRerun(t, "rerun-swap", func(evs []session.Event) []session.Event {
		evs[len(evs)-1].Data = userMessageData("s9", "nine")
		return evs
	})
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message",
		"step/end", "step/start", "user/message", "assistant/message",
		"step/end", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
	}, sessiontest.Types(evs))
	require.Equal(t, []string{"one", "nine", "steer"}, sessiontest.UserTexts(t, evs))
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Equal(t, wire.InputResult{MessageID: "s9", Target: "next-step", Turn: 1, SplicedSeq: -1}, res)
	require.Equal(t, []string{"f1", "s9", "s1"}, st.Recent[0].Claimed)
}

// The unrecorded attempt ended turn 1 after step 1 (s1 had not come yet)
// where this one opens step 2 for s1: the turn ends as stored, s1 goes
// back to the inbox and starts turn 2, stored once.
func TestTurnEndedByEarlierAttempt(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rerun-ended")
	first := &sessiontest.FakeResponse{Text: "first", Hold: true}
	sessiontest.NewFakeAgent(h, first, &sessiontest.FakeResponse{Text: "second"})
	var turnEnd session.Event
	ran := storeFirstAttempt(h,
		func(in activities.AppendBatchInput) bool {
			return len(in.Events) > 1 && in.Events[1].Type == "step/start" && string(in.Events[1].Data) == `{"turn":1,"step":2}`
		},
		func(evs []session.Event) []session.Event {
			turnEnd = sessiontest.Ev(t, "turn/end", evs[1].Seq, map[string]any{"turn": 1, "reason": map[string]string{"kind": "completed"}})
			return []session.Event{evs[0], turnEnd}
		})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	steer := h.UpdateAt(3*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s1", "steer"))
	h.At(3*time.Second, func() { close(first.Release) })
	h.WaitFor(4*time.Second, "two turns ended", h.TurnsEnded(2))
	var st wire.LoopState
	h.At(6*time.Second, func() { st = h.LoopState() })
	disp := h.UpdateAt(7*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "rerun-ended", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	require.Equal(t, 1, *ran)
	ready.OK(t)
	fu.OK(t)
	steer.OK(t)
	disp.OK(t)
	evs := sessiontest.Stored(t, h.Store, "rerun-ended")
	sessiontest.RequireContiguous(t, evs)
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
	}, sessiontest.Types(evs))
	require.Equal(t, turnEnd.Time, evs[5].Time, "turn 1's end is the earlier attempt's")
	require.Equal(t, []string{"one", "steer"}, sessiontest.UserTexts(t, evs))
	require.Equal(t, []string{"completed", "completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Len(t, st.Recent, 2)
	require.Equal(t, []string{"f1"}, st.Recent[0].Claimed)
	require.Equal(t, []string{"s1"}, st.Recent[1].Claimed)
}

// The unrecorded attempt opened step 2 for s9 (admitted in that attempt)
// where this one, without s9, ends the turn: EndTurn stores nothing and
// reports the held step, the turn goes on with it, and s9's update, when
// it comes, is answered as claimed by turn 1 and not stored again.
func TestTurnNextStepOpenedByEarlierAttempt(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rerun-next")
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "first"}, &sessiontest.FakeResponse{Text: "second"})
	ends := 0
	h.Env.OnActivity(wire.EndTurnActivity, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in agent.EndTurnInput) (agent.EndTurnResult, error) {
			ends++
			if ends == 1 {
				hd := h.Store.Attach(in.Ref)
				seq := hd.NextSeq()
				nine := sessiontest.Ev(t, "user/message", seq+2, json.RawMessage(userMessageData("s9", "nine")))
				nine.SurfaceOp = session.AppendOp()
				require.NoError(t, hd.AppendRerun(ctx, []session.Event{
					sessiontest.Ev(t, "step/end", seq, wire.StepEnd{Turn: 1, Step: 1}),
					sessiontest.Ev(t, "step/start", seq+1, wire.StepStart{Turn: 1, Step: 2}),
					nine,
				}))
			}
			return fa.EndTurn(ctx, in)
		})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.WaitFor(3*time.Second, "the turn ended", h.TurnsEnded(1))
	again := h.UpdateAt(4*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s9", "nine"))
	var st wire.LoopState
	h.At(6*time.Second, func() { st = h.LoopState() })
	disp := h.UpdateAt(7*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "rerun-next", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	var res wire.InputResult
	again.Decode(t, &res)
	require.Equal(t, wire.InputResult{MessageID: "s9", Target: "next-step", Turn: 1, SplicedSeq: -1}, res)
	evs := sessiontest.Stored(t, h.Store, "rerun-next")
	sessiontest.RequireContiguous(t, evs)
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{
		"turn/start", "step/start", "user/message", "assistant/message",
		"step/end", "step/start", "user/message", "assistant/message", "step/end", "turn/end",
	}, sessiontest.Types(evs))
	require.Equal(t, []string{"one", "nine"}, sessiontest.UserTexts(t, evs))
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Equal(t, 2, ends)
	require.Len(t, st.Recent, 1)
	require.Equal(t, []string{"f1", "s9"}, st.Recent[0].Claimed)
	require.Equal(t, int64(2), st.Recent[0].Steps)
	require.Empty(t, st.Pending.NextStep)
}

// An input update delivered again (the same message id and message): a
// client whose answer was lost sends it again, and the server knows an
// update's id only within its run, so after continue-as-new it reaches the
// next run as a new update. While it is pending it is answered without
// being queued twice; once a turn stored it, it is answered as claimed by
// that turn and not stored again (also by the next run, which is given
// the claims in its state).
func TestTurnInputDeliveredAgainIsStoredOnce(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("again")
	first := &sessiontest.FakeResponse{Text: "first", Hold: true}
	sessiontest.NewFakeAgent(h, first, &sessiontest.FakeResponse{Text: "second"})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	h.AtStarted(2*time.Second, wire.CallModelActivity, func() {})
	s1 := h.UpdateAt(3*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s1", "steer"))
	pending := h.UpdateAt(3*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s1", "steer"))
	other := h.UpdateAt(3*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s1", "other text"))
	h.At(3*time.Second, func() { close(first.Release) })
	h.WaitFor(4*time.Second, "the turn ended", h.TurnsEnded(1))
	stored := h.UpdateAt(5*time.Second, "", wire.UpdateSteer, sessiontest.PromptID("s1", "steer"))
	f1 := h.UpdateAt(5*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("f1", "one"))
	var st wire.LoopState
	h.At(6*time.Second, func() { st = h.LoopState() })
	disp := h.UpdateAt(7*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "again", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	for _, r := range []*sessiontest.Result{s1, pending, stored, f1} {
		var res wire.InputResult
		r.Decode(t, &res)
		require.Equal(t, int64(1), res.Turn, "answered as turn 1's input")
	}
	require.ErrorContains(t, other.Rejection(t), `Steer: message "s1" is already pending`, "another message under a pending id is refused as before")
	evs := sessiontest.Stored(t, h.Store, "again")
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"one", "steer"}, sessiontest.UserTexts(t, evs))
	require.Len(t, st.Recent, 1, "nothing delivered again started a turn")
	require.Equal(t, wire.LoopIdle, st.State)
}
