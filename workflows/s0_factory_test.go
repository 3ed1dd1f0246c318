package workflows_test

// Seed 000, group "AgentLoop factory create/resume" (S0-01..S0-34,
// docs/CONFORMANCE.md) in their Temporal form (LIFECYCLE.md §1).

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// S0-01: a session/created publication hook failing with a non-Error value
// during resume: the resume fails with exactly that value, nothing is
// registered, and the write handle was closed.
func TestS0_01_PublishVetoNonErrorOnResume(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s01")
	sessiontest.Persisted(t, h.Store, "s01", "")
	h.Hooks.PublishFunc = func(_ context.Context, in wire.PublishInput) error {
		if in.Entry.Type == wire.EntrySessionCreated {
			return temporal.NewNonRetryableApplicationError("[object Object]", "NonError", nil, map[string]string{"source": "resume"})
		}
		return nil
	}
	ready := h.UpdateAt(0, "", wire.UpdateWaitReady)
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s01", Hooks: sessiontest.AllHooks})
	err := h.Env.GetWorkflowError()
	app := sessiontest.RequireMessage(t, err, "[object Object]")
	require.Equal(t, "NonError", app.Type())
	var detail map[string]string
	require.NoError(t, app.Details(&detail))
	require.Equal(t, map[string]string{"source": "resume"}, detail)
	// WaitReady returned the same failure.
	require.Equal(t, "NonError", sessiontest.AppErr(t, ready.Failure(t)).Type())
	d := h.Describe("")
	require.Equal(t, wire.PhaseClosed, d.Phase)
	require.Empty(t, d.Lifecycle)
	require.False(t, d.HandleOpen)
	require.Equal(t, 1, h.Count(wire.CloseHandleName))
	sessiontest.RequireReleased(t, h.Store, "s01")
}

// S0-02: create uses exactly the given id (workflow id session/<id>, no
// suffix) and keeps header.cwd.
func TestS0_02_CreateKeepsIDAndCwd(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s02")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "hi")})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s02", Meta: &wire.SessionMeta{Cwd: "/w"}})
	require.NoError(t, h.Env.GetWorkflowError())
	app.OK(t)
	disp.OK(t)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, "s02", info.SessionID)
	require.Equal(t, "session/s02", info.WorkflowID)
	require.Equal(t, "/w", info.Header.Cwd)
	list, err := h.Store.List(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "s02", list[0].Header.ID)
	require.Equal(t, "/w", list[0].Header.Cwd)
	key, err := jsonl.ProjectKey("/w")
	require.NoError(t, err)
	require.True(t, strings.Contains(list[0].Path, key), "stored under the cwd's project: %s", list[0].Path)
}

// S0-03: a second session with a live id is refused `already exists` and
// the store holds exactly one session.
func TestS0_03_DuplicateLiveID(t *testing.T) {
	h := sessiontest.NewHarness(t)
	create := workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "s03"}}
	first := h.UpdateAt(time.Second, "", wire.UpdateStart, create)
	ready := h.UpdateAt(2*time.Second, wire.WorkflowID("s03"), wire.UpdateWaitReady)
	second := h.UpdateAt(3*time.Second, "", wire.UpdateStart, create)
	var count int
	h.At(4*time.Second, func() {
		list, err := h.Store.List(context.Background())
		require.NoError(t, err)
		count = len(list)
	})
	h.At(5*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	var sr wire.StartResult
	first.Decode(t, &sr)
	require.Equal(t, "session/s03", sr.WorkflowID)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.ErrorContains(t, second.Rejection(t), `session "s03" already exists`)
	require.Equal(t, 1, count)
	require.Equal(t, 1, h.Count(wire.CreateHandleName))
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Len(t, res.Children, 1)
	// Never appended to, so the loop's teardown erased it.
	sessiontest.RequireErased(t, h.Store, "s03")
}

// S0-04: a create with a 2-event seed plus one live turn, disposed: the log
// is contiguous from 0 and holds the seed, the marker and turn 2.
func TestS0_04_SeedPlusLiveTurn(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s04")
	seed := []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 3, 2, "assistant text")})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s04", Seed: seed})
	require.NoError(t, h.Env.GetWorkflowError())
	app.OK(t)
	disp.OK(t)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, int64(3), info.NextSeq)
	require.Equal(t, int64(2), info.FirstLiveSeq)
	evs := sessiontest.Stored(t, h.Store, "s04")
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed", "turn/start", "step/start", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	var turns []int64
	turnEnd2 := false
	for _, e := range evs {
		switch e.Type {
		case wire.TypeTurnStart:
			ts, err := e.TurnStart()
			require.NoError(t, err)
			turns = append(turns, ts.Turn)
		case wire.TypeTurnEnd:
			te, err := e.TurnEnd()
			require.NoError(t, err)
			turnEnd2 = turnEnd2 || te.Turn == 2
		}
	}
	require.Equal(t, []int64{1, 2}, turns)
	require.True(t, turnEnd2)
	require.Contains(t, string(evs[5].Data), "assistant text")
}

// S0-05: the handle's close rejects after really closing: Dispose fails
// with that error, the registration is gone, ownership is released and the
// never-materialized session reads as not found.
func TestS0_05_DisposeCloseRejects(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s05")
	h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s05"})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "close exploded")
	ready.OK(t)
	sessiontest.RequireMessage(t, disp.Failure(t), "close exploded")
	d := h.Describe("")
	require.Equal(t, wire.PhaseClosed, d.Phase)
	require.False(t, d.HandleOpen)
	sessiontest.RequireErased(t, h.Store, "s05")
}

