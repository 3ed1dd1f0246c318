package workflows_test

// Seed 000, groups "creation and resume cancellation edges" and
// "configured-start failure edges" (S0-35..S0-45, docs/CONFORMANCE.md)
// in their Temporal form: a caller's AbortSignal is the Abort signal followed by
// cancellation; a pre-aborted call is a workflow whose abort is in its first
// workflow task; the loop's teardown is its cancellation.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// requireAbortError checks the normalized abort (LIFECYCLE.md §3): an Error
// reason is returned as that error; any other reason gives `creation
// aborted` carrying the raw reason.
func requireAbortError(t *testing.T, err error, id, reason string, isError bool) {
	t.Helper()
	if isError {
		app := sessiontest.RequireMessage(t, err, reason)
		require.Equal(t, "Error", app.Type())
		return
	}
	app := sessiontest.RequireMessage(t, err, `agent "`+id+`" creation aborted`)
	require.Equal(t, "AbortError", app.Type())
	var raw string
	require.NoError(t, app.Details(&raw))
	require.Equal(t, reason, raw)
}

var reasons = []struct {
	name    string
	reason  string
	isError bool
}{
	{"error", "caller stopped", true},
	{"string", "user pressed escape", false},
}

// S0-35: a pre-aborted create fails with the normalized reason without
// creating anything.
func TestS0_35_PreAbortedCreate(t *testing.T) {
	for _, r := range reasons {
		t.Run(r.name, func(t *testing.T) {
			h := sessiontest.NewHarness(t).WithID("s35")
			h.At(0, func() { h.AbortNow("", r.reason, r.isError) })
			h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s35", Hooks: sessiontest.AllHooks})
			requireAbortError(t, h.Env.GetWorkflowError(), "s35", r.reason, r.isError)
			require.Equal(t, 0, h.Count(wire.CreateHandleName))
			require.Empty(t, h.Hooks.Log())
			require.Empty(t, h.Describe("").Lifecycle)
			sessiontest.RequireErased(t, h.Store, "s35")
		})
	}
}

// S0-36: an abort with a string reason while setup is pending fails
// `creation aborted`; nothing is registered; nothing is stored.
func TestS0_36_StringAbortDuringSetup(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s36")
	h.Env.OnActivity(sessiontest.HookSetup, mock.Anything, mock.Anything).After(time.Hour).Return(workflows.SetupResult{}, nil)
	h.At(time.Second, func() { h.AbortNow("", "no longer needed", false) })
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s36", Seed: []session.Event{}, Hooks: sessiontest.AllHooks})
	requireAbortError(t, h.Env.GetWorkflowError(), "s36", "no longer needed", false)
	require.Equal(t, 0, h.Count(sessiontest.HookPublish))
	require.Empty(t, h.Describe("").Lifecycle)
	sessiontest.RequireErased(t, h.Store, "s36")
}

// S0-37: setup itself aborts the caller's signal with an Error: the create
// fails with that Error; nothing is registered.
func TestS0_37_SetupAbortsWithError(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s37")
	h.OnStarted = func(name string) {
		if name == sessiontest.HookSetup {
			h.AbortNow("", "setup pulled the plug", true)
		}
	}
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s37", Hooks: sessiontest.AllHooks})
	requireAbortError(t, h.Env.GetWorkflowError(), "s37", "setup pulled the plug", true)
	require.Equal(t, 0, h.Count(sessiontest.HookPublish))
	require.Empty(t, h.Describe("").Lifecycle)
	sessiontest.RequireErased(t, h.Store, "s37")
}

// S0-38: a pre-aborted resume fails with the normalized reason without
// opening anything.
func TestS0_38_PreAbortedResume(t *testing.T) {
	for _, r := range reasons {
		t.Run(r.name, func(t *testing.T) {
			h := sessiontest.NewHarness(t).WithID("s38")
			sessiontest.Persisted(t, h.Store, "s38", "")
			h.At(0, func() { h.AbortNow("", r.reason, r.isError) })
			h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s38", Hooks: sessiontest.AllHooks})
			requireAbortError(t, h.Env.GetWorkflowError(), "s38", r.reason, r.isError)
			require.Equal(t, 0, h.Count(wire.OpenHandleName))
			require.Empty(t, h.Hooks.Log())
			require.Equal(t, []string{"turn/start", "turn/end"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "s38")))
			sessiontest.RequireReleased(t, h.Store, "s38")
		})
	}
}

