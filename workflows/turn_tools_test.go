package workflows_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

// The turn's tool calls: the parallel pool and its barrier, and a tool
// activity that fails.

// A step's tool calls: parallel-safe ones run in a rolling pool of
// maxParallelToolCalls, an exclusive one runs alone once every earlier call
// finished, and later calls wait for it.
func TestTurnToolsPoolAndBarrier(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tt")
	par := func(id string) agent.CallRef { return agent.CallRef{ID: id, Name: "read", Parallel: true} }
	calls := []agent.CallRef{par("c1"), par("c2"), par("c3"), {ID: "c4", Name: "write"}, par("c5"), par("c6")}
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Calls: calls}, &sessiontest.FakeResponse{Text: "done"})
	fa.Tools["read"] = &sessiontest.FakeTool{Duration: 300 * time.Millisecond}
	fa.Tools["write"] = &sessiontest.FakeTool{Duration: 100 * time.Millisecond}
	opts := sessiontest.Route()
	two := 2.0
	opts.MaxParallelToolCalls = &two
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "tt", AgentOptions: opts}, sessiontest.Prompt("go"))
	sessiontest.RequireBalanced(t, evs)

	// Every call dispatched once, with its model-order index.
	byIndex := make([]string, h.Count(wire.RunToolActivity))
	require.Len(t, byIndex, 6)
	for i := range byIndex {
		var in agent.ToolInput
		h.StartedArg(wire.RunToolActivity, i, &in)
		require.Equal(t, int64(3), in.MessageSeq)
		byIndex[in.Index] = in.CallID
	}
	require.Equal(t, []string{"c1", "c2", "c3", "c4", "c5", "c6"}, byIndex)
	require.Equal(t, 2, fa.MaxConc, "the pool holds at most two calls")
	starts := map[string][]string{}
	for _, s := range fa.Starts {
		slices.Sort(s.Running)
		starts[s.ID] = s.Running
	}
	require.Empty(t, starts["c4"], "the exclusive call starts alone")
	require.Less(t, slices.Index(fa.Ends, "c3"), slices.Index(fa.Ends, "c4"))
	for _, id := range []string{"c5", "c6"} {
		require.NotContains(t, starts[id], "c4", "calls after the barrier wait for it")
		require.Less(t, slices.Index(fa.Ends, "c4"), slices.Index(fa.Ends, id))
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		require.Less(t, slices.Index(fa.Ends, id), slices.Index(fa.Ends, "c4"))
	}

	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	n := 0
	for _, e := range evs {
		if e.Type == wire.TypeToolResult {
			n++
		}
	}
	require.Equal(t, 6, n)
	// Step 2 answers after the tools.
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message"}, sessiontest.Types(evs[:4]))
	require.Equal(t, []string{"step/end", "step/start", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs[len(evs)-5:]))
	require.Len(t, fa.Models, 2)
	require.Equal(t, int64(2), fa.Models[1].Step)
}

// A tool activity that fails (its store failed) stops dispatching; the
// started calls drain and the turn ends "error" with the activity's error;
// EndTurn is given the step's message and its undispatched calls to close
// (D40).
func TestTurnToolActivityFailure(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tg")
	calls := []agent.CallRef{{ID: "c1", Name: "bad", Parallel: true}, {ID: "c2", Name: "slow", Parallel: true}, {ID: "c3", Name: "write"}}
	fa := sessiontest.NewFakeAgent(h, &sessiontest.FakeResponse{Calls: calls})
	fa.Tools["bad"] = &sessiontest.FakeTool{Fail: temporal.NewNonRetryableApplicationError("disk full", "IOError", nil)}
	fa.Tools["slow"] = &sessiontest.FakeTool{Duration: 300 * time.Millisecond}
	h.RunTurns(workflows.CreateSessionRequest{SessionID: "tg", AgentOptions: sessiontest.Route()}, sessiontest.Prompt("go"))
	require.Equal(t, 2, h.Count(wire.RunToolActivity), "c3 is not dispatched")
	require.Equal(t, []string{"c1", "c2"}, sortedCopy(fa.Ends), "the started calls drained")
	var end agent.EndTurnInput
	h.StartedArg(wire.EndTurnActivity, 0, &end)
	require.Equal(t, []string{"c3"}, end.Skipped)
	require.Equal(t, int64(3), end.MessageSeq)
	require.Equal(t, int64(1), end.Step)
	require.Equal(t, "error", end.Reason.Kind)
	require.JSONEq(t, `{"message":"disk full","code":"IOError"}`, string(end.Reason.Error))
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
