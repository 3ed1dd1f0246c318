package integration

// Create, resume, abort, rollback and owner unload end to end.

import (
	"os"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// appendBatchRanges returns the [first, last] seqs of every AppendBatch
// activity scheduled in hist, in order.
func appendBatchRanges(t *testing.T, hist *historypb.History) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for _, e := range hist.Events {
		a := e.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != wire.AppendBatchName {
			continue
		}
		var in activities.AppendBatchInput
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in))
		require.NotEmpty(t, in.Events)
		out = append(out, [2]int64{in.Events[0].Seq, in.Events[len(in.Events)-1].Seq})
	}
	return out
}

// updatesAccepted counts the accepted updates of a name in hist.
func updatesAccepted(hist *historypb.History, name string) int {
	n := 0
	for _, e := range hist.Events {
		if a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == name {
			n++
		}
	}
	return n
}

func TestCreateAppendDispose(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.startWorker()
	id := w.id("create")
	wid := wire.WorkflowID(id)
	w.hooks.todoSetup(id)
	seed := []session.Event{turnStart(t, 0, 1), assistantText(t, 1, 1, "seeded"), turnEnd(t, 2, 1)}
	run := w.create(wire.CreateSessionRequest{
		SessionID: id,
		Seed:      session.WireEvents(seed),
		Meta:      &wire.SessionMeta{Cwd: "/work/project"},
		Hooks:     allHooks,
		// A window long enough that three appends sent one after the
		// other's acceptance share it.
		Options: &wire.Options{AppendWindowMs: 2000},
	})

	info := w.waitReady(id)
	require.Equal(t, id, info.SessionID)
	require.Equal(t, wid, info.WorkflowID)
	require.Equal(t, run.GetRunID(), info.RunID)
	require.Equal(t, wire.SourceStartup, info.Source)
	require.Equal(t, "/work/project", info.Header.Cwd)
	require.Equal(t, int64(5), info.NextSeq, "the seed, its end-seed marker and the setup event")
	require.Equal(t, int64(3), info.FirstLiveSeq)
	require.Equal(t, int64(1), info.LastTurn)
	lease := w.lease(id)
	require.NotNil(t, lease)
	require.Equal(t, info.Handle.HandleID, lease.HandleID)
	require.Equal(t, wid, lease.Owner.WorkflowID)
	require.Equal(t, run.GetRunID(), lease.Owner.RunID)

	// Three batches, each sent once the previous one is accepted, land in
	// one window; a fourth comes later.
	turn := liveTurn(t, 5, 2, "hello")
	var gets []func() wire.AppendResult
	for _, batch := range [][]session.Event{turn[:2], turn[2:4], turn[4:]} {
		h := w.accepted(wid, wire.UpdateAppend, workflows.AppendRequest{Events: batch})
		gets = append(gets, func() wire.AppendResult {
			var r wire.AppendResult
			require.NoError(t, h.Get(w.ctx(), &r))
			return r
		})
	}
	var results []wire.AppendResult
	for _, get := range gets {
		results = append(results, get())
	}
	// Each returns once the window's batch is stored, with the end of its
	// own events (D120).
	for i, want := range []int64{7, 9, 10} {
		require.Equal(t, want, results[i].NextSeq, "append %d", i)
	}
	later := liveTurn(t, 10, 3, "again")
	require.Equal(t, int64(15), w.appendEvents(id, later).NextSeq)

	d := w.describe(id)
	require.Equal(t, wire.PhaseLive, d.Phase)
	require.True(t, d.HandleOpen)
	require.Equal(t, int64(15), d.NextSeq)
	require.Zero(t, d.PendingEvents)
	require.Equal(t, []wire.LifecycleEntry{
		{Type: wire.EntrySessionCreated}, {Type: wire.EntryAgentCreated},
		{Type: wire.EntrySessionStart, Source: wire.SourceStartup},
	}, d.Lifecycle)

	require.Equal(t, int64(15), w.dispose(id).NextSeq)
	var res wire.DisposeResult
	require.NoError(t, run.Get(w.ctx(), &res))
	require.Equal(t, int64(15), res.NextSeq)

	// The store holds exactly the seed, its marker and the appended events.
	evs := w.storedEvents(id)
	requireContiguous(t, evs)
	require.Len(t, evs, 15)
	requireSameEvents(t, seed, evs[:3])
	require.Equal(t, wire.TypeEndSeed, evs[3].Type)
	require.Equal(t, wire.TypeTodoWrite, evs[4].Type)
	requireSameEvents(t, turn, evs[5:10])
	requireSameEvents(t, later, evs[10:])
	require.Nil(t, w.lease(id), "disposal releases the lease")

	// In history: four Append updates, one AppendBatch activity (the seed
	// with the setup event at the commit point) and two local AppendBatch
	// markers (the coalesced window, the later batch).
	hist := w.history(wid, run.GetRunID())
	require.Equal(t, 4, updatesAccepted(hist, wire.UpdateAppend))
	require.Equal(t, [][2]int64{{0, 4}}, appendBatchRanges(t, hist))
	locals := localAppendResults(t, hist)
	require.Equal(t, []int64{10, 15}, locals)
	require.Less(t, len(locals), updatesAccepted(hist, wire.UpdateAppend), "fewer stores than Append updates")

	require.Equal(t, []string{
		"setup", "commit",
		"publish:session/created", "publish:agent/created", "publish:agent/session-start:startup",
		"dispose:dispose",
	}, w.hooks.log(id))
}