// S0-39: an abort fired while the closers are being appended (after the
// open settled): the repair completes and stays stored, and the
// pre-publication check refuses the resume with the normalized reason.
func TestS0_39_AbortDuringCloserAppend(t *testing.T) {
	for _, r := range reasons {
		t.Run(r.name, func(t *testing.T) {
			h := sessiontest.NewHarness(t).WithID("s39")
			sessiontest.WriteStored(t, h.Store, wire.Header{ID: "s39", CreatedAt: 1}, 0, []session.Event{sessiontest.TurnStart(t, 0, 1)})
			h.OnStarted = func(name string) {
				if name == wire.RepairName {
					h.AbortNow("", r.reason, r.isError)
				}
			}
			h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s39", Hooks: sessiontest.AllHooks})
			requireAbortError(t, h.Env.GetWorkflowError(), "s39", r.reason, r.isError)
			require.Empty(t, h.Hooks.Log())
			require.Empty(t, h.Describe("").Lifecycle)
			require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "s39")))
			sessiontest.RequireReleased(t, h.Store, "s39")
		})
	}
}

// S0-40: the caller aborts while the backend create hangs: the create fails
// with the reason at once; the close of the handle id ran once and its
// rejection was swallowed; when the create lands (later, while the host
// still runs) it finds its handle id revoked and leaves nothing: no lease,
// nothing stored, the id reusable.
func TestS0_40_AbortWhileCreateHangs(t *testing.T) {
	h := sessiontest.NewHarness(t)
	var lateErr error
	lateDone := false
	h.Env.OnActivity(h.Acts.CreateHandle, mock.Anything, mock.Anything).After(time.Hour).Return(
		func(ctx context.Context, in activities.CreateHandleInput) (activities.HandleInfo, error) {
			info, err := h.Acts.CreateHandle(context.WithoutCancel(ctx), in)
			lateErr, lateDone = err, true
			return info, err
		})
	h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
	start := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "s40", Hooks: sessiontest.AllHooks}})
	ready := h.UpdateNoWaitAt(time.Second, wire.WorkflowID("s40"), wire.UpdateWaitReady)
	// The caller aborts once the create is pending.
	h.AtStarted(time.Second, wire.CreateHandleName, func() { h.AbortNow(wire.WorkflowID("s40"), "caller stopped", true) })
	var settled wire.Description
	var settledEarly bool
	h.At(2*time.Second, func() {
		settled = h.Describe(wire.WorkflowID("s40"))
		settledEarly = !lateDone
	})
	h.At(2*time.Hour, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	start.OK(t)
	requireAbortError(t, ready.Failure(t), "s40", "caller stopped", true)
	require.True(t, settledEarly, "the create failed only after the backend create landed")
	require.Equal(t, wire.PhaseClosed, settled.Phase)
	require.Empty(t, settled.Lifecycle)
	require.Len(t, settled.CompensationErrors, 1)
	require.Equal(t, "close exploded", settled.CompensationErrors[0].Error.Message)
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Len(t, res.Children, 1)
	require.Equal(t, "caller stopped", res.Children[0].Error.Message)

	require.True(t, lateDone, "the create never landed")
	require.Equal(t, "HandleRevoked", sessiontest.AppErr(t, lateErr).Type())
	var in activities.CreateHandleInput
	h.StartedArg(wire.CreateHandleName, 0, &in)
	require.Equal(t, []string{in.HandleID}, h.ClosedHandles())
	sessiontest.RequireErased(t, h.Store, "s40")
}

// S0-40, failing after acquisition: the backend create took the lease and
// published the pending session, and then the step failed (its reply was
// lost): the create fails with that error, the rollback closes the handle
// id, and nothing remains: no lease, nothing stored, the id reusable.
func TestS0_40_CreateFailsAfterAcquiringTheLease(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s40b")
	var leaseDuring *wire.Lease
	h.Env.OnActivity(h.Acts.CreateHandle, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.CreateHandleInput) (activities.HandleInfo, error) {
			if _, err := h.Acts.CreateHandle(ctx, in); err != nil {
				return activities.HandleInfo{}, err
			}
			var err error
			leaseDuring, err = h.Store.LeaseOf(ctx, "s40b")
			if err != nil {
				return activities.HandleInfo{}, err
			}
			return activities.HandleInfo{}, sessiontest.PlainErr("create reply lost")
		})
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s40b", Seed: []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}, Hooks: sessiontest.AllHooks})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "create reply lost")
	require.NotNil(t, leaseDuring, "the create did not take the lease")
	var in activities.CreateHandleInput
	h.StartedArg(wire.CreateHandleName, 0, &in)
	require.Equal(t, in.HandleID, leaseDuring.HandleID)
	require.Equal(t, []string{in.HandleID}, h.ClosedHandles())
	d := h.Describe("")
	require.Empty(t, d.Lifecycle)
	require.Empty(t, d.CompensationErrors)
	require.Empty(t, h.Hooks.Log())
	sessiontest.RequireErased(t, h.Store, "s40b")
}

