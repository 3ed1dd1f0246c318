package testsuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/internal/events"
	"github.com/sessionflow/sessionflow/workflows"
)

// Hook activity names used by the tests.
const (
	hookSetup   = "test.setup"
	hookCommit  = "test.commit"
	hookPublish = "test.publish"
	hookDispose = "test.dispose"
)

// hooks holds the hook activities the tests register; each field may be
// replaced before the environment runs.
type hooks struct {
	mu      sync.Mutex
	calls   []string
	setup   func(ctx context.Context, in workflows.SetupInput) (workflows.SetupResult, error)
	commit  func(ctx context.Context, in workflows.SetupInput) error
	publish func(ctx context.Context, in workflows.PublishInput) error
	dispose func(ctx context.Context, in workflows.DisposeInput) error
}

func (h *hooks) record(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, s)
}

func (h *hooks) log() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

func (h *hooks) Setup(ctx context.Context, in workflows.SetupInput) (workflows.SetupResult, error) {
	h.record("setup:start")
	var res workflows.SetupResult
	var err error
	if h.setup != nil {
		res, err = h.setup(ctx, in)
	}
	if err == nil {
		h.record("setup:end")
	}
	return res, err
}

func (h *hooks) Commit(ctx context.Context, in workflows.SetupInput) error {
	h.record("setup:commit")
	if h.commit != nil {
		return h.commit(ctx, in)
	}
	return nil
}

func (h *hooks) Publish(ctx context.Context, in workflows.PublishInput) error {
	name := in.Entry.Type
	if in.Entry.Source != "" {
		name += ":" + in.Entry.Source
	}
	h.record(name)
	if h.publish != nil {
		return h.publish(ctx, in)
	}
	return nil
}

func (h *hooks) Dispose(ctx context.Context, in workflows.DisposeInput) error {
	h.record("dispose:" + in.Reason)
	if h.dispose != nil {
		return h.dispose(ctx, in)
	}
	return nil
}

// allHooks names every test hook.
var allHooks = workflows.Hooks{
	SetupActivity:   hookSetup,
	CommitActivity:  hookCommit,
	PublishActivity: hookPublish,
	DisposeActivity: hookDispose,
}

// logCapture is a log.Logger keeping warnings.
type logCapture struct {
	mu    sync.Mutex
	warns []string
}

func (c *logCapture) Debug(string, ...any) {}
func (c *logCapture) Info(string, ...any)  {}
func (c *logCapture) Error(msg string, kv ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warns = append(c.warns, "ERROR "+msg)
}
func (c *logCapture) Warn(msg string, kv ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warns = append(c.warns, msg)
}

func (c *logCapture) warnings(substr string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, w := range c.warns {
		if strings.Contains(w, substr) {
			out = append(out, w)
		}
	}
	return out
}

var _ log.Logger = (*logCapture)(nil)

// harness is one test's store, activities and Temporal test environment.
type harness struct {
	t     *testing.T
	suite *sdktest.WorkflowTestSuite
	env   *sdktest.TestWorkflowEnvironment
	store *jsonl.Store
	acts  *activities.Activities
	hooks *hooks
	logs  *logCapture

	mu        sync.Mutex
	started   []activityCall
	completed []activityCall

	// onStarted and onCompleted, when set, run inside the environment's
	// listeners (so they may signal or cancel the workflow).
	onStarted   func(name string)
	onCompleted func(name string, err error)
}

type activityCall struct {
	name string
	args converter.EncodedValues
	err  error
}

func newStore(t *testing.T, comp jsonl.Compression) *jsonl.Store {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: comp})
	require.NoError(t, err)
	return st
}

// newHarness builds an environment over a fresh zstd store.
func newHarness(t *testing.T) *harness {
	return newHarnessOn(t, newStore(t, jsonl.CompressionZstd))
}

