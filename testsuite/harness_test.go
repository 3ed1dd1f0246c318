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
	env   *sessionEnv
	store *jsonl.Store
	acts  *activities.Activities
	hooks *hooks
	logs  *logCapture

	mu        sync.Mutex
	started   []activityCall
	completed []activityCall
	results   []*result

	// The sequence of the steps of at, updateAt, atNoWait and
	// updateNoWaitAt; used only inside the environment's callbacks.
	scheduled int          // steps registered so far
	next      int          // the step whose turn it is
	due       map[int]step // steps whose offset has passed, by number
	busy      bool         // a step holds the sequence
	inFlight  int          // updateNoWaitAt updates not settled yet
	// startWaiters run when an activity of their name starts.
	startWaiters map[string][]func()
	// waiting names the condition a waitFor step still waits for.
	waiting string

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
	h.env = &sessionEnv{TestWorkflowEnvironment: h.newEnv()}
	t.Cleanup(h.requireChecked)
	return h
}

// sessionEnv is a test environment that runs a CreateSession or
// ResumeSession under the workflow id docs/API.md prescribes for its
// session (the workflows refuse any other), unless withID chose one.
type sessionEnv struct {
	*sdktest.TestWorkflowEnvironment
	idSet bool
}

// ExecuteWorkflow runs workflowFn; a session request without a chosen id
// runs under workflows.WorkflowID of its session id.
func (e *sessionEnv) ExecuteWorkflow(workflowFn any, args ...any) {
	if !e.idSet && len(args) == 1 {
		switch req := args[0].(type) {
		case workflows.CreateSessionRequest:
			e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(req.SessionID)})
		case workflows.ResumeSessionRequest:
			e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(req.ResumeSessionID)})
		}
	}
	e.TestWorkflowEnvironment.ExecuteWorkflow(workflowFn, args...)
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
	activities.RegisterLegacyNames(env, h.acts) // as workerapp.Register does
	env.RegisterActivityWithOptions(h.hooks.Setup, activity.RegisterOptions{Name: hookSetup})
	env.RegisterActivityWithOptions(h.hooks.Commit, activity.RegisterOptions{Name: hookCommit})
	env.RegisterActivityWithOptions(h.hooks.Publish, activity.RegisterOptions{Name: hookPublish})
	env.RegisterActivityWithOptions(h.hooks.Dispose, activity.RegisterOptions{Name: hookDispose})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		h.mu.Lock()
		h.started = append(h.started, activityCall{name: info.ActivityType.Name, args: args})
		fn := h.onStarted
		waiters := h.startWaiters[info.ActivityType.Name]
		delete(h.startWaiters, info.ActivityType.Name)
		h.mu.Unlock()
		if fn != nil {
			fn(info.ActivityType.Name)
		}
		for _, w := range waiters {
			w()
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
	h.listenLocal(env)
	return env
}

// withID makes the top-level workflow run under workflow id session/<id>.
func (h *harness) withID(id string) *harness {
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(id)})
	h.env.idSet = true
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

// result is the outcome of an update sent through the environment. Every
// result a test sends must be checked (decode, ok, rejection or failure);
// the harness fails a test that leaves one unchecked.
type result struct {
	name     string
	done     bool
	rejected error
	value    any
	err      error
	checked  bool
	// then, when set, runs once the update settles (inside the
	// environment, so it may send further updates).
	then func()
}

// decode requires that the update completed without error and converts its
// value into out.
func (r *result) decode(t *testing.T, out any) {
	t.Helper()
	r.ok(t)
	if ev, ok := r.value.(converter.EncodedValue); ok {
		require.NoError(t, ev.Get(out))
		return
	}
	b, err := json.Marshal(r.value)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, out))
}

// ok requires that the update was accepted and completed without error.
func (r *result) ok(t *testing.T) {
	t.Helper()
	r.checked = true
	require.True(t, r.done, "update %s did not complete", r.name)
	require.NoError(t, r.rejected, "update %s was rejected", r.name)
	require.NoError(t, r.err, "update %s failed", r.name)
}

// rejection requires that the update was rejected (by its validator or
// because its workflow did not take it) and returns why.
func (r *result) rejection(t *testing.T) error {
	t.Helper()
	r.checked = true
	require.True(t, r.done, "update %s did not complete", r.name)
	require.Error(t, r.rejected, "update %s was not rejected", r.name)
	return r.rejected
}

// failure requires that the update was accepted and then failed, and
// returns its error.
func (r *result) failure(t *testing.T) error {
	t.Helper()
	r.checked = true
	require.True(t, r.done, "update %s did not complete", r.name)
	require.NoError(t, r.rejected, "update %s was rejected", r.name)
	require.Error(t, r.err, "update %s did not fail", r.name)
	return r.err
}

var updateSeq int