// S0-06: the dispose hook (the machine's scope) and the close both fail:
// an aggregate `agent "<id>" disposal failed` with the members in order.
func TestS0_06_DisposalAggregate(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s06")
	h.Hooks.DisposeFunc = func(context.Context, wire.DisposeInput) error { return sessiontest.PlainErr("scope exploded") }
	h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s06", Hooks: wire.Hooks{DisposeActivity: sessiontest.HookDispose}})
	ready.OK(t)
	app := sessiontest.AppErr(t, disp.Failure(t))
	require.Equal(t, "AggregateError", app.Type())
	require.Contains(t, app.Message(), `agent "s06" disposal failed`)
	var members []wire.ErrorInfo
	require.NoError(t, app.Details(&members))
	require.Equal(t, []string{"scope exploded", "close exploded"}, []string{members[0].Message, members[1].Message})
	require.Len(t, members, 2)
	require.Equal(t, "AggregateError", sessiontest.AppErr(t, h.Env.GetWorkflowError()).Type())
	require.Equal(t, wire.PhaseClosed, h.Describe("").Phase)
	// The close really closed: the never-appended session is gone.
	sessiontest.RequireErased(t, h.Store, "s06")
}

// S0-07: while the session lives a write open elsewhere is refused
// `already owned by an active write handle`; after a turn and disposal the
// turn is stored and a write open succeeds.
func TestS0_07_LiveOwnsTheLease(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s07")
	var ownedErr error
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	h.At(3*time.Second, func() {
		_, ownedErr = h.Store.Open(context.Background(), "s07", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "intruder"})
	})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s07"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	var ar wire.AppendResult
	app.Decode(t, &ar)
	require.Equal(t, int64(5), ar.NextSeq)
	disp.OK(t)
	require.ErrorIs(t, ownedErr, wire.ErrAlreadyOwned)
	require.Contains(t, ownedErr.Error(), "already owned by an active write handle")
	evs := sessiontest.Stored(t, h.Store, "s07")
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	sessiontest.RequireReleased(t, h.Store, "s07")
}

// S0-08: the create activity fails once: the create fails with it, nothing
// is registered, and the same id then creates fine.
func TestS0_08_CreateRejectsOnce(t *testing.T) {
	h := sessiontest.NewHarness(t)
	h.Env.OnActivity(h.Acts.CreateHandle, mock.Anything, mock.Anything).Return(activities.HandleInfo{}, sessiontest.PlainErr("create exploded")).Once()
	h.Env.OnActivity(h.Acts.CreateHandle, mock.Anything, mock.Anything).Return(h.Acts.CreateHandle)
	create := workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "s08", Seed: []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}}}
	start1 := h.UpdateAt(time.Second, "", wire.UpdateStart, create)
	var afterFirst wire.LoopDescription
	h.WaitFor(2*time.Second, "the first create settled", h.LoopChildrenSettled(1))
	h.At(2*time.Second, func() {
		v, err := h.Env.QueryWorkflow(wire.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&afterFirst))
		sessiontest.RequireErased(t, h.Store, "s08")
	})
	start2 := h.UpdateAt(3*time.Second, "", wire.UpdateStart, create)
	ready := h.UpdateAt(4*time.Second, wire.WorkflowID("s08"), wire.UpdateWaitReady)
	h.At(5*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	start1.OK(t)
	start2.OK(t)
	require.Len(t, afterFirst.Children, 1)
	require.Equal(t, wire.ChildSettled, afterFirst.Children[0].State)
	require.False(t, afterFirst.Children[0].WasLive)
	require.Equal(t, "create exploded", afterFirst.Children[0].Error.Message)
	require.Empty(t, afterFirst.Effects)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "s08")))
	sessiontest.RequireReleased(t, h.Store, "s08")
}

// S0-09: the seed append through the fresh handle fails: the create fails
// with it, the handle was closed, nothing is registered, and the
// never-materialized session is absent.
func TestS0_09_SeedAppendRejects(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s09")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, sessiontest.PlainErr("append exploded"))
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s09", Seed: []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}, Hooks: sessiontest.AllHooks})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "append exploded")
	require.Equal(t, 1, h.Count(wire.CloseHandleName))
	d := h.Describe("")
	require.Empty(t, d.Lifecycle)
	require.Equal(t, wire.PhaseClosed, d.Phase)
	require.NotContains(t, h.Hooks.Log(), wire.EntrySessionCreated)
	sessiontest.RequireErased(t, h.Store, "s09")
}

// S0-10: setup fails for a seeded create: stat reads nothing (the seed is
// stored only at the commit point); the same id and seed then create and
// stat is defined.
func TestS0_10_SetupFailsBeforeSeedStored(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s10")
	seed := []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}
	h.Hooks.SetupFunc = func(context.Context, wire.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{}, sessiontest.PlainErr("setup failed")
	}
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s10", Seed: seed, Hooks: sessiontest.AllHooks})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "setup failed")
	snap, err := h.Store.Stat(context.Background(), "s10")
	require.NoError(t, err)
	require.Nil(t, snap)
	require.Equal(t, []string{"setup:start", "dispose:rollback"}, h.Hooks.Log())
	sessiontest.RequireErased(t, h.Store, "s10")

	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("s10")
	ready := h2.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var snap2 *jsonl.Snapshot
	h2.At(2*time.Second, func() { snap2, err = h2.Store.Stat(context.Background(), "s10") })
	disp2 := h2.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s10", Seed: seed})
	require.NoError(t, h2.Env.GetWorkflowError())
	disp2.OK(t)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.NoError(t, err)
	require.NotNil(t, snap2)
	require.False(t, snap2.Pending)
}