// newHarnessOn builds an environment over st (a later lifecycle of the
// same store gets a fresh environment).
func newHarnessOn(t *testing.T, st *jsonl.Store) *harness {
	t.Helper()
	h := &harness{t: t, store: st, hooks: &hooks{}, logs: &logCapture{}}
	h.suite = &sdktest.WorkflowTestSuite{}
	h.suite.SetLogger(h.logs)
	h.acts = &activities.Activities{Store: st, HeartbeatInterval: 50 * time.Millisecond}
	h.env = h.newEnv()
	return h
}

func (h *harness) newEnv() *sdktest.TestWorkflowEnvironment {
	env := h.suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(5 * time.Minute)
	// A workflow task is short, but under the race detector on a loaded
	// machine the 1 s default can trip on a slow scheduling.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 30 * time.Second})
	env.RegisterWorkflow(workflows.CreateSession)
	env.RegisterWorkflow(workflows.ResumeSession)
	env.RegisterWorkflow(workflows.LiveSession)
	env.RegisterWorkflow(workflows.SessionLoop)
	env.RegisterActivity(h.acts)
	env.RegisterActivityWithOptions(h.hooks.Setup, activity.RegisterOptions{Name: hookSetup})
	env.RegisterActivityWithOptions(h.hooks.Commit, activity.RegisterOptions{Name: hookCommit})
	env.RegisterActivityWithOptions(h.hooks.Publish, activity.RegisterOptions{Name: hookPublish})
	env.RegisterActivityWithOptions(h.hooks.Dispose, activity.RegisterOptions{Name: hookDispose})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		h.mu.Lock()
		h.started = append(h.started, activityCall{name: info.ActivityType.Name, args: args})
		fn := h.onStarted
		h.mu.Unlock()
		if fn != nil {
			fn(info.ActivityType.Name)
		}
	})
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		h.mu.Lock()
		h.completed = append(h.completed, activityCall{name: info.ActivityType.Name, err: err})
		fn := h.onCompleted
		h.mu.Unlock()
		if fn != nil {
			fn(info.ActivityType.Name, err)
		}
	})
	return env
}

// withID makes the top-level workflow run under workflow id session/<id>.
func (h *harness) withID(id string) *harness {
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(id)})
	return h
}

// abortNow signals abort with the given reason and cancels the workflow
// (wid "" = the top-level one), as a caller's AbortSignal does.
func (h *harness) abortNow(wid string, reason string, isError bool) {
	req := workflows.AbortRequest{Reason: reason, IsError: isError}
	if wid == "" {
		h.env.SignalWorkflow(workflows.SignalAbort, req)
		h.env.CancelWorkflow()
		return
	}
	require.NoError(h.t, h.env.SignalWorkflowByID(wid, workflows.SignalAbort, req))
	h.env.CancelWorkflowByID(wid, "")
}

// startedNames lists the activities started so far, in order.
func (h *harness) startedNames() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.started))
	for i, c := range h.started {
		out[i] = c.name
	}
	return out
}

// count returns how many times an activity was started.
func (h *harness) count(name string) int {
	n := 0
	for _, s := range h.startedNames() {
		if s == name {
			n++
		}
	}
	return n
}

// startedArg decodes the argument of the i-th start of an activity.
func (h *harness) startedArg(name string, i int, out any) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	k := 0
	for _, c := range h.started {
		if c.name != name {
			continue
		}
		if k == i {
			require.NoError(h.t, c.args.Get(out))
			return
		}
		k++
	}
	h.t.Fatalf("activity %s was not started %d times", name, i+1)
}

// closedHandles returns the handle ids given to CloseHandle, in order.
func (h *harness) closedHandles() []string {
	var out []string
	for i := 0; i < h.count(activities.CloseHandleName); i++ {
		var in activities.HandleInput
		h.startedArg(activities.CloseHandleName, i, &in)
		out = append(out, in.Ref.HandleID)
	}
	return out
}

