package workflows_test

// A live session continues as new on its own once its run's history reaches
// options.continueAsNewEvents, before the server suggests it (LIFECYCLE.md
// §9.4); runs that predate the change continue as new only when the server
// suggests it.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// continueAsNewState decodes the LiveState a run continued as new with.
func continueAsNewState(t *testing.T, err error) workflows.LiveState {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	require.Equal(t, wire.LiveSessionName, can.WorkflowType.Name)
	var state workflows.LiveState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
	return state
}

func TestContinueAsNewAtHistoryLength(t *testing.T) {
	opts := &wire.Options{ContinueAsNewEvents: 120, MaxBatchBytes: 512 << 10, SearchAttributes: true}
	h := sessiontest.NewHarness(t).WithID("thr")
	upserts := searchAttrUpserts(h)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	// One event short of the threshold: the run goes on.
	h.At(2*time.Second, func() { h.Env.SetCurrentHistoryLength(119) })
	first := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	// An append, then the history reaches the threshold: the append is
	// stored and the run continues as new.
	second := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 5, 2, "y")})
	h.AtNoWait(3*time.Second+100*time.Millisecond, func() { h.Env.SetCurrentHistoryLength(120) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{
		SessionID: "thr", Meta: &wire.SessionMeta{Cwd: "/work/thr"}, Options: opts,
		Hooks: wire.Hooks{DisposeActivity: sessiontest.HookDispose},
	})
	err := h.Env.GetWorkflowError()
	var info wire.SessionInfo
	ready.Decode(t, &info)
	first.OK(t)
	var sr wire.AppendResult
	second.Decode(t, &sr)
	require.Equal(t, int64(10), sr.NextSeq)
	state := continueAsNewState(t, err)
	require.Equal(t, int64(10), state.NextSeq)
	require.Equal(t, int64(2), state.LastTurn)
	require.Equal(t, info.Handle, state.Handle)
	require.Equal(t, &wire.Options{ContinueAsNewEvents: 120, MaxBatchBytes: 524288, SearchAttributes: true}, state.Options)
	require.Len(t, sessiontest.Stored(t, h.Store, "thr"), 10)
	require.Equal(t, []string{
		"SessionId=thr,SessionPhase=setup,SessionCwd=/work/thr",
		"SessionId=thr,SessionPhase=committing,SessionCwd=/work/thr",
		"SessionId=thr,SessionPhase=live,SessionCwd=/work/thr",
	}, *upserts)

	// The next run keeps the threshold: below it, it goes on; at it, it
	// continues as new again (the default of 1000 would not).
	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("thr")
	upserts2 := searchAttrUpserts(h2)
	ready2 := h2.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	h2.At(2*time.Second, func() { h2.Env.SetCurrentHistoryLength(119) })
	app2 := h2.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 10, 3, "z")})
	h2.AtNoWait(3*time.Second, func() { h2.Env.SetCurrentHistoryLength(120) })
	h2.Env.ExecuteWorkflow(workflows.LiveSession, state)
	err2 := h2.Env.GetWorkflowError()
	var info2 wire.SessionInfo
	ready2.Decode(t, &info2)
	require.Equal(t, int64(10), info2.NextSeq, "the cursor carried")
	require.Equal(t, info.Handle, info2.Handle)
	app2.OK(t)
	state2 := continueAsNewState(t, err2)
	require.Equal(t, int64(15), state2.NextSeq)
	require.Equal(t, &wire.Options{ContinueAsNewEvents: 120, MaxBatchBytes: 524288, SearchAttributes: true}, state2.Options)
	require.Equal(t, []string{"SessionId=thr,SessionPhase=live,SessionCwd=/work/thr"}, *upserts2,
		"the next run keeps the search attributes current")
	evs := sessiontest.Stored(t, h.Store, "thr")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 15)
	require.Empty(t, h2.Hooks.Log(), "continue-as-new is no disposal")
}

// Without the option, the run continues as new at the default of 1000
// events.
func TestContinueAsNewAtDefaultHistoryLength(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("dflt")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	h.At(2*time.Second, func() { h.Env.SetCurrentHistoryLength(999) })
	first := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	h.AtNoWait(3*time.Second, func() { h.Env.SetCurrentHistoryLength(1000) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "dflt"})
	err := h.Env.GetWorkflowError()
	ready.OK(t)
	first.OK(t)
	state := continueAsNewState(t, err)
	require.Equal(t, int64(5), state.NextSeq)
	require.Nil(t, state.Options)
}

// A run that predates the change (its GetVersion answers the default
// version) does not continue as new at the threshold, only when the server
// suggests it.
func TestContinueAsNewUnversionedWaitsForTheSuggestion(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("old")
	h.Env.OnGetVersion("continue-as-new-history-length", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	h.At(2*time.Second, func() { h.Env.SetCurrentHistoryLength(5000) })
	first := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	second := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 5, 2, "y")})
	var phase wire.Phase
	h.At(4*time.Second, func() {
		phase = h.Describe("").Phase
		h.Env.SetContinueAsNewSuggested(true)
	})
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{
		SessionID: "old", Options: &wire.Options{ContinueAsNewEvents: 120},
	})
	err := h.Env.GetWorkflowError()
	ready.OK(t)
	first.OK(t)
	second.OK(t)
	require.Equal(t, wire.PhaseLive, phase, "still live past the threshold")
	state := continueAsNewState(t, err)
	require.Equal(t, int64(10), state.NextSeq)
}

// A WaitTurn for a turn still to come is answered TurnWaitMoved before the
// run continues as new at the threshold, as on the server's suggestion.
func TestContinueAsNewAtHistoryLengthReleasesWaits(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("wt")
	sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Text: "one"})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("w1", "one"))
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	future := h.UpdateNoWaitAt(3*time.Second, "", wire.UpdateWaitTurn, wire.WaitTurnRequest{Turn: 2})
	h.AtNoWait(4*time.Second, func() { h.Env.SetCurrentHistoryLength(150) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{
		SessionID: "wt", AgentOptions: sessiontest.Route(), Options: &wire.Options{ContinueAsNewEvents: 150},
	})
	err := h.Env.GetWorkflowError()
	ready.OK(t)
	fu.OK(t)
	app := sessiontest.AppErr(t, future.Failure(t))
	require.Equal(t, "TurnWaitMoved", app.Type())
	state := continueAsNewState(t, err)
	require.Equal(t, int64(1), state.LastTurn)
	require.Len(t, state.RecentTurns, 1)
}

// The threshold is refused outside its bounds, before anything is created.
func TestContinueAsNewEventsBounds(t *testing.T) {
	for _, c := range []struct {
		events int
		msg    string
	}{
		{-1, "session options must not be negative"},
		{99, "continueAsNewEvents must be between 100 and 50000, got 99"},
		{50001, "continueAsNewEvents must be between 100 and 50000, got 50001"},
	} {
		h := sessiontest.NewHarness(t).WithID("bnd")
		h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{
			SessionID: "bnd", Options: &wire.Options{ContinueAsNewEvents: c.events},
		})
		app := sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), c.msg)
		require.Equal(t, "InvalidArgument", app.Type())
		require.Empty(t, h.StartedNames(), "nothing created")
	}
}
