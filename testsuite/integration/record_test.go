package integration

// The recorder of ../histories: every lifecycle path run for real, its
// histories written as replay fixtures (-record) or compared with the
// committed ones.

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// historiesDir holds the committed fixtures.
const historiesDir = "../histories"

// fixture is one history to record: a run of a workflow.
type fixture struct {
	// name is the file name without .json.
	name       string
	workflowID string
	runID      string
}

// recordPath is one lifecycle path: it runs on a fresh world and returns
// the runs to record. Its external inputs are sent one at a time, each once
// the workflow has settled from the previous one, so that a path issues the
// same commands on every run.
type recordPath struct {
	name string
	// continueAsNew runs the path on the continue-as-new server.
	continueAsNew bool
	comp          jsonl.Compression
	// agent, when set, configures the worker's agent activities.
	agent func(t *testing.T) workerapp.AgentConfig
	// processes makes the path run its own worker processes instead of the
	// in-process worker.
	processes bool
	run       func(t *testing.T, w *world) []fixture
}

var recordPaths = []recordPath{
	{name: "create", run: recordCreate},
	{name: "create-search-attributes", run: recordCreateSearchAttributes},
	{name: "append-group-commit", run: recordAppendGroupCommit},
	{name: "resume-repair", comp: jsonl.CompressionNone, run: recordResumeRepair},
	{name: "setup-failure", run: recordSetupFailure},
	{name: "seed-refused", run: recordSeedRefused},
	{name: "setup-events-refused", run: recordSetupEventsRefused},
	{name: "abort-during-setup", run: recordAbortDuringSetup},
	{name: "owner-unload", run: recordOwnerUnload},
	{name: "dispose", run: recordDispose},
	{name: "dispose-cancel", run: recordDisposeCancel},
	{name: "loop-deactivation", run: recordLoopDeactivation},
	{name: "continue-as-new", continueAsNew: true, run: recordContinueAsNew},
}

// only runs the single fixture of a workflow's first run.
func only(name, workflowID string, run client.WorkflowRun) []fixture {
	return []fixture{{name: name, workflowID: workflowID, runID: run.GetRunID()}}
}

// recordCreate: a seeded create with every hook (setup adds an event),
// three appends coalesced in one window, one more, Dispose.
func recordCreate(t *testing.T, w *world) []fixture {
	id := w.id("rec-create")
	wid := wire.WorkflowID(id)
	w.hooks.todoSetup(id)
	run := w.create(wire.CreateSessionRequest{
		SessionID: id,
		Seed:      session.WireEvents([]session.Event{turnStart(t, 0, 1), assistantText(t, 1, 1, "seeded"), turnEnd(t, 2, 1)}),
		Meta:      &wire.SessionMeta{Cwd: "/work/project"},
		Hooks:     allHooks,
		Options:   &wire.Options{AppendWindowMs: 2000},
	})
	w.awaitLive(id)
	require.Equal(t, int64(5), w.waitReady(id).NextSeq)
	turn := liveTurn(t, 5, 2, "hello")
	var handles []client.WorkflowUpdateHandle
	for _, batch := range [][]session.Event{turn[:2], turn[2:4], turn[4:]} {
		handles = append(handles, w.accepted(wid, wire.UpdateAppend, workflows.AppendRequest{Events: batch}))
	}
	for i, h := range handles {
		var r wire.AppendResult
		require.NoError(t, h.Get(w.ctx(), &r))
		require.Equal(t, []int64{7, 9, 10}[i], r.NextSeq, "each append's own end (D120)")
	}
	w.appendEvents(id, liveTurn(t, 10, 3, "again"))
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	return only("create", wid, run)
}

// recordCreateSearchAttributes: a create that keeps the session's search
// attributes (the versioned SessionPhase upserts), one append, Dispose.
func recordCreateSearchAttributes(t *testing.T, w *world) []fixture {
	id := w.id("rec-create-sa")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{
		SessionID: id,
		Meta:      &wire.SessionMeta{Cwd: "/work/project"},
		Options:   &wire.Options{SearchAttributes: true},
	})
	w.awaitLive(id)
	w.appendEvents(id, liveTurn(t, 0, 1, "hello"))
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	return only("create-search-attributes", wid, run)
}

