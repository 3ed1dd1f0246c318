package sessiontest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/workflows"
)

// Deadline bounds one harness test: the environment's workflows run their
// activities over a temporary store in seconds (the slowest,
// workflows.TestResumeHistoryIndependentOfLogSize, resumes a log of a
// million events: 80 s under -race on a loaded two-core machine), so a test
// still running after it is stuck (a turn that never reaches its step
// limit, a wait that never ends). The test then fails by name with the
// activities it ran.
const Deadline = 6 * time.Minute

// Harness is one test's store, activities and Temporal test environment.
type Harness struct {
	T     *testing.T
	suite *sdktest.WorkflowTestSuite
	Env   *SessionEnv
	Store *jsonl.Store
	Acts  *activities.Activities
	Hooks *Hooks
	Logs  *LogCapture

	mu        sync.Mutex
	started   []activityCall
	completed []activityCall
	results   []*Result

	// The sequence of the steps of At, UpdateAt, AtNoWait and
	// UpdateNoWaitAt; used only inside the environment's callbacks.
	scheduled int          // steps registered so far
	next      int          // the step whose turn it is
	due       map[int]step // steps whose offset has passed, by number
	busy      bool         // a step holds the sequence
	inFlight  int          // updateNoWaitAt updates not settled yet
	// startWaiters run when an activity of their name starts.
	startWaiters map[string][]func()
	// localStarts counts the local activities started, by name.
	localStarts map[string]int
	// waiting names the condition a WaitFor step still waits for; written
	// under mu.
	waiting string
	// expired is set when the test's deadline passed: the next activity to
	// start cancels the workflow.
	expired    atomic.Bool
	cancelOnce sync.Once

	// OnStarted and OnCompleted, when set, run inside the environment's
	// listeners (so they may signal or cancel the workflow).
	OnStarted   func(name string)
	OnCompleted func(name string, err error)
}

type activityCall struct {
	name string
	args converter.EncodedValues
	err  error
}

// NewStore returns a store in a fresh temporary directory, writing comp.
func NewStore(t *testing.T, comp jsonl.Compression) *jsonl.Store {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: comp})
	require.NoError(t, err)
	return st
}

// NewHarness builds an environment over a fresh zstd store.
func NewHarness(t *testing.T) *Harness {
	return NewHarnessOn(t, NewStore(t, jsonl.CompressionZstd))
}

// NewHarnessOn builds an environment over st (a later lifecycle of the
// same store gets a fresh environment).
func NewHarnessOn(t *testing.T, st *jsonl.Store) *Harness {
	t.Helper()
	h := &Harness{T: t, Store: st, Hooks: &Hooks{}, Logs: &LogCapture{}}
	h.suite = &sdktest.WorkflowTestSuite{}
	h.suite.SetLogger(h.Logs)
	h.Acts = &activities.Activities{Runtime: &activities.Runtime{Store: st, HeartbeatInterval: 50 * time.Millisecond}}
	h.Env = &SessionEnv{TestWorkflowEnvironment: h.newEnv()}
	t.Cleanup(h.requireChecked)
	testdeadline.Watch(t, Deadline, h.state, func() { h.expired.Store(true) })
	return h
}

// state describes what the harness's workflows did so far, for a test
// that missed its deadline.
func (h *Harness) state() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var last []string
	for _, c := range h.started[max(0, len(h.started)-6):] {
		last = append(last, c.name)
	}
	s := fmt.Sprintf("the workflow under test has not ended: %d activities started (the last: %v), %d completed", len(h.started), last, len(h.completed))
	if h.waiting != "" {
		s += "; a WaitFor step waits for: " + h.waiting
	}
	return s
}

// SessionEnv is a test environment that runs a CreateSession or
// ResumeSession under the workflow id docs/API.md prescribes for its
// session (the workflows refuse any other), unless WithID chose one.
type SessionEnv struct {
	*sdktest.TestWorkflowEnvironment
	idSet bool
}

