package workflows_test

// A fork named by a turn: the workflow resolves the turn to the parent's
// prefix through its turn/end (the ResolveFork activity) and stores it as
// a fork by count; the parent is only read.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// threeTurns stores "parent" with three complete turns (seqs 0-4, 5-9,
// 10-14) and cwd /p.
func threeTurns(t *testing.T, st *jsonl.Store) {
	t.Helper()
	evs := append(sessiontest.LiveTurn(t, 0, 1, "a"), sessiontest.LiveTurn(t, 5, 2, "b")...)
	evs = append(evs, sessiontest.LiveTurn(t, 10, 3, "c")...)
	sessiontest.WriteStored(t, st, wire.Header{ID: "parent", CreatedAt: 1, Cwd: "/p"}, 0, evs)
}

// forkRun runs a CreateSession of id forked as fork, waits until it is
// live, appends after (when set) and disposes it; it returns the live info.
func forkRun(t *testing.T, h *sessiontest.Harness, id string, fork wire.ForkSeed, after func(next int64) []session.Event) wire.SessionInfo {
	t.Helper()
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var app *sessiontest.Result
	if after != nil {
		h.AtNoWait(2*time.Second, func() {
			var info wire.SessionInfo
			ready.Decode(t, &info)
			app = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: after(info.NextSeq)})
		})
	}
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, Fork: &fork})
	require.NoError(t, h.Env.GetWorkflowError())
	if app != nil {
		app.OK(t)
	}
	disp.OK(t)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	return info
}

func TestForkAtTurnOneCopiesThroughItsEnd(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("child")
	threeTurns(t, h.Store)
	info := forkRun(t, h, "child", wire.ForkSeed{ParentSessionID: "parent", AtTurn: 1}, nil)
	require.Equal(t, int64(5), info.InheritedEventCount)
	require.Equal(t, int64(6), info.NextSeq)
	require.Equal(t, int64(1), info.LastTurn)
	require.Equal(t, "parent", info.Header.ParentSession)
	require.True(t, info.Header.IsSeeded)
	require.Equal(t, "/p", info.Header.Cwd, "the fork takes the parent's cwd")
	require.Equal(t, int64(0), info.Header.DelegationDepth)
	require.Empty(t, info.Header.Origin, "a user's fork is not a subagent")

	evs := sessiontest.Stored(t, h.Store, "child")
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "step/end", "turn/end", "session/end-seed"}, sessiontest.Types(evs))
	inherited, err := evs[5].IsInheritedMarker()
	require.NoError(t, err)
	require.True(t, inherited)
	parent := sessiontest.Stored(t, h.Store, "parent")
	require.Len(t, parent, 15, "the parent is untouched")
	for i := range 5 {
		require.JSONEq(t, string(parent[i].Data), string(evs[i].Data))
	}
	var in activities.ResolveForkInput
	h.StartedArg(wire.ResolveForkName, 0, &in)
	require.Equal(t, activities.ResolveForkInput{ParentSessionID: "parent", AtTurn: 1}, in)
}

func TestForkAtLastTurnCopiesTheWholeParent(t *testing.T) {
	for name, fork := range map[string]wire.ForkSeed{
		"atLastTurn": {ParentSessionID: "parent", AtLastTurn: true},
		"atTurn 3":   {ParentSessionID: "parent", AtTurn: 3},
	} {
		t.Run(name, func(t *testing.T) {
			h := sessiontest.NewHarness(t).WithID("child")
			threeTurns(t, h.Store)
			info := forkRun(t, h, "child", fork, func(next int64) []session.Event {
				return sessiontest.LiveTurn(t, next, 4, "d")
			})
			require.Equal(t, int64(15), info.InheritedEventCount)
			require.Equal(t, int64(3), info.LastTurn)
			evs := sessiontest.Stored(t, h.Store, "child")
			sessiontest.RequireContiguous(t, evs)
			require.Len(t, evs, 21)
			require.Equal(t, "session/end-seed", evs[15].Type)
			require.Equal(t, "turn/start", evs[16].Type)
			require.Len(t, sessiontest.Stored(t, h.Store, "parent"), 15)
		})
	}
}

// A fork of a fork: the grandchild copies the child's prefix, the child's
// own inherited marker included; its inherited count is its own cut.
func TestForkOfAFork(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("child")
	threeTurns(t, h.Store)
	forkRun(t, h, "child", wire.ForkSeed{ParentSessionID: "parent", AtTurn: 1}, func(next int64) []session.Event {
		return sessiontest.LiveTurn(t, next, 2, "own")
	})
	g := sessiontest.NewHarnessOn(t, h.Store).WithID("grandchild")
	info := forkRun(t, g, "grandchild", wire.ForkSeed{ParentSessionID: "child", AtTurn: 2}, nil)
	require.Equal(t, "child", info.Header.ParentSession)
	require.Equal(t, int64(11), info.InheritedEventCount)
	require.Equal(t, int64(2), info.LastTurn)
	evs := sessiontest.Stored(t, h.Store, "grandchild")
	sessiontest.RequireContiguous(t, evs)
	require.Len(t, evs, 12)
	for _, seq := range []int{5, 11} {
		inherited, err := evs[seq].IsInheritedMarker()
		require.NoError(t, err)
		require.True(t, inherited, "seq %d", seq)
	}
	child := sessiontest.Stored(t, h.Store, "child")
	require.Len(t, child, 11, "the child is untouched")
	for i := range child {
		require.Equal(t, child[i].Type, evs[i].Type)
		require.JSONEq(t, string(child[i].Data), string(evs[i].Data))
	}
}

// A turn that is still open, or never was, is refused before anything is
// created; the child does not exist afterwards.
func TestForkAtTurnRefusesAnOpenOrMissingTurn(t *testing.T) {
	for _, c := range []struct {
		name string
		fork wire.ForkSeed
		msg  string
	}{
		{"open", wire.ForkSeed{ParentSessionID: "parent", AtTurn: 2}, `cannot fork session "parent" at turn 2: the turn has not ended`},
		{"missing", wire.ForkSeed{ParentSessionID: "parent", AtTurn: 7}, `cannot fork session "parent" at turn 7: its last turn is 2`},
		{"count too", wire.ForkSeed{ParentSessionID: "parent", AtTurn: 1, Count: 5}, `a fork at a turn takes no count: the workflow resolves it`},
		{"both", wire.ForkSeed{ParentSessionID: "parent", AtTurn: 1, AtLastTurn: true}, `fork atTurn and atLastTurn are mutually exclusive`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := sessiontest.NewHarness(t).WithID("child")
			evs := append(sessiontest.LiveTurn(t, 0, 1, "a"), sessiontest.TurnStart(t, 5, 2))
			sessiontest.WriteStored(t, h.Store, wire.Header{ID: "parent", CreatedAt: 1}, 0, evs)
			h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "child", Fork: &c.fork})
			app := sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), c.msg)
			require.Equal(t, wire.ErrTypeInvalidArgument, app.Type())
			require.Zero(t, h.Count(wire.CreateHandleName), "nothing is created")
			snap, err := h.Store.Stat(t.Context(), "child")
			require.NoError(t, err)
			require.Nil(t, snap)
		})
	}
}
