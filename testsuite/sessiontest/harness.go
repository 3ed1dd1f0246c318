package sessiontest

import (
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
	"github.com/sessionflow/sessionflow/wire"
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
// Its state has three owners: the embedded activity log (what the
// environment started and completed, and what waits for it), the step
// sequencer (At, UpdateAt, WaitFor, ...) and the Harness itself (the
// environment, the updates' results, the deadline).
type Harness struct {
	T     *testing.T
	suite *sdktest.WorkflowTestSuite
	Env   *SessionEnv
	Store *jsonl.Store
	Acts  *activities.Activities
	Hooks *Hooks
	Logs  *LogCapture

	*activityLog
	seq *sequencer

	mu      sync.Mutex
	results []*Result

	// expired is set when the test's deadline passed: the next activity to
	// start cancels the workflow.
	expired    atomic.Bool
	cancelOnce sync.Once
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
	h := &Harness{T: t, Store: st, Hooks: &Hooks{}, Logs: &LogCapture{}, activityLog: &activityLog{t: t}}
	h.suite = &sdktest.WorkflowTestSuite{}
	h.suite.SetLogger(h.Logs)
	h.Acts = &activities.Activities{Runtime: &activities.Runtime{Store: st, HeartbeatInterval: 50 * time.Millisecond}}
	h.Env = &SessionEnv{TestWorkflowEnvironment: h.newEnv()}
	h.seq = &sequencer{env: h.Env}
	t.Cleanup(h.requireChecked)
	testdeadline.Watch(t, Deadline, h.state, func() { h.expired.Store(true) })
	return h
}

// state describes what the harness's workflows did so far, for a test
// that missed its deadline.
func (h *Harness) state() string {
	started, last, completed := h.summary()
	s := fmt.Sprintf("the workflow under test has not ended: %d activities started (the last: %v), %d completed", started, last, completed)
	if w := h.seq.waitingFor(); w != "" {
		s += "; a WaitFor step waits for: " + w
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
			e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wire.WorkflowID(req.SessionID)})
		case wire.ResumeSessionRequest:
			e.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wire.WorkflowID(req.ResumeSessionID)})
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
	h.listen(env, func() {
		if h.expired.Load() {
			// The deadline passed (the test already failed): end the
			// workflow from inside the environment, as OnStarted may.
			h.cancelOnce.Do(h.Env.CancelWorkflow)
		}
	})
	return env
}

// WithID makes the top-level workflow run under workflow id session/<id>.
func (h *Harness) WithID(id string) *Harness {
	h.Env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wire.WorkflowID(id)})
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
	req := wire.AbortRequest{Reason: reason, IsError: isError}
	if wid == "" {
		h.Env.SignalWorkflow(wire.SignalAbort, req)
		h.Env.CancelWorkflow()
		return
	}
	require.NoError(h.T, h.Env.SignalWorkflowByID(wid, wire.SignalAbort, req))
	h.Env.CancelWorkflowByID(wid, "")
}

// Describe queries a session workflow.
func (h *Harness) Describe(wid string) wire.Description {
	h.T.Helper()
	var v converter.EncodedValue
	var err error
	if wid == "" {
		v, err = h.Env.QueryWorkflow(wire.QueryDescribe)
	} else {
		v, err = h.Env.QueryWorkflowByID(wid, wire.QueryDescribe)
	}
	require.NoError(h.T, err)
	var d wire.Description
	require.NoError(h.T, v.Get(&d))
	return d
}