func TestResumeRepairsCrashedLog(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	w.startWorker()
	id := w.id("crashed")
	wid := wire.WorkflowID(id)
	before := w.crashedLog(id)
	raw, err := os.ReadFile(w.logPath(id))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(raw), tornRecord), "the log ends in a torn record")

	run := w.resume(wire.ResumeSessionRequest{ResumeSessionID: id, Hooks: allHooks})
	info := w.waitReady(id)
	require.Equal(t, wire.SourceResume, info.Source)
	require.Equal(t, int64(8), info.NextSeq)
	require.Equal(t, int64(7), info.FirstLiveSeq, "the seq of the end-seed marker")
	require.Equal(t, int64(1), info.LastTurn)
	require.Equal(t, "/work/project", info.Header.Cwd)
	require.Equal(t, info.Handle.HandleID, w.lease(id).HandleID)

	// The closers and the marker are stored before setup ran; the torn
	// record is gone.
	evs := w.storedEvents(id)
	require.Equal(t, []string{
		wire.TypeTurnStart, wire.TypeStepStart, wire.TypeAssistantMessage, wire.TypeToolCall,
		wire.TypeToolResult, wire.TypeStepEnd, wire.TypeTurnEnd, wire.TypeEndSeed,
	}, types(evs))
	requireContiguous(t, evs)
	requireSameEvents(t, before, evs[:4])
	require.Equal(t, []int64{3}, evs[4].SourceEventSeqs)
	tr, err := evs[4].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "TOOL_OUTCOME_UNKNOWN", tr.Error.Code)
	te, err := evs[6].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "interrupted", string(te.Reason.Kind))
	raw, err = os.ReadFile(w.logPath(id))
	require.NoError(t, err)
	require.NotContains(t, string(raw), tornRecord)

	next := liveTurn(t, 8, 2, "after the crash")
	require.Equal(t, int64(13), w.appendEvents(id, next).NextSeq)
	require.Equal(t, int64(13), w.dispose(id).NextSeq)
	require.NoError(t, run.Get(w.ctx(), nil))

	all := w.storedEvents(id)
	requireContiguous(t, all)
	requireSameEvents(t, evs, all[:8])
	requireSameEvents(t, next, all[8:])
	require.Nil(t, w.lease(id))

	hist := w.history(wid, run.GetRunID())
	require.Equal(t, 1, scheduled(hist, wire.RepairName))
	require.Equal(t, []string{
		"setup", "commit",
		"publish:session/created", "publish:agent/created", "publish:agent/session-start:resume",
		"dispose:dispose",
	}, w.hooks.log(id))
}