// ExecuteWorkflow runs workflowFn; a session request without a chosen id
// runs under workflows.WorkflowID of its session id.
func (e *SessionEnv) ExecuteWorkflow(workflowFn any, args ...any) {
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

func (h *Harness) newEnv() *sdktest.TestWorkflowEnvironment {
	env := h.suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(5 * time.Minute)
	// A workflow task is short, but under the race detector on a loaded
	// machine the 1 s default can trip on a slow scheduling.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 30 * time.Second})
	env.RegisterWorkflow(workflows.CreateSession)
	env.RegisterWorkflow(workflows.ResumeSession)
	env.RegisterWorkflow(workflows.LiveSession)
	env.RegisterWorkflow(workflows.SessionLoop)
	env.RegisterActivity(h.Acts)
	activities.RegisterLegacyNames(env, h.Acts) // as workerapp.Register does
	env.RegisterActivityWithOptions(h.Hooks.Setup, activity.RegisterOptions{Name: HookSetup})
	env.RegisterActivityWithOptions(h.Hooks.Commit, activity.RegisterOptions{Name: HookCommit})
	env.RegisterActivityWithOptions(h.Hooks.Publish, activity.RegisterOptions{Name: HookPublish})
	env.RegisterActivityWithOptions(h.Hooks.Dispose, activity.RegisterOptions{Name: HookDispose})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		h.recordStarted(info.ActivityType.Name, args, false)
	})
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		h.recordCompleted(info.ActivityType.Name, err)
	})
	h.listenLocal(env)
	return env
}

// recordStarted records the start of the activity name (local: a local
// activity) and runs the hooks waiting for it.
func (h *Harness) recordStarted(name string, args converter.EncodedValues, local bool) {
	h.mu.Lock()
	h.started = append(h.started, activityCall{name: name, args: args})
	if local {
		if h.localStarts == nil {
			h.localStarts = map[string]int{}
		}
		h.localStarts[name]++
	}
	fn := h.OnStarted
	waiters := h.startWaiters[name]
	delete(h.startWaiters, name)
	h.mu.Unlock()
	if h.expired.Load() {
		// The deadline passed (the test already failed): end the workflow
		// from inside the environment, as OnStarted may.
		h.cancelOnce.Do(h.Env.CancelWorkflow)
	}
	if fn != nil {
		fn(name)
	}
	for _, w := range waiters {
		w()
	}
}

// recordCompleted records the end of the activity name with its error.
func (h *Harness) recordCompleted(name string, err error) {
	h.mu.Lock()
	h.completed = append(h.completed, activityCall{name: name, err: err})
	fn := h.OnCompleted
	h.mu.Unlock()
	if fn != nil {
		fn(name, err)
	}
}

// WithID makes the top-level workflow run under workflow id session/<id>.
func (h *Harness) WithID(id string) *Harness {
	h.Env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(id)})
	h.Env.idSet = true
	return h
}

// RunUnder makes the next ExecuteWorkflow run under workflow id wid,
// whatever its request names (to see a foreign id refused).
func (h *Harness) RunUnder(wid string) *Harness {
	h.Env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wid})
	h.Env.idSet = true
	return h
}

// AbortNow signals abort with the given reason and cancels the workflow
// (wid "" = the top-level one), as a caller's AbortSignal does.
func (h *Harness) AbortNow(wid string, reason string, isError bool) {
	req := workflows.AbortRequest{Reason: reason, IsError: isError}
	if wid == "" {
		h.Env.SignalWorkflow(workflows.SignalAbort, req)
		h.Env.CancelWorkflow()
		return
	}
	require.NoError(h.T, h.Env.SignalWorkflowByID(wid, workflows.SignalAbort, req))
	h.Env.CancelWorkflowByID(wid, "")
}

// StartedNames lists the activities started so far, in order.
func (h *Harness) StartedNames() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.started))
	for i, c := range h.started {
		out[i] = c.name
	}
	return out
}

// Count returns how many times an activity was started.
func (h *Harness) Count(name string) int {
	n := 0
	for _, s := range h.StartedNames() {
		if s == name {
			n++
		}
	}
	return n
}

// StartedArg decodes the argument of the i-th start of an activity.
func (h *Harness) StartedArg(name string, i int, out any) {
	h.T.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	k := 0
	for _, c := range h.started {
		if c.name != name {
			continue
		}
		if k == i {
			require.NoError(h.T, c.args.Get(out))
			return
		}
		k++
	}
	h.T.Fatalf("activity %s was not started %d times", name, i+1)
}

// ClosedHandles returns the handle ids given to CloseHandle, in order.
func (h *Harness) ClosedHandles() []string {
	var out []string
	for i := 0; i < h.Count(activities.CloseHandleName); i++ {
		var in activities.HandleInput
		h.StartedArg(activities.CloseHandleName, i, &in)
		out = append(out, in.Ref.HandleID)
	}
	return out
}

// Describe queries a session workflow.
func (h *Harness) Describe(wid string) workflows.Description {
	h.T.Helper()
	var v converter.EncodedValue
	var err error
	if wid == "" {
		v, err = h.Env.QueryWorkflow(workflows.QueryDescribe)
	} else {
		v, err = h.Env.QueryWorkflowByID(wid, workflows.QueryDescribe)
	}
	require.NoError(h.T, err)
	var d workflows.Description
	require.NoError(h.T, v.Get(&d))
	return d
}
