package workflows_test

// The identity of a session's workflow: its id, a dead owner forfeited on
// resume, and validation errors never retried.

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestForeignWorkflowIDRefused(t *testing.T) {
	t.Run("create", func(t *testing.T) {
		h := sessiontest.NewHarness(t).RunUnder("wrong-id")
		h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "cli-x"})
		app := sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), `session "cli-x" must run under workflow id "session/cli-x", not "wrong-id" (docs/API.md: Workflow ids)`)
		require.Equal(t, "InvalidArgument", app.Type())
		require.True(t, app.NonRetryable())
		require.Empty(t, h.StartedNames(), "no activity runs")
		sessiontest.RequireErased(t, h.Store, "cli-x")
	})
	t.Run("resume", func(t *testing.T) {
		h := sessiontest.NewHarness(t).RunUnder("session/other")
		sessiontest.Persisted(t, h.Store, "cli-x", "")
		h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "cli-x"})
		app := sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), `session "cli-x" must run under workflow id "session/cli-x", not "session/other" (docs/API.md: Workflow ids)`)
		require.Equal(t, "InvalidArgument", app.Type())
		require.Empty(t, h.StartedNames(), "no activity runs")
	})
	t.Run("unescaped non-ASCII", func(t *testing.T) {
		h := sessiontest.NewHarness(t).RunUnder("session/é")
		h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "é"})
		sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), `session "é" must run under workflow id "session/%C3%A9", not "session/é" (docs/API.md: Workflow ids)`)
		require.Empty(t, h.StartedNames())
	})
}

func TestIDTooLongRefusedBeforeAnyActivity(t *testing.T) {
	for name, id := range map[string]string{
		"ascii":     strings.Repeat("a", 300),
		"non-ascii": strings.Repeat("é", 52),
	} {
		t.Run(name, func(t *testing.T) {
			h := sessiontest.NewHarness(t)
			h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id})
			app := sessiontest.AppErr(t, h.Env.GetWorkflowError())
			require.Equal(t, "InvalidArgument", app.Type())
			require.True(t, app.NonRetryable())
			require.Contains(t, app.Message(), "session id is too long: it encodes to a ")
			require.Contains(t, app.Message(), "the store's limit is 255 bytes")
			require.Empty(t, h.StartedNames(), "no activity runs, none is retried")

			r := sessiontest.NewHarness(t)
			r.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: id})
			app = sessiontest.AppErr(t, r.Env.GetWorkflowError())
			require.Equal(t, "InvalidArgument", app.Type())
			require.Contains(t, app.Message(), "the store's limit is 255 bytes")
			require.Empty(t, r.StartedNames())
		})
	}
}

func TestNonASCIISessionID(t *testing.T) {
	h := sessiontest.NewHarness(t)
	ready, disp := h.ReadyThenDispose(time.Second, "")
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "日本"})
	require.NoError(t, h.Env.GetWorkflowError())
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, "日本", info.SessionID)
	require.Equal(t, "session/%E6%97%A5%E6%9C%AC", info.WorkflowID)
	var dr wire.DisposeResult
	disp.Decode(t, &dr)
	sessiontest.RequireErased(t, h.Store, "日本") // created, never written, disposed
}

// ownerTemporal is a Temporal client that knows the executions of the
// workflow ids it is given; the resume's own run is the latest (running)
// execution of its workflow id once it asks.
type ownerTemporal struct {
	client.Client
	mu      sync.Mutex
	execs   map[string]enumspb.WorkflowExecutionStatus // "wid@rid" → status
	latest  map[string]string                          // wid → latest run id
	lookups []string
}

func (f *ownerTemporal) DescribeWorkflow(_ context.Context, wid, rid string) (*client.WorkflowExecutionDescription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups = append(f.lookups, wid+"@"+rid)
	if rid == "" {
		rid = f.latest[wid]
	}
	st, ok := f.execs[wid+"@"+rid]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &client.WorkflowExecutionDescription{RawResponse: &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: rid}, Status: st}}}, nil
}

// withOwnerTemporal gives the harness's activities f, and makes the
// resume's own run the running latest execution of its workflow id.
func withOwnerTemporal(h *sessiontest.Harness, f *ownerTemporal) {
	h.Acts.Temporal = f
	h.OnStarted = func(name string) {
		if name != wire.ForfeitDeadOwnerName {
			return
		}
		var in activities.ForfeitInput
		h.StartedArg(name, h.Count(name)-1, &in)
		f.mu.Lock()
		f.execs[in.Self.WorkflowID+"@"+in.Self.RunID] = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		f.latest[in.Self.WorkflowID] = in.Self.RunID
		f.mu.Unlock()
	}
}