// S0-11: with every close rejecting, maxTokens -1 is refused with the
// reference text after the handle exists (direct create, loop create and
// configured create); the close rejection is swallowed and recorded;
// nothing is registered; the id is reusable.
func TestS0_11_MaxTokensAfterHandle(t *testing.T) {
	t.Run("create", func(t *testing.T) {
		h := sessiontest.NewHarness(t).WithID("s11")
		h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
		h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s11", AgentOptions: &wire.AgentOptions{MaxTokens: sessiontest.F64(-1)}})
		app := sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "agent maxTokens must be a positive safe integer")
		require.Equal(t, "TypeError", app.Type())
		require.Equal(t, []string{wire.CreateHandleName, wire.CloseHandleName}, h.StartedNames())
		d := h.Describe("")
		require.Empty(t, d.Lifecycle)
		require.Equal(t, []wire.CompensationError{{Step: "close-handle", Error: wire.ErrorInfo{Message: "close exploded", Type: "Error"}}}, d.CompensationErrors)
		sessiontest.RequireErased(t, h.Store, "s11")
	})
	t.Run("loop", func(t *testing.T) {
		h := sessiontest.NewHarness(t)
		h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
		start := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{
			SessionID: "s11", AgentOptions: &wire.AgentOptions{MaxTokens: sessiontest.F64(-1)}}})
		h.WaitFor(3*time.Second, "both creates settled", h.LoopChildrenSettled(2))
		h.At(3*time.Second, h.Env.CancelWorkflow)
		h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{Agents: []wire.AgentConfig{{ID: "main", MaxTokens: sessiontest.F64(-1)}}})
		require.NoError(t, h.Env.GetWorkflowError())
		var res wire.LoopDescription
		require.NoError(t, h.Env.GetWorkflowResult(&res))
		require.Len(t, res.Children, 2)
		for _, c := range res.Children {
			require.False(t, c.WasLive)
			require.Equal(t, "agent maxTokens must be a positive safe integer", c.Error.Message)
		}
		require.Len(t, res.ConfigStartFailures, 1)
		require.Equal(t, "agent maxTokens must be a positive safe integer", res.ConfigStartFailures[0].Error.Message)
		require.Empty(t, res.Effects)
		start.OK(t)
		for _, c := range res.Children {
			sessiontest.RequireErased(t, h.Store, c.SessionID)
		}
	})
}

// S0-12: the caller aborts with an Error right after the handle exists
// (while the agent is being prepared) and close rejects: the create fails
// with exactly the reason, the real close ran, nothing is registered.
func TestS0_12_AbortWhilePreparingCloseRejects(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s12")
	h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
	h.OnCompleted = func(name string, _ error) {
		if name == wire.CreateHandleName {
			h.AbortNow("", "caller gave up", true)
		}
	}
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s12", Hooks: sessiontest.AllHooks})
	app := sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "caller gave up")
	require.Equal(t, "Error", app.Type())
	require.Equal(t, 1, h.Count(wire.CloseHandleName))
	require.Empty(t, h.Describe("").Lifecycle)
	require.NotContains(t, h.Hooks.Log(), wire.EntrySessionCreated)
	sessiontest.RequireErased(t, h.Store, "s12")
}

// S0-13: the configured create path where publication of agent/created
// fails and close rejects: the start fails `announce failed`, the close
// ran, nothing is registered.
func TestS0_13_ConfigCreateAnnounceFails(t *testing.T) {
	h := sessiontest.NewHarness(t)
	h.Hooks.PublishFunc = func(_ context.Context, in wire.PublishInput) error {
		if in.Entry.Type == wire.EntryAgentCreated {
			return sessiontest.PlainErr("announce failed")
		}
		return nil
	}
	h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
	h.WaitFor(3*time.Second, "the configured create settled", h.LoopChildrenSettled(1))
	h.At(3*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{Agents: []wire.AgentConfig{{ID: "main"}}, Hooks: sessiontest.AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Len(t, res.Children, 1)
	c := res.Children[0]
	require.True(t, strings.HasPrefix(c.SessionID, "main-session-"), c.SessionID)
	suffix := strings.TrimPrefix(c.SessionID, "main-session-")
	u, err := uuid.Parse(suffix)
	require.NoError(t, err, c.SessionID)
	require.Equal(t, suffix, u.String(), "the id ends in a UUID in its canonical form")
	require.Equal(t, uuid.Version(4), u.Version())
	require.Equal(t, uuid.RFC4122, u.Variant())
	require.False(t, c.WasLive)
	require.Equal(t, "announce failed", c.Error.Message)
	require.Len(t, res.ConfigStartFailures, 1)
	require.Equal(t, "announce failed", res.ConfigStartFailures[0].Error.Message)
	require.Len(t, h.Logs.Warnings("config-driven create"), 1)
	require.Equal(t, 1, h.Count(wire.CloseHandleName))
	require.Empty(t, res.Effects)
	sessiontest.RequireErased(t, h.Store, c.SessionID)
}

// S0-14: the seed append and the close both reject: the create fails with
// the append error; nothing is registered.
func TestS0_14_SeedAppendAndCloseReject(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s14")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, sessiontest.PlainErr("append exploded"))
	h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s14", Seed: []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "append exploded")
	d := h.Describe("")
	require.Empty(t, d.Lifecycle)
	require.Len(t, d.CompensationErrors, 1)
	sessiontest.RequireErased(t, h.Store, "s14")
}

// S0-15: the read after the write open fails and close rejects: the
// resume fails `stored read failed`; nothing is registered.
func TestS0_15_ResumeReadRejects(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s15")
	sessiontest.Persisted(t, h.Store, "s15", "")
	h.Env.OnActivity(h.Acts.ScanLog, mock.Anything, mock.Anything).Return(activities.LogScan{}, sessiontest.PlainErr("stored read failed"))
	h.Env.OnActivity(h.Acts.CloseHandle, mock.Anything, mock.Anything).Return(sessiontest.CloseErr(h.Acts, "close exploded"))
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s15", Hooks: sessiontest.AllHooks})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "stored read failed")
	require.Empty(t, h.Describe("").Lifecycle)
	require.Equal(t, 0, h.Count(wire.RepairName))
	require.Empty(t, h.Hooks.Log())
	require.Equal(t, []string{"turn/start", "turn/end"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "s15")))
	sessiontest.RequireReleased(t, h.Store, "s15")
}

// S0-16: a live session's flushed open turn cannot be crash-repaired by a
// concurrent resume (another Temporal deployment over the same store is
// refused by the lease; a second execution of the same workflow id is
// refused by Temporal); the owner completes the turn; the log is exactly
// [turn/start, turn/end{completed}].
func TestS0_16_ConcurrentResumeRefused(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s16")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	open := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.TurnStart(t, 0, 1)}})
	var resumeErr error
	var resumeLog []string
	h.At(3*time.Second, func() {
		other := sessiontest.NewHarnessOn(t, h.Store).WithID("s16")
		other.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s16"})
		resumeErr = other.Env.GetWorkflowError()
		resumeLog = other.StartedNames()
	})
	closeTurn := h.UpdateAt(4*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{sessiontest.TurnEnd(t, 1, 1)}})
	disp := h.UpdateAt(5*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s16"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	open.OK(t)
	closeTurn.OK(t)
	disp.OK(t)
	app := sessiontest.AppErr(t, resumeErr)
	require.Equal(t, "SessionAlreadyOwned", app.Type())
	require.Contains(t, app.Message(), "already owned by an active write handle")
	// Dead-owner recovery asks first and keeps the lease of a live owner.
	require.Equal(t, []string{wire.OpenHandleName, wire.ForfeitDeadOwnerName, wire.CloseHandleName}, resumeLog)
	evs := sessiontest.Stored(t, h.Store, "s16")
	require.Equal(t, []string{"turn/start", "turn/end"}, sessiontest.Types(evs))
	te, err := evs[1].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "completed", string(te.Reason.Kind))
	sessiontest.RequireReleased(t, h.Store, "s16")
}