// recordAppendGroupCommit: a create with no append window (group commit,
// the versioned change), then appends one after the other, each stored by
// its own activity as soon as it is accepted, Dispose. (How concurrent
// appends group depends on timing, so the recorded path keeps them apart.)
func recordAppendGroupCommit(t *testing.T, w *world) []fixture {
	id := w.id("rec-group-commit")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id})
	w.awaitLive(id)
	turn := liveTurn(t, 0, 1, "hello")
	for _, batch := range [][]session.Event{turn[:2], turn[2:4], turn[4:]} {
		w.appendEvents(id, batch)
	}
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	return only("append-group-commit", wid, run)
}

// recordResumeRepair: resume of a crashed log (closers and marker stored),
// one append, Dispose.
func recordResumeRepair(t *testing.T, w *world) []fixture {
	id := w.id("rec-resume")
	w.crashedLog(id)
	run := w.resume(wire.ResumeSessionRequest{ResumeSessionID: id, Hooks: allHooks})
	w.awaitLive(id)
	require.Equal(t, int64(8), w.waitReady(id).NextSeq)
	w.appendEvents(id, liveTurn(t, 8, 2, "after the crash"))
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	return only("resume-repair", wire.WorkflowID(id), run)
}

// recordSetupFailure: the setup hook fails; the rollback runs the dispose
// hook and closes the handle.
func recordSetupFailure(t *testing.T, w *world) []fixture {
	id := w.id("rec-setupfail")
	w.hooks.failSetup(id, temporal.NewNonRetryableApplicationError("setup refused", "SetupRefused", nil))
	run := w.create(wire.CreateSessionRequest{SessionID: id, Seed: session.WireEvents(liveTurn(t, 0, 1, "never stored")), Hooks: allHooks})
	requireAppError(t, run.Get(w.ctx(), nil), "setup refused", "SetupRefused")
	return only("setup-failure", wire.WorkflowID(id), run)
}

// recordSeedRefused: an inline seed the store's append rules refuse (a
// turn/start without a turn) fails before any side effect, behind the
// seed-append-rules version marker.
func recordSeedRefused(t *testing.T, w *world) []fixture {
	id := w.id("rec-seedrules")
	bad := session.Event{Type: wire.TypeTurnStart, Seq: 0, Time: 1, Data: []byte(`{}`)}
	run := w.create(wire.CreateSessionRequest{SessionID: id, Seed: session.WireEvents([]session.Event{bad}), Hooks: allHooks})
	requireAppError(t, run.Get(w.ctx(), nil),
		`invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data lacks "turn"`,
		wire.ErrTypeInvalidArgument)
	return only("seed-refused", wire.WorkflowID(id), run)
}

// recordSetupEventsRefused: setup events the store's append rules refuse
// fail the create before the commit hook, behind the setup-append-rules
// version marker; the rollback closes the handle.
func recordSetupEventsRefused(t *testing.T, w *world) []fixture {
	id := w.id("rec-setuprules")
	w.hooks.badSetup(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, Hooks: allHooks})
	requireAppError(t, run.Get(w.ctx(), nil),
		`setup events: invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data.turn must be a safe integer >= 1, got 0`,
		wire.ErrTypeInvalidArgument)
	return only("setup-events-refused", wire.WorkflowID(id), run)
}

// recordAbortDuringSetup: cancellation while the setup hook runs.
func recordAbortDuringSetup(t *testing.T, w *world) []fixture {
	id := w.id("rec-abort")
	w.hooks.blockSetup(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, Hooks: allHooks})
	w.awaitSetup(id)
	require.NoError(t, w.c.CancelWorkflow(w.ctx(), wire.WorkflowID(id), ""))
	requireAppError(t, run.Get(w.ctx(), nil), `agent "`+id+`" creation aborted`, "AbortError")
	return only("abort-during-setup", wire.WorkflowID(id), run)
}

// recordOwnerUnload: the OwnerUnload signal while the setup hook runs.
func recordOwnerUnload(t *testing.T, w *world) []fixture {
	id := w.id("rec-unload")
	w.hooks.blockSetup(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, Hooks: allHooks})
	w.awaitSetup(id)
	require.NoError(t, w.c.SignalWorkflow(w.ctx(), wire.WorkflowID(id), "", wire.SignalOwnerUnload, nil))
	requireAppError(t, run.Get(w.ctx(), nil), `agent "`+id+`" setup aborted: owner disposed during setup`, "OwnerDisposed")
	return only("owner-unload", wire.WorkflowID(id), run)
}

