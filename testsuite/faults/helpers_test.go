package faults

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/wire"
)

// opTimeout bounds every call of a test.
const opTimeout = 90 * time.Second

// setupHookName is the setup hook activity the tests' workers register; it
// runs the env's onSetup.
const setupHookName = "FaultsSetupHook"

// env is one test's task queue, store root and client; its workers are
// started with startWorker.
type env struct {
	t     *testing.T
	ctx   context.Context
	tq    string
	root  string
	comp  jsonl.Compression
	c     *client.Client
	store *jsonl.Store // a fault-free view of the root, as another process sees it

	mu      sync.Mutex
	onSetup func()
	ids     []string
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9]+`)

func newEnv(t *testing.T, comp jsonl.Compression) *env {
	t.Helper()
	name := strings.Trim(unsafeChars.ReplaceAllString(t.Name(), "-"), "-")
	// The test's deadline: 3*opTimeout, or less when go test's -timeout
	// ends sooner.
	ctx := testdeadline.Context(t, 3*opTimeout)
	e := &env{t: t, ctx: ctx, tq: "faults-" + runTag + "-" + name, root: t.TempDir(), comp: comp}
	e.c = client.New(temporalClient, client.Options{TaskQueue: e.tq})
	st, err := jsonl.NewStore(jsonl.Options{Root: e.root, Compression: comp, Logger: discardLogger()})
	require.NoError(t, err)
	e.store = st
	t.Cleanup(e.cleanup)
	return e
}

// id returns a session id unique to this run.
func (e *env) id(name string) string {
	id := name + "-" + runTag
	e.mu.Lock()
	e.ids = append(e.ids, id)
	e.mu.Unlock()
	return id
}

// cleanup terminates the test's session workflows that still run.
func (e *env) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.mu.Lock()
	ids := append([]string(nil), e.ids...)
	e.mu.Unlock()
	for _, id := range ids {
		wid := wire.WorkflowID(id)
		desc, err := temporalClient.DescribeWorkflow(ctx, wid, "")
		if err == nil && desc.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			_ = temporalClient.TerminateWorkflow(ctx, wid, "", "faults test cleanup")
		}
	}
}

// setOnSetup sets what the setup hook does (nil: nothing).
func (e *env) setOnSetup(fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onSetup = fn
}

func (e *env) setupHook(ctx context.Context, in wire.SetupInput) (workflows.SetupResult, error) {
	e.mu.Lock()
	fn := e.onSetup
	e.mu.Unlock()
	if fn != nil {
		fn()
	}
	return workflows.SetupResult{}, nil
}

// startWorker runs a worker over the env's task queue and store root whose
// store works through fsys (nil: the OS filesystem), and waits until it
// polls. It is stopped when the test ends.
func (e *env) startWorker(fsys jsonl.FS) *workerapp.Running {
	e.t.Helper()
	cfg := workerapp.DefaultConfig()
	cfg.Client = temporalClient
	cfg.TaskQueue = e.tq
	cfg.StoreRoot = e.root
	cfg.Compression = e.comp
	cfg.StoreFS = fsys
	cfg.MetricsAddress = ""
	cfg.StopTimeout = 10 * time.Second
	cfg.AppendWindow = 10 * time.Millisecond
	cfg.Register = func(r worker.Registry) {
		r.RegisterActivityWithOptions(e.setupHook, activity.RegisterOptions{Name: setupHookName})
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r, err := workerapp.Start(ctx, cfg, discardLogger())
	if err != nil {
		e.t.Fatalf("the worker did not start: %v", err)
	}
	e.t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			e.t.Errorf("worker: %v", err)
		}
	})
	return r
}

// options are the session options of the tests: a short append window and
// few attempts, so a persistent fault exhausts the retries in about a
// second (the retry policy starts at one second).
func options(attempts int32) *wire.Options {
	return &wire.Options{AppendWindowMs: 10, MaxAttempts: attempts, ActivityTimeoutMs: 60_000}
}

// clientError asserts that err is a *client.Error of type typ whose
// message contains text, and returns the message.
func clientError(t *testing.T, err error, typ, text string) string {
	t.Helper()
	require.Error(t, err)
	var ce *client.Error
	require.True(t, errors.As(err, &ce), "not a *client.Error: %T %v", err, err)
	require.Equal(t, typ, ce.Type, "error type of %q", ce.Message)
	require.Contains(t, ce.Message, text)
	return ce.Message
}

// events reads the stored events of id through a fault-free read handle.
func (e *env) events(id string) []session.Event {
	e.t.Helper()
	h, err := e.store.Open(e.ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(e.t, err)
	defer h.Close(e.ctx)
	evs, err := h.Read(e.ctx, 0, -1)
	require.NoError(e.t, err)
	return evs
}

// logBytes returns the raw content of id's log file.
func (e *env) logBytes(id string) []byte {
	e.t.Helper()
	snap, err := e.store.Stat(e.ctx, id)
	require.NoError(e.t, err)
	require.NotNil(e.t, snap, "session %q is not stored", id)
	b, err := os.ReadFile(snap.Path)
	require.NoError(e.t, err)
	return b
}

// lease returns id's write lease, nil when none is held.
func (e *env) lease(id string) *wire.Lease {
	e.t.Helper()
	l, err := e.store.LeaseOf(e.ctx, id)
	require.NoError(e.t, err)
	return l
}

// requireNothingStored asserts that no log, no lease and no listing exist
// for id.
func (e *env) requireNothingStored(id string) {
	e.t.Helper()
	snap, err := e.store.Stat(e.ctx, id)
	require.NoError(e.t, err)
	require.Nil(e.t, snap, "session %q is stored", id)
	require.Nil(e.t, e.lease(id), "a lease is held on %q", id)
	list, err := e.store.List(e.ctx)
	require.NoError(e.t, err)
	for _, s := range list {
		require.NotEqual(e.t, id, s.Header.ID, "session %q is listed", id)
	}
}

// requireRolledBack asserts the Describe query of a failed run: closed,
// handle closed, nothing published, no compensation failed, the failure
// recorded with its type.
func (e *env) requireRolledBack(id, typ string) {
	e.t.Helper()
	// The client's Create and Resume return the failure as soon as WaitReady
	// reports it, which is before the rollback ran: wait for the run.
	runErr := temporalClient.GetWorkflow(e.ctx, wire.WorkflowID(id), "").Get(e.ctx, nil)
	var app *temporal.ApplicationError
	require.True(e.t, errors.As(runErr, &app), "the run did not fail with an application error: %v", runErr)
	require.Equal(e.t, typ, app.Type())
	d, err := e.c.Describe(e.ctx, id)
	require.NoError(e.t, err)
	require.Equal(e.t, wire.PhaseClosed, d.Phase)
	require.False(e.t, d.HandleOpen)
	require.Empty(e.t, d.Lifecycle, "nothing is published")
	require.Empty(e.t, d.CompensationErrors)
	require.NotNil(e.t, d.Failure)
	require.Equal(e.t, typ, d.Failure.Type)
}

// requireSameEvents asserts that got is exactly want, compared in their
// encoding.
func requireSameEvents(t *testing.T, want, got []session.Event) {
	t.Helper()
	require.Equal(t, len(want), len(got), "event count")
	for i := range want {
		a, err := want[i].MarshalJSON()
		require.NoError(t, err)
		b, err := got[i].MarshalJSON()
		require.NoError(t, err)
		require.JSONEq(t, string(a), string(b), "event %d", i)
	}
}

// ev builds an event with a fixed clock.
func ev(t *testing.T, typ string, seq int64, data any) session.Event {
	t.Helper()
	e, err := session.NewEvent(typ, seq, 1_700_000_000_000+seq, data)
	require.NoError(t, err)
	return e
}

// turn is a complete turn of two events starting at seq.
func turn(t *testing.T, seq, n int64) []session.Event {
	return []session.Event{
		ev(t, wire.TypeTurnStart, seq, map[string]any{"turn": n}),
		ev(t, wire.TypeTurnEnd, seq+1, map[string]any{"turn": n, "reason": map[string]any{"kind": "completed"}}),
	}
}

// create creates a live session seeded with one turn (its log is
// materialized at the commit point) and returns it with the stored
// events, all acknowledged by the create.
func (e *env) create(id string, attempts int32) (*client.Session, []session.Event) {
	e.t.Helper()
	s, err := e.c.Create(e.ctx, wire.CreateSessionRequest{SessionID: id, Seed: session.WireEvents(turn(e.t, 0, 1)), Options: options(attempts)})
	require.NoError(e.t, err)
	stored := e.events(id)
	require.Len(e.t, stored, int(s.NextSeq))
	return s, stored
}