// S0-41: the loop deactivates right after the write open (its own
// deactivation path, not an abort sent by hand): the resume fails `agent
// loop is not active`, the handle was closed, nothing was published, and a
// retry resume succeeds.
func TestS0_41_LoopInactiveAfterOpen(t *testing.T) {
	h := sessiontest.NewHarness(t)
	sessiontest.Persisted(t, h.Store, "s41", "")
	h.OnCompleted = func(name string, err error) {
		if name == wire.OpenHandleName && err == nil {
			h.Env.CancelWorkflow()
		}
	}
	start := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Resume: &wire.ResumeSessionRequest{ResumeSessionID: "s41", Hooks: sessiontest.AllHooks}})
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	start.OK(t)
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.False(t, res.Active)
	require.Len(t, res.Children, 1)
	require.False(t, res.Children[0].WasLive)
	require.Equal(t, wire.ErrorInfo{Message: "agent loop is not active", Type: "LoopInactive"}, *res.Children[0].Error)
	require.Equal(t, 1, h.Count(wire.CloseHandleName))
	require.Equal(t, 0, h.Count(wire.RepairName), "the resume went on after the deactivation")
	require.Empty(t, h.Hooks.Log())
	sessiontest.RequireReleased(t, h.Store, "s41")
	sessiontest.ResumeAndDispose(t, h.Store, "s41")
}

// S0-42: the whole host is torn down while a resume's open hangs, and the
// open lands after the teardown began (while another session is still
// disposing): the resume fails promptly, the late open is refused and
// releases what it took, its handle id was closed once, and the teardown
// completes with every lease released.
func TestS0_42_TeardownWhileOpenHangs(t *testing.T) {
	h := sessiontest.NewHarness(t)
	sessiontest.Persisted(t, h.Store, "s42", "")
	var lateErr error
	lateDone := false
	h.Env.OnActivity(h.Acts.OpenHandle, mock.Anything, mock.Anything).After(time.Hour).Return(
		func(ctx context.Context, in activities.OpenHandleInput) (activities.HandleInfo, error) {
			info, err := h.Acts.OpenHandle(context.WithoutCancel(ctx), in)
			lateErr, lateDone = err, true
			return info, err
		})
	// A live neighbour whose disposal outlasts the late open keeps the
	// teardown running.
	h.Env.OnActivity(sessiontest.HookDispose, mock.Anything, mock.Anything).After(2 * time.Hour).Return(nil)
	neighbour := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{
		SessionID: "neighbour", Hooks: wire.Hooks{DisposeActivity: sessiontest.HookDispose}}})
	neighbourReady := h.UpdateAt(time.Second, wire.WorkflowID("neighbour"), wire.UpdateWaitReady)
	start := h.UpdateAt(2*time.Second, "", wire.UpdateStart, workflows.StartRequest{Resume: &wire.ResumeSessionRequest{ResumeSessionID: "s42"}})
	h.AtStarted(3*time.Second, wire.OpenHandleName, h.Env.CancelWorkflow)
	var midTeardown wire.LoopDescription
	h.At(10*time.Second, func() {
		v, err := h.Env.QueryWorkflow(wire.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&midTeardown))
	})
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	// Prompt: settled long before the late open and the neighbour.
	require.False(t, midTeardown.Active)
	require.Equal(t, "s42", midTeardown.Children[1].SessionID)
	require.Equal(t, wire.ChildSettled, midTeardown.Children[1].State)
	require.Equal(t, "agent loop is not active", midTeardown.Children[1].Error.Message)
	require.NotEqual(t, wire.ChildSettled, midTeardown.Children[0].State)
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Equal(t, wire.ChildSettled, res.Children[0].State)
	require.True(t, lateDone, "the late open never landed")
	require.Equal(t, "HandleRevoked", sessiontest.AppErr(t, lateErr).Type())
	var in activities.OpenHandleInput
	h.StartedArg(wire.OpenHandleName, 0, &in)
	closes := 0
	for _, hid := range h.ClosedHandles() {
		if hid == in.HandleID {
			closes++
		}
	}
	require.Equal(t, 1, closes)
	require.Equal(t, []string{"turn/start", "turn/end"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "s42")))
	neighbour.OK(t)
	neighbourReady.OK(t)
	start.OK(t)
	sessiontest.RequireReleased(t, h.Store, "s42")
	sessiontest.RequireErased(t, h.Store, "neighbour")
}