// S0-17: a stored [turn/start] reads as just that (no synthetic closers);
// resume stores [turn/start, turn/end{interrupted}, session/end-seed].
func TestS0_17_ResumeClosesOpenTurn(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionZstd)
	sessiontest.WriteStored(t, st, wire.Header{ID: "s17", CreatedAt: 1}, 0, []session.Event{sessiontest.TurnStart(t, 0, 1)})
	require.Equal(t, []string{"turn/start"}, sessiontest.Types(sessiontest.Stored(t, st, "s17")))
	info, _ := sessiontest.ResumeAndDispose(t, st, "s17")
	require.Equal(t, int64(3), info.NextSeq)
	evs := sessiontest.Stored(t, st, "s17")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(evs))
	sessiontest.RequireContiguous(t, evs)
	te, err := evs[1].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "interrupted", string(te.Reason.Kind))
}

// S0-18: an open turn with a recorded tool call: resume stores the exact
// closers and the marker, seqs 0..7.
func TestS0_18_ResumeToolOutcomeUnknown(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionZstd)
	msg := sessiontest.Ev(t, wire.TypeAssistantMessage, 2, map[string]any{
		"turn": 1, "step": 1, "stream": []any{},
		"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool-call", "id": "call-1", "name": "read", "arguments": map[string]any{}}}},
	})
	msg.SurfaceOp = session.AppendOp()
	sessiontest.WriteStored(t, st, wire.Header{ID: "s18", CreatedAt: 1}, 0, []session.Event{
		sessiontest.TurnStart(t, 0, 1),
		sessiontest.Ev(t, wire.TypeStepStart, 1, map[string]any{"turn": 1, "step": 1}),
		msg,
		sessiontest.Ev(t, wire.TypeToolCall, 3, map[string]any{"turn": 1, "step": 1, "callId": "call-1", "name": "read", "arguments": "{}"}),
	})
	sessiontest.ResumeAndDispose(t, st, "s18")
	evs := sessiontest.Stored(t, st, "s18")
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end", "session/end-seed"}, sessiontest.Types(evs))
	require.Equal(t, []int64{3}, evs[4].SourceEventSeqs)
	tr, err := evs[4].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "TOOL_OUTCOME_UNKNOWN", tr.Error.Code)
	te, err := evs[6].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "interrupted", string(te.Reason.Kind))
}

// S0-19: a raw log with a torn fragment after turn/start@0: resume stores
// turn/start@0, turn/end@1, session/end-seed@2 — no gap, no fragment.
func TestS0_19_ResumeTruncatesTornTail(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionNone)
	sessiontest.WriteStored(t, st, wire.Header{ID: "s19", CreatedAt: 1}, 0, []session.Event{sessiontest.TurnStart(t, 0, 1)})
	var files []string
	require.NoError(t, filepath.WalkDir(st.Root(), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".jsonl") {
			files = append(files, p)
		}
		return err
	}))
	require.Len(t, files, 1)
	f, err := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"type":"assistant/chunk","seq":1,"ti`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	sessiontest.ResumeAndDispose(t, st, "s19")
	evs := sessiontest.Stored(t, st, "s19")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(evs))
	sessiontest.RequireContiguous(t, evs)
	raw, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.NotContains(t, string(raw), "assistant/chunk")
}

// S0-20: create without meta has no header cwd.
func TestS0_20_CreateWithoutMetaHasNoCwd(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s20")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s20"})
	require.NoError(t, h.Env.GetWorkflowError())
	app.OK(t)
	disp.OK(t)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Empty(t, info.Header.Cwd)
	snap, err := h.Store.Stat(context.Background(), "s20")
	require.NoError(t, err)
	require.Empty(t, snap.Header.Cwd)
	require.Contains(t, snap.Path, "_no-cwd")
}