func TestCancelDuringSetupAborts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.startWorker()
	id := w.id("abort")
	wid := wire.WorkflowID(id)
	w.hooks.blockSetup(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, Hooks: allHooks})
	w.awaitSetup(id)
	require.NotNil(t, w.lease(id), "the handle is held during setup")
	d := w.describe(id)
	require.Equal(t, wire.PhaseSetup, d.Phase)
	require.True(t, d.HandleOpen)

	require.NoError(t, w.c.CancelWorkflow(w.ctx(), wid, ""))
	err := run.Get(w.ctx(), nil)
	requireAppError(t, err, `agent "`+id+`" creation aborted`, "AbortError")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, w.status(wid))

	d = w.describe(id)
	require.Equal(t, wire.PhaseClosed, d.Phase)
	require.False(t, d.HandleOpen)
	require.NotNil(t, d.Failure)
	require.Equal(t, `agent "`+id+`" creation aborted`, d.Failure.Message)
	require.Empty(t, d.CompensationErrors)
	require.Empty(t, d.Lifecycle)
	w.requireNothingStored(id)
	require.Equal(t, []string{"setup", "dispose:rollback"}, w.hooks.log(id))

	// The id is reusable: a new run creates, appends and disposes it.
	run2 := w.create(wire.CreateSessionRequest{SessionID: id})
	require.NotEqual(t, run.GetRunID(), run2.GetRunID())
	w.waitReady(id)
	turn := liveTurn(t, 0, 1, "second life")
	w.appendEvents(id, turn)
	w.dispose(id)
	require.NoError(t, run2.Get(w.ctx(), nil))
	requireSameEvents(t, turn, w.storedEvents(id))
	require.Nil(t, w.lease(id))
}

func TestSetupFailureRollsBack(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.startWorker()
	id := w.id("setupfail")
	w.hooks.failSetup(id, temporal.NewNonRetryableApplicationError("setup refused", "SetupRefused", nil))
	run := w.create(wire.CreateSessionRequest{
		SessionID: id,
		Seed:      session.WireEvents(liveTurn(t, 0, 1, "never stored")),
		Hooks:     allHooks,
	})
	err := run.Get(w.ctx(), nil)
	requireAppError(t, err, "setup refused", "SetupRefused")
	d := w.describe(id)
	require.Equal(t, wire.PhaseClosed, d.Phase)
	require.Empty(t, d.Lifecycle, "nothing is published")
	require.Empty(t, d.CompensationErrors)
	w.requireNothingStored(id)
	require.Equal(t, []string{"setup", "dispose:rollback"}, w.hooks.log(id))
	hist := w.history(wire.WorkflowID(id), run.GetRunID())
	require.Zero(t, scheduled(hist, wire.AppendBatchName), "the seed is never stored")
	require.Equal(t, 1, scheduled(hist, wire.CloseHandleName))
}

func TestOwnerUnloadDuringSetup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.startWorker()
	id := w.id("unload")
	wid := wire.WorkflowID(id)
	w.hooks.blockSetup(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, Hooks: allHooks})
	w.awaitSetup(id)
	require.NoError(t, w.c.SignalWorkflow(w.ctx(), wid, "", wire.SignalOwnerUnload, nil))
	err := run.Get(w.ctx(), nil)
	requireAppError(t, err, `agent "`+id+`" setup aborted: owner disposed during setup`, "OwnerDisposed")
	w.requireNothingStored(id)
	require.Equal(t, []string{"setup", "dispose:rollback"}, w.hooks.log(id))
}