// S0-43: a resume whose open hangs, aborted by the caller with a string:
// `creation aborted`, nothing registered; the open lands later (the host
// still runs), is refused and releases what it took.
func TestS0_43_StringAbortWhileOpenHangs(t *testing.T) {
	h := sessiontest.NewHarness(t)
	sessiontest.Persisted(t, h.Store, "s43", "")
	late := lateOpen(h, time.Hour)
	start := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Resume: &wire.ResumeSessionRequest{ResumeSessionID: "s43", Hooks: sessiontest.AllHooks}})
	ready := h.UpdateNoWaitAt(time.Second, wire.WorkflowID("s43"), wire.UpdateWaitReady)
	// The caller aborts once the open is pending.
	h.AtStarted(time.Second, wire.OpenHandleName, func() { h.AbortNow(wire.WorkflowID("s43"), "never mind", false) })
	var settledEarly bool
	h.At(2*time.Second, func() { settledEarly = !late.done })
	h.At(2*time.Hour, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	start.OK(t)
	requireAbortError(t, ready.Failure(t), "s43", "never mind", false)
	require.True(t, settledEarly)
	require.Empty(t, h.Hooks.Log())
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Len(t, res.Children, 1)
	require.False(t, res.Children[0].WasLive)
	requireLateOpenReleased(t, h, late, "s43")
}

// S0-44: a configured restore whose open fails with a plain error: exactly
// one config-start-failed entry with that error, a warning containing
// `config-driven restore`, and no fallback create shadows the artifact.
// The same holds for a really corrupt log.
func TestS0_44_ConfigRestoreNeverShadows(t *testing.T) {
	t.Run("plain error", func(t *testing.T) {
		h := sessiontest.NewHarness(t)
		sessiontest.Persisted(t, h.Store, "s44", "")
		h.Env.OnActivity(h.Acts.OpenHandle, mock.Anything, mock.Anything).Return(activities.HandleInfo{}, sessiontest.PlainErr("artifact corrupt"))
		h.WaitFor(5*time.Second, "the configured restore settled", h.LoopChildrenSettled(1))
		h.At(5*time.Second, h.Env.CancelWorkflow)
		h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{Agents: []wire.AgentConfig{{ID: "main", SessionID: "s44"}}})
		require.NoError(t, h.Env.GetWorkflowError())
		var res wire.LoopDescription
		require.NoError(t, h.Env.GetWorkflowResult(&res))
		require.Equal(t, []wire.ConfigStartFailure{{ConfigID: "main", SessionID: "s44", Mode: "restore", Error: wire.ErrorInfo{Message: "artifact corrupt", Type: "Error"}}}, res.ConfigStartFailures)
		warns := h.Logs.Warnings("config-driven restore")
		require.Len(t, warns, 1)
		require.Contains(t, warns[0], `agent "main": config-driven restore of "s44" failed: artifact corrupt`)
		require.Equal(t, 0, h.Count(wire.CreateHandleName))
		require.Len(t, res.Children, 1)
		require.Equal(t, "resume", res.Children[0].Mode)
		require.Equal(t, []string{"turn/start", "turn/end"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "s44")))
		sessiontest.RequireReleased(t, h.Store, "s44")
	})
	t.Run("corrupt log", func(t *testing.T) {
		h := sessiontest.NewHarnessOn(t, sessiontest.NewStore(t, jsonl.CompressionNone))
		sessiontest.Persisted(t, h.Store, "s44", "")
		snap, err := h.Store.Stat(context.Background(), "s44")
		require.NoError(t, err)
		sessiontest.CorruptFirstEvent(t, snap.Path)
		h.WaitFor(5*time.Second, "the configured restore settled", h.LoopChildrenSettled(1))
		h.At(5*time.Second, h.Env.CancelWorkflow)
		h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{Agents: []wire.AgentConfig{{ID: "main", SessionID: "s44"}}})
		require.NoError(t, h.Env.GetWorkflowError())
		var res wire.LoopDescription
		require.NoError(t, h.Env.GetWorkflowResult(&res))
		require.Len(t, res.ConfigStartFailures, 1)
		require.Equal(t, "SessionCorrupt", res.ConfigStartFailures[0].Error.Type)
		require.Len(t, h.Logs.Warnings("config-driven restore"), 1)
		require.Equal(t, 0, h.Count(wire.CreateHandleName))
		lease, err := h.Store.LeaseOf(context.Background(), "s44")
		require.NoError(t, err)
		require.Nil(t, lease)
	})
	t.Run("not found falls back to create", func(t *testing.T) {
		h := sessiontest.NewHarness(t)
		h.WaitFor(5*time.Second, "the fallback create started", h.LoopChildStarted(2))
		ready := h.UpdateAt(5*time.Second, wire.WorkflowID("s44"), wire.UpdateWaitReady)
		h.At(10*time.Second, h.Env.CancelWorkflow)
		h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{Agents: []wire.AgentConfig{{ID: "main", SessionID: "s44", Cwd: "/w"}}})
		require.NoError(t, h.Env.GetWorkflowError())
		var res wire.LoopDescription
		require.NoError(t, h.Env.GetWorkflowResult(&res))
		require.Empty(t, res.ConfigStartFailures)
		require.Len(t, res.Children, 2)
		require.Equal(t, "resume", res.Children[0].Mode)
		require.Equal(t, "SessionNotFound", res.Children[0].Error.Type)
		require.Equal(t, "create", res.Children[1].Mode)
		require.True(t, res.Children[1].WasLive)
		var info wire.SessionInfo
		ready.Decode(t, &info)
		require.Equal(t, "/w", info.Header.Cwd)
		// The fallback session was never appended to: gone with the loop.
		sessiontest.RequireErased(t, h.Store, "s44")
	})
}