// S0-21: a no-cwd session run and disposed in lifecycle 1 resumes in
// lifecycle 2 without a cwd.
func TestS0_21_NoCwdSurvivesResume(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s21")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s21"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	app.OK(t)
	disp.OK(t)
	info, _ := sessiontest.ResumeAndDispose(t, h.Store, "s21")
	require.Empty(t, info.Header.Cwd)
}

// S0-22: agent/session-start has source startup for create and resume for
// resume, exactly once each, after session/created and agent/created.
func TestS0_22_SessionStartSource(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s22")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var created wire.Description
	h.At(2*time.Second, func() { created = h.Describe("") })
	app := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s22", Hooks: sessiontest.AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	app.OK(t)
	disp.OK(t)
	require.Equal(t, []wire.LifecycleEntry{{Type: "session/created"}, {Type: "agent/created"}, {Type: "agent/session-start", Source: "startup"}}, created.Lifecycle)
	require.Equal(t, wire.PhaseLive, created.Phase)

	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("s22")
	ready2 := h2.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var resumed wire.Description
	h2.At(2*time.Second, func() { resumed = h2.Describe("") })
	disp2 := h2.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s22", Hooks: sessiontest.AllHooks})
	require.NoError(t, h2.Env.GetWorkflowError())
	ready2.OK(t)
	disp2.OK(t)
	require.Equal(t, []wire.LifecycleEntry{{Type: "session/created"}, {Type: "agent/created"}, {Type: "agent/session-start", Source: "resume"}}, resumed.Lifecycle)
	require.Equal(t, []string{"setup:start", "setup:end", "setup:commit", "session/created", "agent/created", "agent/session-start:resume", "dispose:dispose"}, h2.Hooks.Log())
}

// S0-23: resume with a setup that waits: meanwhile nothing is published and
// only setup has started; afterwards the order of LIFECYCLE.md §6 holds; setup
// sees 3 events (2 stored + the marker, already stored).
func TestS0_23_ResumeAsyncSetupOrder(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s23")
	sessiontest.Persisted(t, h.Store, "s23", "")
	var seen []string
	var in0 wire.SetupInput
	h.Env.OnActivity(sessiontest.HookSetup, mock.Anything, mock.Anything).After(5 * time.Second).Return(
		func(ctx context.Context, in wire.SetupInput) (workflows.SetupResult, error) {
			in0 = in
			seen = sessiontest.Types(sessiontest.Stored(t, h.Store, "s23"))
			return h.Hooks.Setup(ctx, in)
		})
	// The snapshot is taken when setup starts (it then waits 5 s).
	var during wire.Description
	var duringLog []string
	var duringSetupStarted int
	h.OnStarted = func(name string) {
		if name == sessiontest.HookSetup {
			during = h.Describe("")
			duringLog = h.Hooks.Log()
			duringSetupStarted = h.Count(sessiontest.HookSetup)
		}
	}
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s23", Hooks: sessiontest.AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	require.Equal(t, wire.PhaseSetup, during.Phase)
	require.Empty(t, during.Lifecycle)
	require.Empty(t, duringLog)
	require.Equal(t, 1, duringSetupStarted)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	disp.OK(t)
	require.Equal(t, int64(3), in0.EventCount)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, seen)
	require.Equal(t, []string{"setup:start", "setup:end", "setup:commit", "session/created", "agent/created", "agent/session-start:resume", "dispose:dispose"}, h.Hooks.Log())
}

// S0-24: the first resume stores the marker; a second resume shows the same
// three events and stores nothing.
func TestS0_24_SecondResumeStoresNothing(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionZstd)
	sessiontest.Persisted(t, st, "s24", "")
	sessiontest.ResumeAndDispose(t, st, "s24")
	first := sessiontest.Stored(t, st, "s24")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(first))
	snap1, err := st.Stat(context.Background(), "s24")
	require.NoError(t, err)
	info, _ := sessiontest.ResumeAndDispose(t, st, "s24")
	require.Equal(t, int64(3), info.NextSeq)
	require.Equal(t, int64(3), info.FirstLiveSeq)
	second := sessiontest.Stored(t, st, "s24")
	require.Equal(t, sessiontest.Types(first), sessiontest.Types(second))
	snap2, err := st.Stat(context.Background(), "s24")
	require.NoError(t, err)
	require.Equal(t, snap1.SizeBytes, snap2.SizeBytes)
}

// S0-25: while a resumed session lives, its loop lists the effect
// agentLoop.lifecycle(<id>); after Dispose none remains.
func TestS0_25_LifecycleEffect(t *testing.T) {
	h := sessiontest.NewHarness(t)
	sessiontest.Persisted(t, h.Store, "s25", "")
	start := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Resume: &wire.ResumeSessionRequest{ResumeSessionID: "s25"}})
	ready := h.UpdateAt(2*time.Second, wire.WorkflowID("s25"), wire.UpdateWaitReady)
	var live, after wire.LoopDescription
	query := func(out *wire.LoopDescription) func() {
		return func() {
			v, err := h.Env.QueryWorkflow(wire.QueryDescribe)
			require.NoError(t, err)
			require.NoError(t, v.Get(out))
		}
	}
	h.At(3*time.Second, query(&live))
	disp := h.UpdateAt(4*time.Second, wire.WorkflowID("s25"), wire.UpdateDispose)
	h.WaitFor(5*time.Second, "the disposed session settled", h.LoopChildrenSettled(1))
	h.At(5*time.Second, query(&after))
	h.At(6*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	start.OK(t)
	ready.OK(t)
	require.Equal(t, []string{"agentLoop.lifecycle(s25)"}, live.Effects)
	var dr wire.DisposeResult
	disp.Decode(t, &dr)
	require.Empty(t, after.Effects)
	require.Equal(t, wire.ChildSettled, after.Children[0].State)
	sessiontest.RequireReleased(t, h.Store, "s25")
}

