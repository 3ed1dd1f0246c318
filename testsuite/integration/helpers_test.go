package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/wire"
)

// Hook activity names registered by the tests' workers.
const (
	hookSetup   = "test.setup"
	hookCommit  = "test.commit"
	hookPublish = "test.publish"
	hookDispose = "test.dispose"
)

// allHooks names every test hook.
var allHooks = wire.Hooks{
	SetupActivity:   hookSetup,
	CommitActivity:  hookCommit,
	PublishActivity: hookPublish,
	DisposeActivity: hookDispose,
}

// opTimeout bounds one test's calls to Temporal and its waits.
const opTimeout = 3 * time.Minute

// hooks are the hook activities of one test's workers. A session's setup
// behaviour is chosen with blockSetup, todoSetup or failSetup before the
// session starts; every call is recorded by session id.
type hooks struct {
	mu    sync.Mutex
	calls map[string][]string // by session id

	// setupBy holds the setup behaviour of particular sessions; a session
	// without one passes setup.
	setupBy map[string]func(ctx context.Context, in wire.SetupInput) (workflows.SetupResult, error)

	// release ends every blocked hook.
	release     chan struct{}
	releaseOnce sync.Once
}

func newHooks() *hooks {
	return &hooks{
		calls:   map[string][]string{},
		setupBy: map[string]func(context.Context, wire.SetupInput) (workflows.SetupResult, error){},
		release: make(chan struct{}),
	}
}

// blockSetup makes the setup hook of session id block (see block).
func (h *hooks) blockSetup(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setupBy[id] = h.block
}

// todoSetup makes the setup hook of session id return one todo/write
// event, stored at the commit point after the seed.
func (h *hooks) todoSetup(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setupBy[id] = func(_ context.Context, in wire.SetupInput) (workflows.SetupResult, error) {
		e, err := session.NewEvent(wire.TypeTodoWrite, in.EventCount, 1_700_000_000_000+in.EventCount, map[string]any{"todos": []any{}})
		if err != nil {
			return workflows.SetupResult{}, err
		}
		return workflows.SetupResult{Events: []session.Event{e}}, nil
	}
}

// badSetup makes the setup hook of session id return a turn/start whose
// turn is 0, which the append rules refuse.
func (h *hooks) badSetup(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setupBy[id] = func(_ context.Context, in wire.SetupInput) (workflows.SetupResult, error) {
		e := session.Event{Type: wire.TypeTurnStart, Seq: in.EventCount, Time: 1_700_000_000_000, Data: []byte(`{"turn":0}`)}
		return workflows.SetupResult{Events: []session.Event{e}}, nil
	}
}

// failSetup makes the setup hook of session id fail with err.
func (h *hooks) failSetup(id string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setupBy[id] = func(context.Context, wire.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{}, err
	}
}

func (h *hooks) record(id, call string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[id] = append(h.calls[id], call)
}

// log returns the hook calls of session id so far, in order.
func (h *hooks) log(id string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls[id]...)
}

func (h *hooks) releaseAll() { h.releaseOnce.Do(func() { close(h.release) }) }

// Setup is the setup hook.
func (h *hooks) Setup(ctx context.Context, in wire.SetupInput) (workflows.SetupResult, error) {
	h.record(in.SessionID, "setup")
	h.mu.Lock()
	fn := h.setupBy[in.SessionID]
	h.mu.Unlock()
	if fn != nil {
		return fn(ctx, in)
	}
	return workflows.SetupResult{}, nil
}

// Commit is the commit hook.
func (h *hooks) Commit(_ context.Context, in wire.SetupInput) error {
	h.record(in.SessionID, "commit")
	return nil
}

// Publish is the publish hook.
func (h *hooks) Publish(_ context.Context, in wire.PublishInput) error {
	name := in.Entry.Type
	if in.Entry.Source != "" {
		name += ":" + in.Entry.Source
	}
	h.record(in.SessionID, "publish:"+name)
	return nil
}

// Dispose is the dispose hook.
func (h *hooks) Dispose(_ context.Context, in wire.DisposeInput) error {
	h.record(in.SessionID, "dispose:"+in.Reason)
	return nil
}

// block is a setup behaviour that holds the hook until its activity is
// cancelled, the worker stops or the test releases it. A workflow does not
// wait for a cancelled hook (hooks run without wait-for-cancellation), so
// its rollback proceeds at once.
func (h *hooks) block(ctx context.Context, _ wire.SetupInput) (workflows.SetupResult, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return workflows.SetupResult{}, ctx.Err()
		case <-activity.GetWorkerStopChannel(ctx):
			return workflows.SetupResult{}, errors.New("worker stopped")
		case <-h.release:
			return workflows.SetupResult{}, errors.New("released by the test")
		case <-tick.C:
		}
	}
}