// result is the outcome of an update sent through the environment.
type result struct {
	done     bool
	rejected error
	value    any
	err      error
	// then, when set, runs once the update settles (inside the
	// environment, so it may send further updates).
	then func()
}

// decode converts the update's value into out.
func (r *result) decode(t *testing.T, out any) {
	t.Helper()
	require.True(t, r.done, "update did not complete")
	require.NoError(t, r.rejected)
	require.NoError(t, r.err)
	if ev, ok := r.value.(converter.EncodedValue); ok {
		require.NoError(t, ev.Get(out))
		return
	}
	b, err := json.Marshal(r.value)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, out))
}

var updateSeq int

// update sends an update to the workflow (wid "" = the top-level one) now.
func (h *harness) update(wid, name string, args ...any) *result {
	r := &result{}
	h.send(r, wid, name, args...)
	return r
}

func (h *harness) send(r *result, wid, name string, args ...any) {
	updateSeq++
	id := fmt.Sprintf("u%d", updateSeq)
	settled := func() {
		if r.then != nil {
			r.then()
		}
	}
	cb := &sdktest.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) {
			r.rejected, r.done = err, true
			settled()
		},
		OnComplete: func(v any, err error) {
			r.value, r.err, r.done = v, err, true
			settled()
		},
	}
	if wid == "" {
		h.env.UpdateWorkflow(name, id, cb, args...)
		return
	}
	if err := h.env.UpdateWorkflowByID(wid, name, id, cb, args...); err != nil {
		r.rejected, r.done = err, true
		settled()
	}
}

// readyThenDispose sends WaitReady at d and, once it returns, Dispose; it
// returns both results. The chaining keeps the order when activities take
// real time (the environment then fires timers on the wall clock).
func (h *harness) readyThenDispose(d time.Duration, wid string) (ready, dispose *result) {
	ready, dispose = &result{}, &result{}
	ready.then = func() { h.send(dispose, wid, workflows.UpdateDispose) }
	h.at(d, func() { h.send(ready, wid, workflows.UpdateWaitReady) })
	return ready, dispose
}

// at schedules fn on the workflow clock.
func (h *harness) at(d time.Duration, fn func()) { h.env.RegisterDelayedCallback(fn, d) }

// updateAt sends an update at d and returns its future result.
func (h *harness) updateAt(d time.Duration, wid, name string, args ...any) *result {
	r := &result{}
	h.at(d, func() { h.send(r, wid, name, args...) })
	return r
}

// describe queries a session workflow.
func (h *harness) describe(wid string) workflows.Description {
	h.t.Helper()
	var v converter.EncodedValue
	var err error
	if wid == "" {
		v, err = h.env.QueryWorkflow(workflows.QueryDescribe)
	} else {
		v, err = h.env.QueryWorkflowByID(wid, workflows.QueryDescribe)
	}
	require.NoError(h.t, err)
	var d workflows.Description
	require.NoError(h.t, v.Get(&d))
	return d
}

// appErr extracts the application error of a workflow or update failure.
func appErr(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	return app
}

// requireMessage asserts the exact application error message.
func requireMessage(t *testing.T, err error, msg string) *temporal.ApplicationError {
	t.Helper()
	app := appErr(t, err)
	require.Equal(t, msg, app.Message())
	return app
}

// persisted writes the "persisted session" fixture of SPEC 8: create,
// append [turn/start{1}@0, turn/end{completed}@1], close.
func persisted(t *testing.T, st *jsonl.Store, id string, cwd string) {
	t.Helper()
	writeStored(t, st, session.Header{ID: id, Cwd: cwd, CreatedAt: 1}, 0, []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)})
}