// S0-26: a setup that fails later on resume: nothing is published, and a
// retry resume succeeds.
func TestS0_26_ResumeAsyncSetupRejects(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s26")
	sessiontest.Persisted(t, h.Store, "s26", "")
	h.Env.OnActivity(sessiontest.HookSetup, mock.Anything, mock.Anything).After(time.Second).Return(workflows.SetupResult{}, sessiontest.PlainErr("setup rejected"))
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s26", Hooks: sessiontest.AllHooks})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "setup rejected")
	require.Empty(t, h.Describe("").Lifecycle)
	require.Equal(t, 0, h.Count(sessiontest.HookPublish))
	// The repair (the marker) stays stored.
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "s26")))
	sessiontest.RequireReleased(t, h.Store, "s26")
	_, h2 := sessiontest.ResumeAndDispose(t, h.Store, "s26")
	require.Equal(t, 3, h2.Count(sessiontest.HookPublish))
}

// S0-27: the commit hook fails on resume: nothing is published, and a
// retry resume succeeds.
func TestS0_27_ResumeCommitFails(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s27")
	sessiontest.Persisted(t, h.Store, "s27", "")
	h.Hooks.CommitFunc = func(context.Context, wire.SetupInput) error { return sessiontest.PlainErr("commit failed") }
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s27", Hooks: sessiontest.AllHooks})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "commit failed")
	require.Empty(t, h.Describe("").Lifecycle)
	require.Equal(t, []string{"setup:start", "setup:end", "setup:commit", "dispose:rollback"}, h.Hooks.Log())
	sessiontest.RequireReleased(t, h.Store, "s27")
	_, h2 := sessiontest.ResumeAndDispose(t, h.Store, "s27")
	require.Equal(t, 3, h2.Count(sessiontest.HookPublish))
}

// S0-28: the owner goes away while the resume's setup is pending: the
// resume fails `owner disposed during setup`; when the abandoned setup
// later completes, still nothing is published; the identity is released
// and can be resumed again.
func TestS0_28_OwnerUnloadDuringSetup(t *testing.T) {
	h := sessiontest.NewHarness(t)
	sessiontest.Persisted(t, h.Store, "s28", "")
	setupSettled := false
	h.Env.OnActivity(sessiontest.HookSetup, mock.Anything, mock.Anything).Once().After(time.Hour).Return(
		func(context.Context, wire.SetupInput) (workflows.SetupResult, error) {
			setupSettled = true
			return workflows.SetupResult{}, nil
		})
	h.Env.OnActivity(sessiontest.HookSetup, mock.Anything, mock.Anything).Return(h.Hooks.Setup)
	resume := workflows.StartRequest{Resume: &wire.ResumeSessionRequest{ResumeSessionID: "s28", Hooks: sessiontest.AllHooks}}
	start := h.UpdateAt(time.Second, "", wire.UpdateStart, resume)
	ready := h.UpdateNoWaitAt(time.Second, wire.WorkflowID("s28"), wire.UpdateWaitReady)
	// The owner goes away once the setup is pending.
	h.AtStarted(time.Second, sessiontest.HookSetup, func() {
		require.NoError(t, h.Env.SignalWorkflowByID(wire.WorkflowID("s28"), wire.SignalOwnerUnload, nil))
	})
	var afterUnload wire.LoopDescription
	h.At(2*time.Second, func() {
		v, err := h.Env.QueryWorkflow(wire.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&afterUnload))
	})
	// Long after the abandoned setup completed (at 1 h).
	var settledBeforeRetry bool
	var publishedBeforeRetry int
	h.At(2*time.Hour, func() {
		settledBeforeRetry = setupSettled
		publishedBeforeRetry = h.Count(sessiontest.HookPublish)
		sessiontest.RequireReleased(t, h.Store, "s28")
	})
	retry := h.UpdateAt(2*time.Hour, "", wire.UpdateStart, resume)
	ready2 := h.UpdateAt(2*time.Hour, wire.WorkflowID("s28"), wire.UpdateWaitReady)
	disp2 := h.UpdateAt(2*time.Hour, wire.WorkflowID("s28"), wire.UpdateDispose)
	h.At(3*time.Hour, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())

	start.OK(t)
	app := sessiontest.RequireMessage(t, ready.Failure(t), `agent "s28" setup aborted: owner disposed during setup`)
	require.Equal(t, "OwnerDisposed", app.Type())
	require.Len(t, afterUnload.Children, 1)
	require.Equal(t, wire.ChildSettled, afterUnload.Children[0].State)
	require.False(t, afterUnload.Children[0].WasLive)
	require.Equal(t, `agent "s28" setup aborted: owner disposed during setup`, afterUnload.Children[0].Error.Message)
	require.True(t, settledBeforeRetry, "the abandoned setup never completed")
	require.Equal(t, 0, publishedBeforeRetry, "the late setup published")
	retry.OK(t)
	ready2.OK(t)
	disp2.OK(t)
	require.Equal(t, 1, strings.Count(strings.Join(h.Hooks.Log(), ","), "agent/session-start:resume"))
	sessiontest.RequireReleased(t, h.Store, "s28")
}

