package integration

// The live phase across processes and runs: the session loop, a worker
// restart, continue-as-new.

import (
	"testing"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// loopDescribe queries a SessionLoop.
func (w *world) loopDescribe(loopWID string) wire.LoopDescription {
	w.t.Helper()
	v, err := w.c.QueryWorkflow(w.ctx(), loopWID, "", wire.QueryDescribe)
	require.NoError(w.t, err)
	var d wire.LoopDescription
	require.NoError(w.t, v.Get(&d))
	return d
}

// liveChildren returns the session ids of the loop's live children.
func liveChildren(d wire.LoopDescription) map[string]bool {
	out := map[string]bool{}
	for _, c := range d.Children {
		if c.State == wire.ChildLive {
			out[c.SessionID] = true
		}
	}
	return out
}

func TestLoopStartAndDeactivation(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.startWorker()
	loopWID := "loop/" + w.id("loop")
	a, b, c := w.id("loop-a"), w.id("loop-b"), w.id("loop-c")
	w.hooks.blockSetup(c)
	run := w.startWorkflow(loopWID, wire.SessionLoopName, wire.SessionLoopInput{
		// Restore-or-create of an id that is not stored: the resume fails
		// with SessionNotFound and the loop creates it.
		Agents: []wire.AgentConfig{{ID: "cfg", SessionID: a, Cwd: "/work/project"}},
		Hooks:  allHooks,
	})

	var sr wire.StartResult
	require.NoError(t, w.update(loopWID, wire.UpdateStart, &sr, workflows.StartRequest{
		Create: &workflows.CreateSessionRequest{SessionID: b, Hooks: allHooks},
	}))
	require.Equal(t, b, sr.SessionID)
	require.Equal(t, wire.WorkflowID(b), sr.WorkflowID)
	require.NotEmpty(t, sr.RunID)
	w.awaitCond("children a and b live", func() bool {
		live := liveChildren(w.loopDescribe(loopWID))
		return live[a] && live[b]
	})
	turnA, turnB := liveTurn(t, 0, 1, "a"), liveTurn(t, 0, 1, "b")
	w.appendEvents(a, turnA)
	w.appendEvents(b, turnB)

	// A third session stays in setup until the loop deactivates.
	require.NoError(t, w.update(loopWID, wire.UpdateStart, nil, workflows.StartRequest{
		Create: &workflows.CreateSessionRequest{SessionID: c, Hooks: allHooks},
	}))
	w.awaitSetup(c)
	err := w.update(loopWID, wire.UpdateStart, nil, workflows.StartRequest{
		Create: &workflows.CreateSessionRequest{SessionID: b},
	})
	requireAppError(t, err, `session "`+b+`" already exists`, "SessionAlreadyExists")

	require.NoError(t, w.c.CancelWorkflow(w.ctx(), loopWID, ""))
	var final wire.LoopDescription
	require.NoError(t, run.Get(w.ctx(), &final))
	require.False(t, final.Active)
	require.Empty(t, final.ConfigStartFailures, "a restore that falls back to create is no failure")
	require.Empty(t, final.Effects, "no child is live any more")
	type childView struct {
		SessionID, Mode, ConfigID string
		State                     wire.ChildState
		WasLive                   bool
		ErrorType                 string
	}
	var got []childView
	for _, ch := range final.Children {
		v := childView{SessionID: ch.SessionID, Mode: ch.Mode, ConfigID: ch.ConfigID, State: ch.State, WasLive: ch.WasLive}
		if ch.Error != nil {
			v.ErrorType = ch.Error.Type
			if ch.SessionID == c {
				require.Equal(t, "agent loop is not active", ch.Error.Message)
			}
		}
		got = append(got, v)
	}
	require.ElementsMatch(t, []childView{
		{SessionID: a, Mode: "resume", ConfigID: "cfg", State: wire.ChildSettled, ErrorType: "SessionNotFound"},
		{SessionID: a, Mode: "create", ConfigID: "cfg", State: wire.ChildSettled, WasLive: true},
		{SessionID: b, Mode: "create", State: wire.ChildSettled, WasLive: true},
		{SessionID: c, Mode: "create", State: wire.ChildSettled, ErrorType: "LoopInactive"},
	}, got)

	// The loop completed only after every child it started had closed: its
	// history records each child's end before its own.
	hist := w.history(loopWID, run.GetRunID())
	initiated, ended := 0, 0
	for i, e := range hist.Events {
		switch {
		case e.GetStartChildWorkflowExecutionInitiatedEventAttributes() != nil:
			initiated++
		case e.GetChildWorkflowExecutionCompletedEventAttributes() != nil,
			e.GetChildWorkflowExecutionFailedEventAttributes() != nil,
			e.GetChildWorkflowExecutionCanceledEventAttributes() != nil:
			ended++
		case e.GetWorkflowExecutionCompletedEventAttributes() != nil:
			require.Equal(t, len(hist.Events)-1, i)
		}
	}
	require.Equal(t, 4, initiated)
	require.Equal(t, initiated, ended)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, w.status(wire.WorkflowID(a)))
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, w.status(wire.WorkflowID(b)))
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, w.status(wire.WorkflowID(c)))

	requireSameEvents(t, turnA, w.storedEvents(a))
	requireSameEvents(t, turnB, w.storedEvents(b))
	require.Nil(t, w.lease(a))
	require.Nil(t, w.lease(b))
	w.requireNothingStored(c)
	require.Equal(t, []string{
		"setup", "commit",
		"publish:session/created", "publish:agent/created", "publish:agent/session-start:startup",
		"dispose:dispose",
	}, w.hooks.log(a))
	require.Equal(t, []string{"setup", "dispose:rollback"}, w.hooks.log(c))
}