// writeStored creates a session directly in the store with events.
func writeStored(t *testing.T, st *jsonl.Store, hdr session.Header, inherited int64, events []session.Event) {
	t.Helper()
	ctx := context.Background()
	hdr.Version = session.FormatVersion
	h, err := st.Create(ctx, hdr, jsonl.CreateOptions{HandleID: "fixture-" + hdr.ID, InheritedEventCount: inherited})
	require.NoError(t, err)
	if len(events) > 0 {
		require.NoError(t, h.Append(ctx, events))
	} else {
		require.NoError(t, h.Flush(ctx))
	}
	require.NoError(t, h.Close(ctx))
}

// stored reads a session's events through a read handle.
func stored(t *testing.T, st *jsonl.Store, id string) []session.Event {
	t.Helper()
	ctx := context.Background()
	h, err := st.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	defer h.Close(ctx)
	evs, err := h.Read(ctx, 0, -1)
	require.NoError(t, err)
	return evs
}

func types(evs []session.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func requireContiguous(t *testing.T, evs []session.Event) {
	t.Helper()
	for i, e := range evs {
		require.Equal(t, int64(i), e.Seq, "seq at index %d", i)
	}
}

var probeSeq int

// requireReleased asserts that no lease is held on id and that a new write
// open succeeds at once (when the session is stored) or, for a session that
// is not stored, that it reads as not found and the id can be created
// again. The probe's own handle is closed again.
func requireReleased(t *testing.T, st *jsonl.Store, id string) {
	t.Helper()
	ctx := context.Background()
	lease, err := st.LeaseOf(ctx, id)
	require.NoError(t, err)
	require.Nil(t, lease, "a lease is still held on %q", id)
	probeSeq++
	hid := fmt.Sprintf("probe-%d", probeSeq)
	h, err := st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: hid})
	if errors.Is(err, jsonl.ErrNotFound) {
		c, err := st.Create(ctx, session.Header{Version: session.FormatVersion, ID: id, CreatedAt: 1}, jsonl.CreateOptions{HandleID: hid})
		require.NoError(t, err, "the id %q is not reusable", id)
		require.NoError(t, c.Close(ctx))
		snap, err := st.Stat(ctx, id)
		require.NoError(t, err)
		require.Nil(t, snap)
		return
	}
	require.NoError(t, err, "a write open of %q failed", id)
	require.Equal(t, jsonl.AccessWrite, h.Access())
	require.NoError(t, h.Close(ctx))
}

// requireNotStored asserts that the session has no log (open write → not
// found) and holds no lease.
func requireNotStored(t *testing.T, st *jsonl.Store, id string) {
	t.Helper()
	ctx := context.Background()
	snap, err := st.Stat(ctx, id)
	require.NoError(t, err)
	require.Nil(t, snap)
	probeSeq++
	_, err = st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: fmt.Sprintf("probe-%d", probeSeq)})
	require.ErrorIs(t, err, jsonl.ErrNotFound)
	require.Contains(t, err.Error(), "not found")
}

// closeErr wraps the real CloseHandle so that it really closes and then
// rejects, as the seed's rejecting close does.
func closeErr(a *activities.Activities, msg string) func(context.Context, activities.HandleInput) error {
	return func(ctx context.Context, in activities.HandleInput) error {
		if err := a.CloseHandle(ctx, in); err != nil {
			return err
		}
		return temporal.NewNonRetryableApplicationError(msg, "Error", nil)
	}
}

// plainErr is a non-retryable application error of type Error.
func plainErr(msg string) error { return temporal.NewNonRetryableApplicationError(msg, "Error", nil) }

func f64(v float64) *float64 { return &v }

// corruptFirstEvent replaces the first event line of a raw log with a
// damaged record, so damage sits before the last turn/end.
func corruptFirstEvent(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(raw), "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	lines[1] = "{\"type\":\"turn/start\",\"seq\":0,\"ti\n"
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600))
}

// Event builders shared by the test packages.
var (
	ev            = events.Ev
	turnStart     = events.TurnStart
	turnEnd       = events.TurnEnd
	assistantText = events.AssistantText
	liveTurn      = events.LiveTurn
)