// recordDispose: Dispose while an append waits in its window: the dispose
// hook runs, the pending append is drained, the handle closes.
func recordDispose(t *testing.T, w *world) []fixture {
	id := w.id("rec-dispose")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{
		SessionID: id,
		Hooks:     wire.Hooks{DisposeActivity: hookDispose},
		Options:   &wire.Options{AppendWindowMs: 600_000},
	})
	w.awaitLive(id)
	w.waitReady(id)
	pending := w.accepted(wid, wire.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "drained")})
	require.Equal(t, int64(5), w.dispose(id).NextSeq)
	var r wire.AppendResult
	require.NoError(t, pending.Get(w.ctx(), &r))
	require.Equal(t, int64(5), r.NextSeq)
	require.NoError(t, run.Get(w.ctx(), nil))
	require.Len(t, w.storedEvents(id), 5)
	return only("dispose", wid, run)
}

// recordDisposeCancel: cancellation of a live session disposes it.
func recordDisposeCancel(t *testing.T, w *world) []fixture {
	id := w.id("rec-cancel")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, Hooks: wire.Hooks{DisposeActivity: hookDispose}})
	w.awaitLive(id)
	w.waitReady(id)
	w.appendEvents(id, liveTurn(t, 0, 1, "then cancelled"))
	require.NoError(t, w.c.CancelWorkflow(w.ctx(), wid, ""))
	var res wire.DisposeResult
	require.NoError(t, run.Get(w.ctx(), &res))
	require.Equal(t, int64(5), res.NextSeq)
	require.Nil(t, w.lease(id))
	require.Equal(t, []string{"dispose:dispose"}, w.hooks.log(id))
	return only("dispose-cancel", wid, run)
}

// recordLoopDeactivation: a SessionLoop whose configured agent is restored
// or created (the resume of the missing id fails, then it is created), a
// session started through the Start update that is still in setup, and
// the deactivation: the live child is disposed, the starting one aborted
// with `agent loop is not active`, and the loop completes once both have
// closed. Every run is recorded.
func recordLoopDeactivation(t *testing.T, w *world) []fixture {
	loopWID := "loop/" + w.id("rec-loop")
	a, c := w.id("rec-loop-a"), w.id("rec-loop-c")
	w.hooks.blockSetup(c)
	run := w.startWorkflow(loopWID, wire.SessionLoopName, wire.SessionLoopInput{
		Agents: []wire.AgentConfig{{ID: "cfg", SessionID: a, Cwd: "/work/project"}},
		Hooks:  allHooks,
	})
	w.awaitCond("configured child live", func() bool { return liveChildren(w.loopDescribe(loopWID))[a] })
	w.appendEvents(a, liveTurn(t, 0, 1, "hosted"))
	require.NoError(t, w.update(loopWID, wire.UpdateStart, nil, workflows.StartRequest{
		Create: &workflows.CreateSessionRequest{SessionID: c, Hooks: allHooks},
	}))
	w.awaitSetup(c)
	require.NoError(t, w.c.CancelWorkflow(w.ctx(), loopWID, ""))
	var final wire.LoopDescription
	require.NoError(t, run.Get(w.ctx(), &final))
	out := []fixture{{name: "loop-deactivation", workflowID: loopWID, runID: run.GetRunID()}}
	require.Len(t, final.Children, 3)
	names := []string{"loop-restore-missing", "loop-child-live", "loop-child-aborted"}
	for i, ch := range final.Children {
		require.NotEmpty(t, ch.RunID)
		out = append(out, fixture{name: names[i], workflowID: ch.WorkflowID, runID: ch.RunID})
	}
	require.Equal(t, "SessionNotFound", final.Children[0].Error.Type)
	require.True(t, final.Children[1].WasLive)
	require.Equal(t, "LoopInactive", final.Children[2].Error.Type)
	return out
}

// recordContinueAsNew: appends until the server suggests continue-as-new;
// the first run (CreateSession, ending in continue-as-new) and the last
// (LiveSession: one more append, Dispose) are recorded.
func recordContinueAsNew(t *testing.T, w *world) []fixture {
	id := w.id("rec-can")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{
		SessionID: id,
		Hooks:     wire.Hooks{DisposeActivity: hookDispose},
		Options:   &wire.Options{AppendWindowMs: 50},
	})
	w.awaitLive(id)
	w.waitReady(id)
	seq := int64(0)
	latest := func() string {
		desc, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
		require.NoError(t, err)
		return desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	for i := 0; latest() == run.GetRunID(); i++ {
		require.Less(t, i, 4*canHistoryLimit, "the run never continued as new")
		seq = w.appendEvents(id, liveTurn(t, seq, seq/5+1, "turn")).NextSeq
	}
	w.awaitLive(id)
	seq = w.appendEvents(id, liveTurn(t, seq, seq/5+1, "on the new run")).NextSeq
	require.Equal(t, seq, w.dispose(id).NextSeq)
	runs := w.runs(wid, run.GetRunID())
	require.Len(t, runs, 2, "one continue-as-new")
	return []fixture{
		{name: "continue-as-new", workflowID: wid, runID: runs[0]},
		{name: "continue-as-new-live", workflowID: wid, runID: runs[1]},
	}
}