// deadOwned stores session id as a workflow that died while live leaves it:
// materialized, leased by handle h-old of owner.
func deadOwned(t *testing.T, st *jsonl.Store, id string, owner jsonl.Owner) {
	t.Helper()
	ctx := context.Background()
	hd, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 1}, jsonl.CreateOptions{HandleID: "h-old", Owner: owner})
	require.NoError(t, err)
	require.NoError(t, hd.Append(ctx, []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}))
}

func TestResumeForfeitsDeadOwner(t *testing.T) {
	h := sessiontest.NewHarness(t)
	deadOwned(t, h.Store, "k", jsonl.Owner{WorkflowID: "session/k", RunID: "run-old"})
	f := &ownerTemporal{execs: map[string]enumspb.WorkflowExecutionStatus{"session/k@run-old": enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}, latest: map[string]string{}}
	withOwnerTemporal(h, f)
	ready, disp := h.ReadyThenDispose(time.Second, "")
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "k"})
	require.NoError(t, h.Env.GetWorkflowError())
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, int64(3), info.NextSeq, "two stored events and the end-seed marker")
	var dr wire.DisposeResult
	disp.Decode(t, &dr)
	require.Equal(t, []string{wire.OpenHandleName, wire.ForfeitDeadOwnerName, wire.OpenHandleName}, h.StartedNames()[:3])
	var first, second activities.OpenHandleInput
	h.StartedArg(wire.OpenHandleName, 0, &first)
	h.StartedArg(wire.OpenHandleName, 1, &second)
	require.Equal(t, first.HandleID, second.HandleID, "the open is tried again with the handle id chosen first")
	require.Equal(t, []string{"session/k@", "session/k@run-old"}, f.lookups)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "k")))
	sessiontest.RequireReleased(t, h.Store, "k")
}

func TestResumeKeepsLiveOwner(t *testing.T) {
	h := sessiontest.NewHarness(t)
	deadOwned(t, h.Store, "k", jsonl.Owner{WorkflowID: "session/k", RunID: "run-other-namespace"})
	// The owner's run is unknown to this namespace: it may be alive there.
	f := &ownerTemporal{execs: map[string]enumspb.WorkflowExecutionStatus{}, latest: map[string]string{}}
	withOwnerTemporal(h, f)
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "k"})
	app := sessiontest.AppErr(t, h.Env.GetWorkflowError())
	require.Equal(t, "SessionAlreadyOwned", app.Type())
	require.True(t, app.NonRetryable())
	require.Equal(t, `session "k" is already owned by an active write handle (handle "h-old" of workflow "session/k" run "run-other-namespace", host "`+hostname(t)+`" pid `+pid()+`): `+
		"Temporal cannot tell whether that owner is gone (no such execution in this namespace); once it is, run `starter unlock --id \"k\" --force`", app.Message())
	require.Equal(t, []string{wire.OpenHandleName, wire.ForfeitDeadOwnerName, wire.CloseHandleName}, h.StartedNames())
	lease, err := h.Store.LeaseOf(context.Background(), "k")
	require.NoError(t, err)
	require.Equal(t, "h-old", lease.HandleID, "the lease is kept")
}

func TestResumeForfeitTurnedOff(t *testing.T) {
	h := sessiontest.NewHarness(t)
	deadOwned(t, h.Store, "k", jsonl.Owner{WorkflowID: "session/k", RunID: "run-old"})
	f := &ownerTemporal{execs: map[string]enumspb.WorkflowExecutionStatus{"session/k@run-old": enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}, latest: map[string]string{}}
	withOwnerTemporal(h, f)
	off := false
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "k", ForfeitDeadOwner: &off})
	app := sessiontest.AppErr(t, h.Env.GetWorkflowError())
	require.Equal(t, "SessionAlreadyOwned", app.Type())
	require.Equal(t, []string{wire.OpenHandleName, wire.CloseHandleName}, h.StartedNames())
	require.Empty(t, f.lookups)
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	require.NoError(t, err)
	return h
}

func pid() string { return strconv.Itoa(os.Getpid()) }

// TestValidationErrorsAreNeverRetried: a hook (or an activity of another
// SDK) that returns InvalidArgument without marking it non-retryable is not
// tried again.
func TestValidationErrorsAreNeverRetried(t *testing.T) {
	h := sessiontest.NewHarness(t)
	h.Hooks.SetupFunc = func(context.Context, wire.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{}, temporal.NewApplicationError("setup input refused", "InvalidArgument")
	}
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "v1", Hooks: sessiontest.AllHooks})
	app := sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "setup input refused")
	require.Equal(t, "InvalidArgument", app.Type())
	require.Equal(t, 1, h.Count(sessiontest.HookSetup), "the validation failure was retried")
}