// register registers the hooks on a worker.
func (h *hooks) register(r worker.Registry) {
	r.RegisterActivityWithOptions(h.Setup, activity.RegisterOptions{Name: hookSetup})
	r.RegisterActivityWithOptions(h.Commit, activity.RegisterOptions{Name: hookCommit})
	r.RegisterActivityWithOptions(h.Publish, activity.RegisterOptions{Name: hookPublish})
	r.RegisterActivityWithOptions(h.Dispose, activity.RegisterOptions{Name: hookDispose})
}

// world is one test's slice of a server: its own task queue, store root and
// hooks, and the workflows it started.
type world struct {
	t         *testing.T
	c         client.Client
	base      context.Context
	taskQueue string
	root      string
	comp      jsonl.Compression
	hooks     *hooks
	store     *jsonl.Store
	// agent configures the agent activities of the world's workers.
	agent workerapp.AgentConfig

	mu      sync.Mutex
	started []string // workflow ids
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9]+`)

// newWorld prepares a test's task queue and store root on srv; the workers
// are started with startWorker.
func newWorld(t *testing.T, srv *server, comp jsonl.Compression) *world {
	t.Helper()
	name := strings.Trim(unsafeChars.ReplaceAllString(t.Name(), "-"), "-")
	base := testdeadline.Context(t, opTimeout)
	w := &world{
		t:         t,
		c:         srv.client,
		base:      base,
		taskQueue: "it-" + runTag + "-" + name,
		root:      t.TempDir(),
		comp:      comp,
		hooks:     newHooks(),
	}
	st, err := jsonl.NewStore(jsonl.Options{Root: w.root, Compression: comp})
	require.NoError(t, err)
	w.store = st
	t.Cleanup(w.cleanup)
	return w
}

// id returns a session id unique to this run of the test.
func (w *world) id(name string) string {
	return name + "-" + runTag
}

// cleanup releases blocked hooks and terminates the test's workflows that
// still run (a failed test must not leave work on a shared server).
func (w *world) cleanup() {
	w.hooks.releaseAll()
	w.mu.Lock()
	ids := append([]string(nil), w.started...)
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		desc, err := w.c.DescribeWorkflow(ctx, id, "")
		if err == nil && desc.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			_ = w.c.TerminateWorkflow(ctx, id, "", "integration test cleanup")
		}
	}
}

// startWorker runs a worker over the world's task queue and store root, as
// the worker process does, and waits until it polls. It is stopped when
// the test ends.
func (w *world) startWorker() *workerapp.Running {
	w.t.Helper()
	cfg := workerapp.DefaultConfig()
	cfg.Client = w.c
	cfg.TaskQueue = w.taskQueue
	cfg.StoreRoot = w.root
	cfg.Compression = w.comp
	cfg.MetricsAddress = ""
	cfg.StopTimeout = 10 * time.Second
	cfg.Identity = clientIdentity
	cfg.Register = w.hooks.register
	cfg.Agent = w.agent
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r, err := workerapp.Start(ctx, cfg, discardLogger())
	if err != nil {
		w.t.Fatalf("the worker did not start: %v", err)
	}
	w.t.Cleanup(func() {
		w.hooks.releaseAll()
		if err := r.Stop(); err != nil {
			w.t.Errorf("worker: %v", err)
		}
	})
	return r
}

// ctx is the context of the test's calls; it ends at the test's deadline,
// opTimeout after the world was made (less when go test's -timeout ends
// sooner).
func (w *world) ctx() context.Context { return w.base }

func (w *world) track(workflowID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started = append(w.started, workflowID)
}

// startWorkflow starts a workflow by its public name on the world's task
// queue.
func (w *world) startWorkflow(workflowID, name string, arg any) client.WorkflowRun {
	w.t.Helper()
	w.track(workflowID)
	run, err := w.c.ExecuteWorkflow(w.ctx(), client.StartWorkflowOptions{
		ID:                                       workflowID,
		TaskQueue:                                w.taskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, name, arg)
	require.NoError(w.t, err)
	return run
}

// create starts CreateSession for req.SessionID.
func (w *world) create(req wire.CreateSessionRequest) client.WorkflowRun {
	w.t.Helper()
	return w.startWorkflow(wire.WorkflowID(req.SessionID), wire.CreateSessionName, req)
}

// resume starts ResumeSession for id.
func (w *world) resume(req wire.ResumeSessionRequest) client.WorkflowRun {
	w.t.Helper()
	return w.startWorkflow(wire.WorkflowID(req.ResumeSessionID), wire.ResumeSessionName, req)
}

// update sends an update to the latest run of workflowID and waits for its
// outcome.
func (w *world) update(workflowID, name string, out any, args ...any) error {
	w.t.Helper()
	h, err := w.c.UpdateWorkflow(w.ctx(), client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   name,
		Args:         args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(w.ctx(), out)
}

// accepted sends an update and returns once the workflow accepted it.
func (w *world) accepted(workflowID, name string, args ...any) client.WorkflowUpdateHandle {
	w.t.Helper()
	h, err := w.c.UpdateWorkflow(w.ctx(), client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   name,
		Args:         args,
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	require.NoError(w.t, err)
	return h
}

// waitReady awaits the session live through WaitReady.
func (w *world) waitReady(id string) wire.SessionInfo {
	w.t.Helper()
	var info wire.SessionInfo
	require.NoError(w.t, w.update(wire.WorkflowID(id), wire.UpdateWaitReady, &info))
	return info
}

// appendEvents appends a batch through the Append update.
func (w *world) appendEvents(id string, events []session.Event) wire.AppendResult {
	w.t.Helper()
	var res wire.AppendResult
	require.NoError(w.t, w.update(wire.WorkflowID(id), wire.UpdateAppend, &res, workflows.AppendRequest{Events: events}))
	return res
}

// appendAtEnd appends events (numbered from 0) at the end of the session
// through the Append update with AtEnd.
func (w *world) appendAtEnd(id string, events []session.Event) wire.AppendResult {
	w.t.Helper()
	var res wire.AppendResult
	require.NoError(w.t, w.update(wire.WorkflowID(id), wire.UpdateAppend, &res, workflows.AppendRequest{Events: events, AtEnd: true}))
	return res
}

// dispose disposes the session through the Dispose update.
func (w *world) dispose(id string) wire.DisposeResult {
	w.t.Helper()
	var res wire.DisposeResult
	require.NoError(w.t, w.update(wire.WorkflowID(id), wire.UpdateDispose, &res))
	return res
}

// describe queries the latest run of a session workflow.
func (w *world) describe(id string) wire.Description {
	w.t.Helper()
	v, err := w.c.QueryWorkflow(w.ctx(), wire.WorkflowID(id), "", wire.QueryDescribe)
	require.NoError(w.t, err)
	var d wire.Description
	require.NoError(w.t, v.Get(&d))
	return d
}

// awaitCond polls cond until it holds; it fails the test at the test's
// deadline (the end of w.ctx()).
func (w *world) awaitCond(what string, cond func() bool) {
	w.t.Helper()
	start := time.Now()
	for !cond() {
		select {
		case <-w.ctx().Done():
			w.t.Fatalf("gave up waiting after %v (the test's deadline): %s", time.Since(start).Round(time.Millisecond), what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// awaitLive polls the Describe query until the session is live.
func (w *world) awaitLive(id string) {
	w.t.Helper()
	w.awaitCond("session "+id+" live", func() bool {
		v, err := w.c.QueryWorkflow(w.ctx(), wire.WorkflowID(id), "", wire.QueryDescribe)
		if err != nil {
			return false
		}
		var d wire.Description
		return v.Get(&d) == nil && d.Phase == wire.PhaseLive
	})
}

// awaitSetup waits until the setup hook of session id started.
func (w *world) awaitSetup(id string) {
	w.t.Helper()
	w.awaitCond("the setup hook of "+id, func() bool {
		for _, call := range w.hooks.log(id) {
			if call == "setup" {
				return true
			}
		}
		return false
	})
}

// status returns the status of the latest run of workflowID.
func (w *world) status(workflowID string) enumspb.WorkflowExecutionStatus {
	w.t.Helper()
	desc, err := w.c.DescribeWorkflow(w.ctx(), workflowID, "")
	require.NoError(w.t, err)
	return desc.RawResponse.GetWorkflowExecutionInfo().GetStatus()
}

// history reads the history of one run (runID "" = the latest).
func (w *world) history(workflowID, runID string) *historypb.History {
	w.t.Helper()
	hist := &historypb.History{}
	it := w.c.GetWorkflowHistory(w.ctx(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(w.t, err)
		hist.Events = append(hist.Events, ev)
	}
	return hist
}

// runs returns the run ids of workflowID from firstRunID through every
// continue-as-new, in order.
func (w *world) runs(workflowID, firstRunID string) []string {
	w.t.Helper()
	out := []string{firstRunID}
	for {
		hist := w.history(workflowID, out[len(out)-1])
		last := hist.Events[len(hist.Events)-1]
		attrs := last.GetWorkflowExecutionContinuedAsNewEventAttributes()
		if attrs == nil {
			return out
		}
		out = append(out, attrs.GetNewExecutionRunId())
	}
}

// scheduled counts the activities of a type scheduled in hist.
func scheduled(hist *historypb.History, activityType string) int {
	n := 0
	for _, e := range hist.Events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activityType {
			n++
		}
	}
	return n
}

// appErr extracts the application error of a workflow or update failure.
func appErr(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	return app
}

// requireAppError asserts an application error's exact message and type.
func requireAppError(t *testing.T, err error, msg, typ string) {
	t.Helper()
	app := appErr(t, err)
	require.Equal(t, msg, app.Message())
	require.Equal(t, typ, app.Type())
}

// storedEvents reads a session's events through a read handle of a fresh
// store over the world's root (what another process would see).
func (w *world) storedEvents(id string) []session.Event {
	w.t.Helper()
	ctx := context.Background()
	h, err := w.store.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(w.t, err)
	defer h.Close(ctx)
	evs, err := h.Read(ctx, 0, -1)
	require.NoError(w.t, err)
	return evs
}

// lease returns the session's write lease, nil when none is held.
func (w *world) lease(id string) *wire.Lease {
	w.t.Helper()
	l, err := w.store.LeaseOf(context.Background(), id)
	require.NoError(w.t, err)
	return l
}

// requireNothingStored asserts that the store holds no log and no lease
// for id, and that the id can be created again.
func (w *world) requireNothingStored(id string) {
	w.t.Helper()
	ctx := context.Background()
	snap, err := w.store.Stat(ctx, id)
	require.NoError(w.t, err)
	require.Nil(w.t, snap, "session %q is stored", id)
	require.Nil(w.t, w.lease(id), "a lease is held on %q", id)
	list, err := w.store.List(ctx)
	require.NoError(w.t, err)
	for _, s := range list {
		require.NotEqual(w.t, id, s.Header.ID, "session %q is listed", id)
	}
}

// requireSameEvents asserts that got holds exactly want, compared in their
// canonical encoding.
func requireSameEvents(t *testing.T, want, got []session.Event) {
	t.Helper()
	require.Equal(t, len(want), len(got), "event count: want %v, got %v", types(want), types(got))
	for i := range want {
		a, err := want[i].MarshalJSON()
		require.NoError(t, err)
		b, err := got[i].MarshalJSON()
		require.NoError(t, err)
		ca, err := session.CanonicalJSON(a)
		require.NoError(t, err)
		cb, err := session.CanonicalJSON(b)
		require.NoError(t, err)
		require.JSONEq(t, string(ca), string(cb), "event %d", i)
	}
}

// requireContiguous asserts seqs 0..n-1.
func requireContiguous(t *testing.T, evs []session.Event) {
	t.Helper()
	for i, e := range evs {
		require.Equal(t, int64(i), e.Seq, "seq at index %d", i)
	}
}

func types(evs []session.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// tornRecord is the incomplete final record of a crashed log.
const tornRecord = `{"type":"tool/result","seq":4,"time":1700000000004,"data":{"turn":1,"ste`

// crashedLog stores id as a process that crashed mid-turn leaves it: an
// open turn whose assistant message called a tool, the tool call recorded
// without a result, and a torn final record. The world's store must be
// uncompressed so the torn record can be written as raw text. It returns
// the complete events.
func (w *world) crashedLog(id string) []session.Event {
	t := w.t
	t.Helper()
	require.Equal(t, jsonl.CompressionNone, w.comp)
	msg := ev(t, wire.TypeAssistantMessage, 2, map[string]any{
		"turn": 1, "step": 1, "stream": []any{},
		"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool-call", "id": "call-1", "name": "read", "arguments": map[string]any{"path": "README.md"}}}},
	})
	msg.SurfaceOp = session.AppendOp()
	events := []session.Event{
		turnStart(t, 0, 1),
		ev(t, wire.TypeStepStart, 1, map[string]any{"turn": 1, "step": 1}),
		msg,
		ev(t, wire.TypeToolCall, 3, map[string]any{"turn": 1, "step": 1, "callId": "call-1", "name": "read", "arguments": `{"path":"README.md"}`}),
	}
	ctx := context.Background()
	hdr := wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 1_700_000_000_000, Cwd: "/work/project"}
	h, err := w.store.Create(ctx, hdr, jsonl.CreateOptions{HandleID: "crashed-" + id})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, events))
	require.NoError(t, h.Close(ctx))
	snap, err := w.store.Stat(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, snap)
	f, err := os.OpenFile(snap.Path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(tornRecord)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return events
}

// logPath is the path of a stored session's log.
func (w *world) logPath(id string) string {
	w.t.Helper()
	snap, err := w.store.Stat(context.Background(), id)
	require.NoError(w.t, err)
	require.NotNil(w.t, snap)
	return filepath.Clean(snap.Path)
}

// Event builders shared by the test packages.
var (
	ev            = sessiontest.Ev
	turnStart     = sessiontest.TurnStart
	turnEnd       = sessiontest.TurnEnd
	assistantText = sessiontest.AssistantText
	liveTurn      = sessiontest.LiveTurn
	// withoutRecords drops the route and the chunks a model call stores
	// beside its message, after checking them (for tests about the turns'
	// structure).
	withoutRecords = sessiontest.WithoutRecords
)