// S0-29: the owner goes away while the backend open never settles: the
// resume fails promptly `owner disposed during setup`; an immediate retry
// opens and publishes once; when the first open finally lands it finds its
// handle id revoked, releases what it took, and its handle was closed
// exactly once; the lease ends released.
func TestS0_29_OwnerUnloadWhileOpenHangs(t *testing.T) {
	h := sessiontest.NewHarness(t)
	sessiontest.Persisted(t, h.Store, "s29", "")
	var lateErr error
	lateDone := false
	h.Env.OnActivity(h.Acts.OpenHandle, mock.Anything, mock.Anything).Once().After(time.Hour).Return(
		func(ctx context.Context, in activities.OpenHandleInput) (activities.HandleInfo, error) {
			info, err := h.Acts.OpenHandle(context.WithoutCancel(ctx), in)
			lateErr, lateDone = err, true
			return info, err
		})
	h.Env.OnActivity(h.Acts.OpenHandle, mock.Anything, mock.Anything).Return(h.Acts.OpenHandle)
	resume := workflows.StartRequest{Resume: &wire.ResumeSessionRequest{ResumeSessionID: "s29", Hooks: sessiontest.AllHooks}}
	start := h.UpdateAt(time.Second, "", wire.UpdateStart, resume)
	h.AtStarted(2*time.Second, wire.OpenHandleName, func() {
		require.NoError(t, h.Env.SignalWorkflowByID(wire.WorkflowID("s29"), wire.SignalOwnerUnload, nil))
	})
	var afterUnload wire.LoopDescription
	h.At(3*time.Second, func() {
		v, err := h.Env.QueryWorkflow(wire.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&afterUnload))
	})
	retry := h.UpdateAt(4*time.Second, "", wire.UpdateStart, resume)
	ready := h.UpdateAt(5*time.Second, wire.WorkflowID("s29"), wire.UpdateWaitReady)
	h.At(2*time.Hour, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())

	start.OK(t)
	require.Len(t, afterUnload.Children, 1)
	first := afterUnload.Children[0]
	require.Equal(t, wire.ChildSettled, first.State)
	require.False(t, first.WasLive)
	require.Equal(t, `agent "s29" setup aborted: owner disposed during setup`, first.Error.Message)
	var sr wire.StartResult
	retry.Decode(t, &sr)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	// Exactly one publication.
	require.Equal(t, 1, strings.Count(strings.Join(h.Hooks.Log(), ","), "agent/session-start:resume"))
	// The late open landed while the retry owned the session: it was
	// refused and left the retry's lease alone.
	require.True(t, lateDone, "the first open never landed")
	require.Equal(t, "SessionAlreadyOwned", sessiontest.AppErr(t, lateErr).Type())
	var firstOpen activities.OpenHandleInput
	h.StartedArg(wire.OpenHandleName, 0, &firstOpen)
	closes := 0
	for _, id := range h.ClosedHandles() {
		if id == firstOpen.HandleID {
			closes++
		}
	}
	require.Equal(t, 1, closes)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "s29")))
	sessiontest.RequireReleased(t, h.Store, "s29")
}

// S0-30: the loop deactivates while the open hangs: the resume fails
// `agent loop is not active` at once, the loop waits for it to settle,
// nothing is published; the open then lands (while a neighbour's slow
// disposal keeps the teardown running), is refused and releases what it
// took, and its handle id was closed once.
func TestS0_30_LoopDeactivatedWhileOpenHangs(t *testing.T) {
	h := sessiontest.NewHarness(t)
	sessiontest.Persisted(t, h.Store, "s30", "")
	late := lateOpen(h, time.Hour)
	h.Env.OnActivity(sessiontest.HookDispose, mock.Anything, mock.Anything).After(2 * time.Hour).Return(nil)
	neighbour := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{
		SessionID: "neighbour", Hooks: wire.Hooks{DisposeActivity: sessiontest.HookDispose}}})
	neighbourReady := h.UpdateAt(time.Second, wire.WorkflowID("neighbour"), wire.UpdateWaitReady)
	start := h.UpdateAt(time.Second, "", wire.UpdateStart, workflows.StartRequest{Resume: &wire.ResumeSessionRequest{ResumeSessionID: "s30", Hooks: sessiontest.AllHooks}})
	h.AtStarted(2*time.Second, wire.OpenHandleName, h.Env.CancelWorkflow)
	var midTeardown wire.LoopDescription
	var landedByMid bool
	h.At(10*time.Second, func() {
		v, err := h.Env.QueryWorkflow(wire.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&midTeardown))
		landedByMid = late.done
	})
	h.Env.ExecuteWorkflow(workflows.SessionLoop, wire.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	neighbour.OK(t)
	neighbourReady.OK(t)
	start.OK(t)
	// Settled long before the open landed.
	require.False(t, midTeardown.Active)
	require.Equal(t, "s30", midTeardown.Children[1].SessionID)
	require.Equal(t, wire.ChildSettled, midTeardown.Children[1].State)
	require.Equal(t, "agent loop is not active", midTeardown.Children[1].Error.Message)
	require.False(t, landedByMid, "the open landed before the resume settled")
	var res wire.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.False(t, res.Active)
	require.Len(t, res.Children, 2)
	require.Equal(t, wire.ChildSettled, res.Children[1].State)
	require.Equal(t, "agent loop is not active", res.Children[1].Error.Message)
	require.Equal(t, 0, h.Count(sessiontest.HookPublish))
	requireLateOpenReleased(t, h, late, "s30")
	sessiontest.RequireErased(t, h.Store, "neighbour")
}

// lateOpenResult is what the first, abandoned OpenHandle did when it
// finally ran.
type lateOpenResult struct {
	done bool
	err  error
}

// lateOpen makes the first OpenHandle land only after d on the workflow
// clock, running the real activity then even though its workflow gave up
// (a zombie attempt); later opens run at once.
func lateOpen(h *sessiontest.Harness, d time.Duration) *lateOpenResult {
	late := &lateOpenResult{}
	h.Env.OnActivity(h.Acts.OpenHandle, mock.Anything, mock.Anything).Once().After(d).Return(
		func(ctx context.Context, in activities.OpenHandleInput) (activities.HandleInfo, error) {
			info, err := h.Acts.OpenHandle(context.WithoutCancel(ctx), in)
			late.err, late.done = err, true
			return info, err
		})
	h.Env.OnActivity(h.Acts.OpenHandle, mock.Anything, mock.Anything).Return(h.Acts.OpenHandle)
	return late
}