// S0-45: a configured resume whose open hangs; the loop is torn down, then
// the open rejects: no config-start-failed entry and no warning.
func TestS0_45_LateFailureAfterTeardownDropped(t *testing.T) {
	h := sessiontest.NewHarness(t)
	sessiontest.Persisted(t, h.Store, "s45", "")
	var lateErr error
	h.Env.OnActivity(h.Acts.OpenHandle, mock.Anything, mock.Anything).After(time.Hour).Return(
		func(context.Context, activities.OpenHandleInput) (activities.HandleInfo, error) {
			lateErr = sessiontest.PlainErr("open rejected late")
			return activities.HandleInfo{}, lateErr
		})
	// A neighbour disposing slowly keeps the loop alive past the rejection.
	h.Env.OnActivity(sessiontest.HookDispose, mock.Anything, mock.Anything).After(2 * time.Hour).Return(nil)
	neighbour := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{
		SessionID: "neighbour", Hooks: wire.Hooks{DisposeActivity: sessiontest.HookDispose}}})
	neighbourReady := h.UpdateAt(time.Second, wire.WorkflowID("neighbour"), wire.UpdateWaitReady)
	h.AtStarted(2*time.Second, wire.OpenHandleName, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{Agents: []wire.AgentConfig{{ID: "main", ResumeSessionID: "s45"}}})
	require.NoError(t, h.Env.GetWorkflowError())
	require.Error(t, lateErr, "the open never rejected")
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Empty(t, res.ConfigStartFailures)
	require.Empty(t, h.Logs.Warnings("config-driven"))
	require.Equal(t, "agent loop is not active", res.Children[0].Error.Message)
	neighbour.OK(t)
	neighbourReady.OK(t)
	sessiontest.RequireReleased(t, h.Store, "s45")
}

// An abort that lands while session/created is being published is refused
// by the check that follows it: agent/created is never published.
func TestAbortBetweenPublications(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("pub")
	h.OnStarted = func(name string) {
		if name == sessiontest.HookPublish && h.Count(sessiontest.HookPublish) == 1 {
			h.AbortNow("", "late abort", false)
		}
	}
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "pub", Hooks: sessiontest.AllHooks})
	requireAbortError(t, h.Env.GetWorkflowError(), "pub", "late abort", false)
	require.Equal(t, []wire.LifecycleEntry{{Type: wire.EntrySessionCreated}}, h.Describe("").Lifecycle)
	require.NotContains(t, h.Hooks.Log(), wire.EntryAgentCreated)
	require.Contains(t, h.Hooks.Log(), "dispose:rollback")
	sessiontest.RequireErased(t, h.Store, "pub")
}