// commandSequence is what a history says about the workflow's code: its
// type, then every event written by a command of a workflow task (with the
// activity type, child workflow type, marker, signal or update name), in
// order, then how the run closed. Results and external inputs, whose
// timing varies between runs, are left out; a change of the command
// sequence shows.
func commandSequence(hist *historypb.History) []string {
	var out []string
	// A WaitTurn only reads workflow state: its update events are left
	// out, since a watching client sends it at a time of its own.
	waits := map[int64]bool{}
	for _, e := range hist.Events {
		if a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == wire.UpdateWaitTurn {
			waits[e.GetEventId()] = true
			continue
		}
		if c := e.GetWorkflowExecutionUpdateCompletedEventAttributes(); c != nil && waits[c.GetAcceptedEventId()] {
			continue
		}
		name := strings.TrimPrefix(e.GetEventType().String(), "EVENT_TYPE_")
		detail := ""
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			detail = e.GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			detail = e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			detail = e.GetMarkerRecordedEventAttributes().GetMarkerName()
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			detail = e.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowType().GetName()
		case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
			detail = e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName()
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			detail = e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName()
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			detail = e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetWorkflowType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED,
			enumspb.EVENT_TYPE_TIMER_STARTED,
			enumspb.EVENT_TYPE_TIMER_CANCELED,
			enumspb.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
			enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
			enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		default:
			continue
		}
		if detail != "" {
			name += ":" + detail
		}
		out = append(out, name)
	}
	return out
}

// encodeHistory renders a history in the JSON form the SDK's replayer
// reads (client.HistoryFromJSON decodes it with temporalproto, the same
// encoding `temporal workflow show --output json` writes).
func encodeHistory(hist *historypb.History) ([]byte, error) {
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// readFixture decodes a committed history as the replayer does.
func readFixture(t *testing.T, path string) *historypb.History {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	hist, err := client.HistoryFromJSON(bytes.NewReader(raw), client.HistoryJSONOptions{})
	require.NoError(t, err, "decoding %s", path)
	return hist
}

func TestRecordHistories(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	produced := map[string]bool{}
	t.Run("paths", func(t *testing.T) {
		for _, p := range recordPaths {
			t.Run(p.name, func(t *testing.T) {
				t.Parallel()
				srv := shared
				if p.continueAsNew {
					srv = continueAsNewServer(t)
				}
				comp := p.comp
				if comp == "" {
					comp = jsonl.CompressionZstd
				}
				w := newWorld(t, srv, comp)
				if p.agent != nil {
					w.agent = p.agent(t)
				}
				if !p.processes {
					w.startWorker()
				}
				for _, f := range p.run(t, w) {
					mu.Lock()
					require.False(t, produced[f.name], "fixture %s recorded twice", f.name)
					produced[f.name] = true
					mu.Unlock()
					hist := w.history(f.workflowID, f.runID)
					path := filepath.Join(historiesDir, f.name+".json")
					if *record {
						b, err := encodeHistory(hist)
						require.NoError(t, err)
						require.NoError(t, os.WriteFile(path, b, 0o644))
						t.Logf("recorded %s: %d events, %d bytes", path, len(hist.Events), len(b))
						continue
					}
					committed := readFixture(t, path)
					require.Equal(t, commandSequence(committed), commandSequence(hist),
						"the command sequence of %s changed; if the change is intended (and gated with workflow.GetVersion), re-record with: go test ./testsuite/integration -run TestRecordHistories -record", path)
				}
			})
		}
	})
	if *record || t.Failed() {
		return
	}
	// Every committed fixture comes from a path that still runs.
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	var stale []string
	for _, f := range files {
		if !produced[strings.TrimSuffix(filepath.Base(f), ".json")] {
			stale = append(stale, f)
		}
	}
	sort.Strings(stale)
	require.Empty(t, stale, "committed histories no path records any more")
	require.Len(t, files, len(produced))
}