// requireLateOpenReleased checks that the abandoned first open landed
// during the run, was refused (its handle id revoked), that its handle id
// was closed exactly once, and that the session is stored and released.
func requireLateOpenReleased(t *testing.T, h *sessiontest.Harness, late *lateOpenResult, id string) {
	t.Helper()
	require.True(t, late.done, "the late open never landed")
	app := sessiontest.AppErr(t, late.err)
	require.Equal(t, "HandleRevoked", app.Type())
	var in activities.OpenHandleInput
	h.StartedArg(wire.OpenHandleName, 0, &in)
	closes := 0
	for _, hid := range h.ClosedHandles() {
		if hid == in.HandleID {
			closes++
		}
	}
	require.Equal(t, 1, closes)
	sessiontest.RequireReleased(t, h.Store, id)
}

// S0-31: a fork round trip: create with a seed, cwd, parentSession,
// isSeeded, delegationDepth 1 and inheritedEventCount 2; after a resume all
// of them hold and the inherited count comes from storage.
func TestS0_31_ForkRoundTrip(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s31")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{
		SessionID:           "s31",
		Seed:                []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)},
		Meta:                &wire.SessionMeta{Cwd: "/w", ParentSession: "parent-sess", IsSeeded: true, DelegationDepth: 1},
		InheritedEventCount: 2,
	})
	require.NoError(t, h.Env.GetWorkflowError())
	var created wire.SessionInfo
	ready.Decode(t, &created)
	disp.OK(t)
	require.Equal(t, int64(2), created.InheritedEventCount)
	info, _ := sessiontest.ResumeAndDispose(t, h.Store, "s31")
	require.Equal(t, "parent-sess", info.Header.ParentSession)
	require.Equal(t, "/w", info.Header.Cwd)
	require.True(t, info.Header.IsSeeded)
	require.Equal(t, int64(1), info.Header.DelegationDepth)
	require.Equal(t, int64(2), info.InheritedEventCount)
	evs := sessiontest.Stored(t, h.Store, "s31")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(evs))
	marker, err := evs[2].IsInheritedMarker()
	require.NoError(t, err)
	require.True(t, marker)
}

// S0-32: an idle injection flushed as agent/inbox/spliced after a completed
// turn; the owner is wedged (its lease forfeited); a new lifecycle resumes,
// stores only the marker (no synthetic turn) and continues at turn 2.
func TestS0_32_SpliceSurvivesWedgedOwner(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s32")
	splice := sessiontest.Ev(t, wire.TypeInboxSpliced, 5, map[string]any{"list": "nextStep", "op": "append", "messages": []any{map[string]any{"role": "user", "content": "later"}}})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: append(sessiontest.LiveTurn(t, 0, 1, "x"), splice)})
	var info wire.SessionInfo
	var after []session.Event
	h.At(3*time.Second, func() {
		lease, err := h.Store.ForceUnlock(context.Background(), "s32")
		require.NoError(t, err)
		require.NotNil(t, lease)
		info, _ = sessiontest.ResumeAndDispose(t, h.Store, "s32")
		after = sessiontest.Stored(t, h.Store, "s32")
	})
	h.At(4*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s32"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	app.OK(t)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "step/end", "turn/end", "agent/inbox/spliced", "session/end-seed"}, sessiontest.Types(after))
	require.Equal(t, int64(1), info.LastTurn)
	require.Equal(t, int64(7), info.NextSeq)
	// The wedged owner's late disposal changed nothing.
	require.Equal(t, sessiontest.Types(after), sessiontest.Types(sessiontest.Stored(t, h.Store, "s32")))
	sessiontest.RequireReleased(t, h.Store, "s32")
}

// S0-33: one full turn, dispose, resume in a fresh environment: same id,
// old events unchanged plus the marker at the old count; a new turn is
// turn 2 and seqs stay contiguous.
func TestS0_33_ResumeContinuesNumbering(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("s33")
	ready1 := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app1 := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "first")})
	disp1 := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s33"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready1.OK(t)
	app1.OK(t)
	disp1.OK(t)
	old := sessiontest.Stored(t, h.Store, "s33")

	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("s33")
	ready := h2.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var mid []session.Event
	h2.At(2*time.Second, func() { mid = sessiontest.Stored(t, h2.Store, "s33") })
	app := h2.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 6, 2, "second")})
	disp2 := h2.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s33"})
	require.NoError(t, h2.Env.GetWorkflowError())
	disp2.OK(t)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, "s33", info.SessionID)
	require.Len(t, mid, len(old)+1)
	require.Equal(t, int64(len(old)), info.FirstLiveSeq)
	require.Equal(t, wire.TypeEndSeed, mid[len(mid)-1].Type)
	for i := range old {
		a, _ := old[i].MarshalJSON()
		b, _ := mid[i].MarshalJSON()
		require.Equal(t, string(a), string(b))
	}
	require.Equal(t, info.LastTurn+1, int64(2))
	var ar wire.AppendResult
	app.Decode(t, &ar)
	final := sessiontest.Stored(t, h.Store, "s33")
	sessiontest.RequireContiguous(t, final)
	require.Len(t, final, 11)
}

// S0-34: without persistence a resume fails `session persistence is not
// configured`.
func TestS0_34_ResumeWithoutPersistence(t *testing.T) {
	h := sessiontest.NewHarnessOn(t, nil).WithID("s34")
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "s34"})
	err := h.Env.GetWorkflowError()
	sessiontest.RequireMessage(t, err, "cannot resume: session persistence is not configured (load a dsh-session-persistence backend)")
	require.Empty(t, h.Describe("").Lifecycle)
}