func TestWorkerRestartDuringLiveSession(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	first := w.startWorker()
	id := w.id("restart")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, Options: &wire.Options{AppendWindowMs: 500}})
	info := w.waitReady(id)
	one := liveTurn(t, 0, 1, "before the restart")
	require.Equal(t, int64(5), w.appendEvents(id, one).NextSeq)

	// An append accepted by the first worker, stored by whichever worker
	// runs when its window closes.
	two := liveTurn(t, 5, 2, "across the restart")
	pending := w.accepted(wid, wire.UpdateAppend, workflows.AppendRequest{Events: two})
	require.NoError(t, first.Stop())
	w.startWorker()
	var r wire.AppendResult
	require.NoError(t, pending.Get(w.ctx(), &r))
	require.Equal(t, int64(10), r.NextSeq)

	three := liveTurn(t, 10, 3, "after the restart")
	require.Equal(t, int64(15), w.appendEvents(id, three).NextSeq)
	d := w.describe(id)
	require.Equal(t, wire.PhaseLive, d.Phase)
	require.Equal(t, info.Handle, *d.Handle, "the new worker carries on with the same handle")
	require.Equal(t, info.Handle.HandleID, w.lease(id).HandleID)
	require.Equal(t, int64(15), w.dispose(id).NextSeq)
	require.NoError(t, run.Get(w.ctx(), nil))

	evs := w.storedEvents(id)
	requireContiguous(t, evs)
	requireSameEvents(t, append(append(one, two...), three...), evs)
	require.Nil(t, w.lease(id))
}

func TestContinueAsNewKeepsTheSession(t *testing.T) {
	t.Parallel()
	w := newWorld(t, continueAsNewServer(t), jsonl.CompressionZstd)
	w.startWorker()
	id := w.id("can")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{
		SessionID: id,
		Hooks:     wire.Hooks{DisposeActivity: hookDispose},
		Options:   &wire.Options{AppendWindowMs: 50},
	})
	info := w.waitReady(id)
	lease := w.lease(id)
	require.Equal(t, info.Handle.HandleID, lease.HandleID)

	latestRun := func() string {
		desc, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
		require.NoError(t, err)
		return desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	var want []session.Event
	appendTurn := func() {
		turn := liveTurn(t, int64(len(want)), int64(len(want)/5+1), "turn")
		want = append(want, turn...)
		require.Equal(t, int64(len(want)), w.appendEvents(id, turn).NextSeq)
	}
	// Each append adds about a dozen events to the run's history: the
	// server suggests continue-as-new after a few of them.
	for i := 0; latestRun() == run.GetRunID(); i++ {
		require.Less(t, i, 4*canHistoryLimit, "the run never continued as new")
		appendTurn()
	}
	// Appends keep working on the new run, under the same handle.
	appendTurn()
	appendTurn()
	runs := w.runs(wid, run.GetRunID())
	require.GreaterOrEqual(t, len(runs), 2)
	desc, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
	require.NoError(t, err)
	require.Equal(t, wire.LiveSessionName, desc.RawResponse.GetWorkflowExecutionInfo().GetType().GetName())
	require.Equal(t, runs[len(runs)-1], desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId())

	again := w.waitReady(id)
	require.Equal(t, runs[len(runs)-1], again.RunID)
	require.Equal(t, info.Handle, again.Handle)
	require.Equal(t, info.FirstLiveSeq, again.FirstLiveSeq)
	d := w.describe(id)
	require.Equal(t, int64(len(want)), d.NextSeq)
	require.Equal(t, info.Handle, *d.Handle)
	held := w.lease(id)
	require.NotNil(t, held)
	require.Equal(t, lease.HandleID, held.HandleID, "the lease is held across runs")

	require.Equal(t, int64(len(want)), w.dispose(id).NextSeq)
	final := w.c.GetWorkflow(w.ctx(), wid, "")
	var res wire.DisposeResult
	require.NoError(t, final.Get(w.ctx(), &res))
	require.Equal(t, int64(len(want)), res.NextSeq)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, w.status(wid))
	require.Nil(t, w.lease(id), "disposal of the last run releases the lease")
	evs := w.storedEvents(id)
	requireContiguous(t, evs)
	requireSameEvents(t, want, evs)
	require.Equal(t, []string{"dispose:dispose"}, w.hooks.log(id))
	for _, r := range runs[:len(runs)-1] {
		hist := w.history(wid, r)
		require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, hist.Events[len(hist.Events)-1].GetEventType())
	}
}