// update sends an update to the workflow (wid "" = the top-level one) now.
func (h *harness) update(wid, name string, args ...any) *result {
	r := h.newResult(name)
	h.send(r, wid, name, args...)
	return r
}

// newResult registers a result the test must check.
func (h *harness) newResult(name string) *result {
	r := &result{name: name}
	h.mu.Lock()
	h.results = append(h.results, r)
	h.mu.Unlock()
	return r
}

// requireChecked fails the test when an update's outcome was never looked
// at: an unchecked update can fail (or never be sent) unnoticed.
func (h *harness) requireChecked() {
	if h.t.Failed() {
		return
	}
	if h.waiting != "" {
		h.t.Errorf("the run ended while a step still waited for: %s", h.waiting)
	}
	if h.next < h.scheduled {
		h.t.Errorf("the run ended before %d of its %d scheduled steps ran", h.scheduled-h.next, h.scheduled)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range h.results {
		if !r.checked {
			h.t.Errorf("the outcome of update #%d (%s) was never checked (done %v, rejected %v, err %v)", i+1, r.name, r.done, r.rejected, r.err)
		}
	}
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
// returns both results.
func (h *harness) readyThenDispose(d time.Duration, wid string) (ready, dispose *result) {
	ready = h.updateAt(d, wid, workflows.UpdateWaitReady)
	dispose = h.updateAt(d, wid, workflows.UpdateDispose)
	return ready, dispose
}

// Steps in sequence.
//
// While an activity runs, the test environment's clock follows the wall
// clock, so a step scheduled at a fixed workflow-clock offset can fire
// before the activities of an earlier step have finished (an Append sent
// before the session is live). The steps registered with at, updateAt,
// atNoWait and updateNoWaitAt therefore run in the order they were
// registered (not in the order the environment fires equal offsets), each
// at its offset at the earliest:
//
//   - updateAt and at wait until every earlier step has settled (its update
//     completed or was rejected); the sequence then waits for updateAt's own
//     update to settle.
//   - updateNoWaitAt and atNoWait wait only for the earlier updateAt and at
//     steps, not for earlier updates still in flight, and the sequence does
//     not wait for updateNoWaitAt's update (updates meant to be in flight
//     together, a cancellation while an append is pending).
//
// A step that must happen while an earlier update waits for it (an abort
// that fails a pending WaitReady) is sent after that update with the NoWait
// forms, or from an activity listener (onStarted, onCompleted) when it must
// find an activity running.

// step is one entry of the sequence; run calls done once the sequence may
// go on.
type step struct {
	// barrier makes the step wait for the updates still in flight.
	barrier bool
	run     func(done func())
}

// schedule registers a step due at d and returns; steps run in the order
// they were scheduled, whatever order the environment fires equal offsets
// in.
func (h *harness) schedule(d time.Duration, s step) {
	n := h.scheduled
	h.scheduled++
	h.env.RegisterDelayedCallback(func() {
		if h.due == nil {
			h.due = make(map[int]step)
		}
		h.due[n] = s
		h.pump()
	}, d)
}

// pump runs the next step if it is due and its turn has come.
func (h *harness) pump() {
	if h.busy {
		return
	}
	s, ok := h.due[h.next]
	if !ok || (s.barrier && h.inFlight > 0) {
		return
	}
	delete(h.due, h.next)
	h.next++
	h.busy = true
	s.run(func() {
		h.busy = false
		h.pump()
	})
}

// at runs fn at d on the workflow clock, once every earlier step settled.
func (h *harness) at(d time.Duration, fn func()) {
	h.schedule(d, step{barrier: true, run: func(done func()) { fn(); done() }})
}

// atStarted runs fn at d on the workflow clock once an activity named
// activity has started (holding the sequence until then), after the earlier
// updateAt and at steps, whatever updateNoWaitAt updates are still in
// flight: an abort or a deactivation that must find the activity pending.
func (h *harness) atStarted(d time.Duration, activity string, fn func()) {
	h.schedule(d, step{run: func(done func()) {
		if h.count(activity) > 0 {
			fn()
			done()
			return
		}
		h.mu.Lock()
		if h.startWaiters == nil {
			h.startWaiters = make(map[string][]func())
		}
		h.startWaiters[activity] = append(h.startWaiters[activity], func() { fn(); done() })
		h.mu.Unlock()
	}})
}

// waitFor holds the sequence, from d on, until cond holds (cond is checked
// at the step's turn and then every 100 ms of the workflow clock, which the
// environment skips ahead to when the workflows are idle). The earlier
// updateAt and at steps have settled by then; updateNoWaitAt updates may
// still be in flight. A condition never met fails the test.
func (h *harness) waitFor(d time.Duration, what string, cond func() bool) {
	h.schedule(d, step{run: func(done func()) {
		var check func()
		check = func() {
			if cond() {
				h.waiting = ""
				done()
				return
			}
			h.waiting = what
			h.env.RegisterDelayedCallback(check, 100*time.Millisecond)
		}
		check()
	}})
}

// loopChildrenSettled is a waitFor condition: the top-level loop lists at
// least n children and all of them have settled.
func (h *harness) loopChildrenSettled(n int) func() bool {
	return func() bool {
		d, ok := h.loopDescription()
		if !ok || len(d.Children) < n {
			return false
		}
		for _, c := range d.Children {
			if c.State != workflows.ChildSettled {
				return false
			}
		}
		return true
	}
}

// loopChildStarted is a waitFor condition: the top-level loop's n-th child
// (from 1) has started its execution, so updates can reach it.
func (h *harness) loopChildStarted(n int) func() bool {
	return func() bool {
		d, ok := h.loopDescription()
		return ok && len(d.Children) >= n && d.Children[n-1].RunID != ""
	}
}

// loopDescription queries the top-level loop.
func (h *harness) loopDescription() (workflows.LoopDescription, bool) {
	var d workflows.LoopDescription
	v, err := h.env.QueryWorkflow(workflows.QueryDescribe)
	if err != nil {
		return d, false
	}
	return d, v.Get(&d) == nil
}

// atNoWait runs fn at d on the workflow clock, after the earlier updateAt
// and at steps, whatever updateNoWaitAt updates are still in flight.
func (h *harness) atNoWait(d time.Duration, fn func()) {
	h.schedule(d, step{run: func(done func()) { fn(); done() }})
}

// updateAt sends an update at d once every earlier step settled, holds the
// sequence until it settles, and returns its future result.
func (h *harness) updateAt(d time.Duration, wid, name string, args ...any) *result {
	r := h.newResult(name)
	h.schedule(d, step{barrier: true, run: func(done func()) {
		r.then = done
		h.send(r, wid, name, args...)
	}})
	return r
}

// updateNoWaitAt sends an update at d after the earlier updateAt and at
// steps, and lets the sequence go on while it is in flight; the next
// updateAt or at step waits for it.
func (h *harness) updateNoWaitAt(d time.Duration, wid, name string, args ...any) *result {
	r := h.newResult(name)
	h.schedule(d, step{run: func(done func()) {
		h.inFlight++
		r.then = func() {
			h.inFlight--
			h.pump()
		}
		h.send(r, wid, name, args...)
		done()
	}})
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

// persisted writes the "persisted session" fixture of the S0 cases: create,
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

// requireReleased asserts that the session is stored, that no lease is held
// on it, and that a new write open succeeds at once (the probe's handle is
// closed again). A session that is not stored fails: use requireErased for
// one that must be gone.
func requireReleased(t *testing.T, st *jsonl.Store, id string) {
	t.Helper()
	ctx := context.Background()
	snap, err := st.Stat(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, snap, "session %q is not stored", id)
	require.False(t, snap.Pending, "session %q is still pending", id)
	lease, err := st.LeaseOf(ctx, id)
	require.NoError(t, err)
	require.Nil(t, lease, "a lease is still held on %q", id)
	probeSeq++
	h, err := st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: fmt.Sprintf("probe-%d", probeSeq)})
	require.NoError(t, err, "a write open of %q failed", id)
	require.Equal(t, jsonl.AccessWrite, h.Access())
	require.NoError(t, h.Close(ctx))
}

// requireErased asserts that the session left nothing behind: no log (stat
// reads nothing, a write open is refused `not found`), no lease, and the id
// can be created again (the probe's create is closed unmaterialized, so it
// is erased again).
func requireErased(t *testing.T, st *jsonl.Store, id string) {
	t.Helper()
	ctx := context.Background()
	snap, err := st.Stat(ctx, id)
	require.NoError(t, err)
	require.Nil(t, snap, "session %q is still stored", id)
	lease, err := st.LeaseOf(ctx, id)
	require.NoError(t, err)
	require.Nil(t, lease, "a lease is still held on %q", id)
	probeSeq++
	hid := fmt.Sprintf("probe-%d", probeSeq)
	_, err = st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: hid})
	require.ErrorIs(t, err, jsonl.ErrNotFound)
	require.Contains(t, err.Error(), "not found")
	c, err := st.Create(ctx, session.Header{Version: session.FormatVersion, ID: id, CreatedAt: 1}, jsonl.CreateOptions{HandleID: hid})
	require.NoError(t, err, "the id %q is not reusable", id)
	require.NoError(t, c.Close(ctx))
	snap, err = st.Stat(ctx, id)
	require.NoError(t, err)
	require.Nil(t, snap)
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
	ev        = events.Ev
	turnStart = events.TurnStart
	turnEnd   = events.TurnEnd
	liveTurn  = events.LiveTurn
)
