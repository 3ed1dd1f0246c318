package testsuite

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
	"github.com/sessionflow/sessionflow/workflows"
)

// S0-01: a session/created publication hook failing with a non-Error value
// during resume: the resume fails with exactly that value, nothing is
// registered, and the write handle was closed.
func TestS0_01_PublishVetoNonErrorOnResume(t *testing.T) {
	h := newHarness(t).withID("s01")
	persisted(t, h.store, "s01", "")
	h.hooks.publish = func(_ context.Context, in workflows.PublishInput) error {
		if in.Entry.Type == workflows.EntrySessionCreated {
			return temporal.NewNonRetryableApplicationError("[object Object]", "NonError", nil, map[string]string{"source": "resume"})
		}
		return nil
	}
	ready := h.updateAt(0, "", workflows.UpdateWaitReady)
	h.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "s01", Hooks: allHooks})
	err := h.env.GetWorkflowError()
	app := requireMessage(t, err, "[object Object]")
	require.Equal(t, "NonError", app.Type())
	var detail map[string]string
	require.NoError(t, app.Details(&detail))
	require.Equal(t, map[string]string{"source": "resume"}, detail)
	// WaitReady returned the same failure.
	require.Equal(t, "NonError", appErr(t, ready.failure(t)).Type())
	d := h.describe("")
	require.Equal(t, workflows.PhaseClosed, d.Phase)
	require.Empty(t, d.Lifecycle)
	require.False(t, d.HandleOpen)
	require.Equal(t, 1, h.count(activities.CloseHandleName))
	requireReleased(t, h.store, "s01")
}

// S0-02: create uses exactly the given id (workflow id session/<id>, no
// suffix) and keeps header.cwd.
func TestS0_02_CreateKeepsIDAndCwd(t *testing.T) {
	h := newHarness(t).withID("s02")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "hi")})
	disp := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s02", Meta: &workflows.SessionMeta{Cwd: "/w"}})
	require.NoError(t, h.env.GetWorkflowError())
	app.ok(t)
	disp.ok(t)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Equal(t, "s02", info.SessionID)
	require.Equal(t, "session/s02", info.WorkflowID)
	require.Equal(t, "/w", info.Header.Cwd)
	list, err := h.store.List(context.Background())
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
	h := newHarness(t)
	create := workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "s03"}}
	first := h.updateAt(time.Second, "", workflows.UpdateStart, create)
	ready := h.updateAt(2*time.Second, workflows.WorkflowID("s03"), workflows.UpdateWaitReady)
	second := h.updateAt(3*time.Second, "", workflows.UpdateStart, create)
	var count int
	h.at(4*time.Second, func() {
		list, err := h.store.List(context.Background())
		require.NoError(t, err)
		count = len(list)
	})
	h.at(5*time.Second, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{})
	require.NoError(t, h.env.GetWorkflowError())
	var sr workflows.StartResult
	first.decode(t, &sr)
	require.Equal(t, "session/s03", sr.WorkflowID)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.ErrorContains(t, second.rejection(t), `session "s03" already exists`)
	require.Equal(t, 1, count)
	require.Equal(t, 1, h.count(activities.CreateHandleName))
	var res workflows.LoopDescription
	require.NoError(t, h.env.GetWorkflowResult(&res))
	require.Len(t, res.Children, 1)
	// Never appended to, so the loop's teardown erased it.
	requireErased(t, h.store, "s03")
}

// S0-04: a create with a 2-event seed plus one live turn, disposed: the log
// is contiguous from 0 and holds the seed, the marker and turn 2.
func TestS0_04_SeedPlusLiveTurn(t *testing.T) {
	h := newHarness(t).withID("s04")
	seed := []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 3, 2, "assistant text")})
	disp := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s04", Seed: seed})
	require.NoError(t, h.env.GetWorkflowError())
	app.ok(t)
	disp.ok(t)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Equal(t, int64(3), info.NextSeq)
	require.Equal(t, int64(2), info.FirstLiveSeq)
	evs := stored(t, h.store, "s04")
	requireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed", "turn/start", "step/start", "assistant/message", "step/end", "turn/end"}, types(evs))
	var turns []int64
	turnEnd2 := false
	for _, e := range evs {
		switch e.Type {
		case session.TypeTurnStart:
			ts, err := e.TurnStart()
			require.NoError(t, err)
			turns = append(turns, ts.Turn)
		case session.TypeTurnEnd:
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
	h := newHarness(t).withID("s05")
	h.env.OnActivity(h.acts.CloseHandle, mock.Anything, mock.Anything).Return(closeErr(h.acts, "close exploded"))
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.updateAt(2*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s05"})
	requireMessage(t, h.env.GetWorkflowError(), "close exploded")
	ready.ok(t)
	requireMessage(t, disp.failure(t), "close exploded")
	d := h.describe("")
	require.Equal(t, workflows.PhaseClosed, d.Phase)
	require.False(t, d.HandleOpen)
	requireErased(t, h.store, "s05")
}

// S0-06: the dispose hook (the machine's scope) and the close both fail:
// an aggregate `agent "<id>" disposal failed` with the members in order.
func TestS0_06_DisposalAggregate(t *testing.T) {
	h := newHarness(t).withID("s06")
	h.hooks.dispose = func(context.Context, workflows.DisposeInput) error { return plainErr("scope exploded") }
	h.env.OnActivity(h.acts.CloseHandle, mock.Anything, mock.Anything).Return(closeErr(h.acts, "close exploded"))
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.updateAt(2*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s06", Hooks: workflows.Hooks{DisposeActivity: hookDispose}})
	ready.ok(t)
	app := appErr(t, disp.failure(t))
	require.Equal(t, "AggregateError", app.Type())
	require.Contains(t, app.Message(), `agent "s06" disposal failed`)
	var members []workflows.ErrorInfo
	require.NoError(t, app.Details(&members))
	require.Equal(t, []string{"scope exploded", "close exploded"}, []string{members[0].Message, members[1].Message})
	require.Len(t, members, 2)
	require.Equal(t, "AggregateError", appErr(t, h.env.GetWorkflowError()).Type())
	require.Equal(t, workflows.PhaseClosed, h.describe("").Phase)
	// The close really closed: the never-appended session is gone.
	requireErased(t, h.store, "s06")
}

// S0-07: while the session lives a write open elsewhere is refused
// `already owned by an active write handle`; after a turn and disposal the
// turn is stored and a write open succeeds.
func TestS0_07_LiveOwnsTheLease(t *testing.T) {
	h := newHarness(t).withID("s07")
	var ownedErr error
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	h.at(3*time.Second, func() {
		_, ownedErr = h.store.Open(context.Background(), "s07", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "intruder"})
	})
	disp := h.updateAt(4*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s07"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	var ar workflows.AppendResult
	app.decode(t, &ar)
	require.Equal(t, int64(5), ar.NextSeq)
	disp.ok(t)
	require.ErrorIs(t, ownedErr, jsonl.ErrAlreadyOwned)
	require.Contains(t, ownedErr.Error(), "already owned by an active write handle")
	evs := stored(t, h.store, "s07")
	requireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "step/end", "turn/end"}, types(evs))
	requireReleased(t, h.store, "s07")
}

// S0-08: the create activity fails once: the create fails with it, nothing
// is registered, and the same id then creates fine.
func TestS0_08_CreateRejectsOnce(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(h.acts.CreateHandle, mock.Anything, mock.Anything).Return(activities.HandleInfo{}, plainErr("create exploded")).Once()
	h.env.OnActivity(h.acts.CreateHandle, mock.Anything, mock.Anything).Return(h.acts.CreateHandle)
	create := workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "s08", Seed: []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}}}
	start1 := h.updateAt(time.Second, "", workflows.UpdateStart, create)
	var afterFirst workflows.LoopDescription
	h.waitFor(2*time.Second, "the first create settled", h.loopChildrenSettled(1))
	h.at(2*time.Second, func() {
		v, err := h.env.QueryWorkflow(workflows.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&afterFirst))
		requireErased(t, h.store, "s08")
	})
	start2 := h.updateAt(3*time.Second, "", workflows.UpdateStart, create)
	ready := h.updateAt(4*time.Second, workflows.WorkflowID("s08"), workflows.UpdateWaitReady)
	h.at(5*time.Second, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{})
	require.NoError(t, h.env.GetWorkflowError())
	start1.ok(t)
	start2.ok(t)
	require.Len(t, afterFirst.Children, 1)
	require.Equal(t, workflows.ChildSettled, afterFirst.Children[0].State)
	require.False(t, afterFirst.Children[0].WasLive)
	require.Equal(t, "create exploded", afterFirst.Children[0].Error.Message)
	require.Empty(t, afterFirst.Effects)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, types(stored(t, h.store, "s08")))
	requireReleased(t, h.store, "s08")
}

// S0-09: the seed append through the fresh handle fails: the create fails
// with it, the handle was closed, nothing is registered, and the
// never-materialized session is absent.
func TestS0_09_SeedAppendRejects(t *testing.T) {
	h := newHarness(t).withID("s09")
	h.env.OnActivity(h.acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, plainErr("append exploded"))
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s09", Seed: []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}, Hooks: allHooks})
	requireMessage(t, h.env.GetWorkflowError(), "append exploded")
	require.Equal(t, 1, h.count(activities.CloseHandleName))
	d := h.describe("")
	require.Empty(t, d.Lifecycle)
	require.Equal(t, workflows.PhaseClosed, d.Phase)
	require.NotContains(t, h.hooks.log(), workflows.EntrySessionCreated)
	requireErased(t, h.store, "s09")
}

// S0-10: setup fails for a seeded create: stat reads nothing (the seed is
// stored only at the commit point); the same id and seed then create and
// stat is defined.
func TestS0_10_SetupFailsBeforeSeedStored(t *testing.T) {
	h := newHarness(t).withID("s10")
	seed := []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}
	h.hooks.setup = func(context.Context, workflows.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{}, plainErr("setup failed")
	}
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s10", Seed: seed, Hooks: allHooks})
	requireMessage(t, h.env.GetWorkflowError(), "setup failed")
	snap, err := h.store.Stat(context.Background(), "s10")
	require.NoError(t, err)
	require.Nil(t, snap)
	require.Equal(t, []string{"setup:start", "dispose:rollback"}, h.hooks.log())
	requireErased(t, h.store, "s10")

	h2 := newHarnessOn(t, h.store).withID("s10")
	ready := h2.updateAt(time.Second, "", workflows.UpdateWaitReady)
	var snap2 *jsonl.Snapshot
	h2.at(2*time.Second, func() { snap2, err = h2.store.Stat(context.Background(), "s10") })
	disp2 := h2.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h2.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s10", Seed: seed})
	require.NoError(t, h2.env.GetWorkflowError())
	disp2.ok(t)
	var info workflows.SessionInfo
	ready.decode(t, &info)
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
		h := newHarness(t).withID("s11")
		h.env.OnActivity(h.acts.CloseHandle, mock.Anything, mock.Anything).Return(closeErr(h.acts, "close exploded"))
		h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s11", AgentOptions: &workflows.AgentOptions{MaxTokens: f64(-1)}})
		app := requireMessage(t, h.env.GetWorkflowError(), "agent maxTokens must be a positive safe integer")
		require.Equal(t, "TypeError", app.Type())
		require.Equal(t, []string{activities.CreateHandleName, activities.CloseHandleName}, h.startedNames())
		d := h.describe("")
		require.Empty(t, d.Lifecycle)
		require.Equal(t, []workflows.CompensationError{{Step: "close-handle", Error: workflows.ErrorInfo{Message: "close exploded", Type: "Error"}}}, d.CompensationErrors)
		requireErased(t, h.store, "s11")
	})
	t.Run("loop", func(t *testing.T) {
		h := newHarness(t)
		h.env.OnActivity(h.acts.CloseHandle, mock.Anything, mock.Anything).Return(closeErr(h.acts, "close exploded"))
		start := h.updateAt(time.Second, "", workflows.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{
			SessionID: "s11", AgentOptions: &workflows.AgentOptions{MaxTokens: f64(-1)}}})
		h.waitFor(3*time.Second, "both creates settled", h.loopChildrenSettled(2))
		h.at(3*time.Second, h.env.CancelWorkflow)
		h.env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{Agents: []workflows.AgentConfig{{ID: "main", MaxTokens: f64(-1)}}})
		require.NoError(t, h.env.GetWorkflowError())
		var res workflows.LoopDescription
		require.NoError(t, h.env.GetWorkflowResult(&res))
		require.Len(t, res.Children, 2)
		for _, c := range res.Children {
			require.False(t, c.WasLive)
			require.Equal(t, "agent maxTokens must be a positive safe integer", c.Error.Message)
		}
		require.Len(t, res.ConfigStartFailures, 1)
		require.Equal(t, "agent maxTokens must be a positive safe integer", res.ConfigStartFailures[0].Error.Message)
		require.Empty(t, res.Effects)
		start.ok(t)
		for _, c := range res.Children {
			requireErased(t, h.store, c.SessionID)
		}
	})
}

// S0-12: the caller aborts with an Error right after the handle exists
// (while the agent is being prepared) and close rejects: the create fails
// with exactly the reason, the real close ran, nothing is registered.
func TestS0_12_AbortWhilePreparingCloseRejects(t *testing.T) {
	h := newHarness(t).withID("s12")
	h.env.OnActivity(h.acts.CloseHandle, mock.Anything, mock.Anything).Return(closeErr(h.acts, "close exploded"))
	h.onCompleted = func(name string, _ error) {
		if name == activities.CreateHandleName {
			h.abortNow("", "caller gave up", true)
		}
	}
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s12", Hooks: allHooks})
	app := requireMessage(t, h.env.GetWorkflowError(), "caller gave up")
	require.Equal(t, "Error", app.Type())
	require.Equal(t, 1, h.count(activities.CloseHandleName))
	require.Empty(t, h.describe("").Lifecycle)
	require.NotContains(t, h.hooks.log(), workflows.EntrySessionCreated)
	requireErased(t, h.store, "s12")
}

// S0-13: the configured create path where publication of agent/created
// fails and close rejects: the start fails `announce failed`, the close
// ran, nothing is registered.
func TestS0_13_ConfigCreateAnnounceFails(t *testing.T) {
	h := newHarness(t)
	h.hooks.publish = func(_ context.Context, in workflows.PublishInput) error {
		if in.Entry.Type == workflows.EntryAgentCreated {
			return plainErr("announce failed")
		}
		return nil
	}
	h.env.OnActivity(h.acts.CloseHandle, mock.Anything, mock.Anything).Return(closeErr(h.acts, "close exploded"))
	h.waitFor(3*time.Second, "the configured create settled", h.loopChildrenSettled(1))
	h.at(3*time.Second, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{Agents: []workflows.AgentConfig{{ID: "main"}}, Hooks: allHooks})
	require.NoError(t, h.env.GetWorkflowError())
	var res workflows.LoopDescription
	require.NoError(t, h.env.GetWorkflowResult(&res))
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
	require.Len(t, h.logs.warnings("config-driven create"), 1)
	require.Equal(t, 1, h.count(activities.CloseHandleName))
	require.Empty(t, res.Effects)
	requireErased(t, h.store, c.SessionID)
}

// S0-14: the seed append and the close both reject: the create fails with
// the append error; nothing is registered.
func TestS0_14_SeedAppendAndCloseReject(t *testing.T) {
	h := newHarness(t).withID("s14")
	h.env.OnActivity(h.acts.AppendBatch, mock.Anything, mock.Anything).Return(activities.AppendResult{}, plainErr("append exploded"))
	h.env.OnActivity(h.acts.CloseHandle, mock.Anything, mock.Anything).Return(closeErr(h.acts, "close exploded"))
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s14", Seed: []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}})
	requireMessage(t, h.env.GetWorkflowError(), "append exploded")
	d := h.describe("")
	require.Empty(t, d.Lifecycle)
	require.Len(t, d.CompensationErrors, 1)
	requireErased(t, h.store, "s14")
}

// S0-15: the read after the write open fails and close rejects: the
// resume fails `stored read failed`; nothing is registered.
func TestS0_15_ResumeReadRejects(t *testing.T) {
	h := newHarness(t).withID("s15")
	persisted(t, h.store, "s15", "")
	h.env.OnActivity(h.acts.ScanLog, mock.Anything, mock.Anything).Return(activities.LogScan{}, plainErr("stored read failed"))
	h.env.OnActivity(h.acts.CloseHandle, mock.Anything, mock.Anything).Return(closeErr(h.acts, "close exploded"))
	h.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "s15", Hooks: allHooks})
	requireMessage(t, h.env.GetWorkflowError(), "stored read failed")
	require.Empty(t, h.describe("").Lifecycle)
	require.Equal(t, 0, h.count(activities.RepairName))
	require.Empty(t, h.hooks.log())
	require.Equal(t, []string{"turn/start", "turn/end"}, types(stored(t, h.store, "s15")))
	requireReleased(t, h.store, "s15")
}

// S0-16: a live session's flushed open turn cannot be crash-repaired by a
// concurrent resume (another Temporal deployment over the same store is
// refused by the lease; a second execution of the same workflow id is
// refused by Temporal); the owner completes the turn; the log is exactly
// [turn/start, turn/end{completed}].
func TestS0_16_ConcurrentResumeRefused(t *testing.T) {
	h := newHarness(t).withID("s16")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	open := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{turnStart(t, 0, 1)}})
	var resumeErr error
	var resumeLog []string
	h.at(3*time.Second, func() {
		other := newHarnessOn(t, h.store).withID("s16")
		other.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "s16"})
		resumeErr = other.env.GetWorkflowError()
		resumeLog = other.startedNames()
	})
	closeTurn := h.updateAt(4*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: []session.Event{turnEnd(t, 1, 1)}})
	disp := h.updateAt(5*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s16"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	open.ok(t)
	closeTurn.ok(t)
	disp.ok(t)
	app := appErr(t, resumeErr)
	require.Equal(t, "SessionAlreadyOwned", app.Type())
	require.Contains(t, app.Message(), "already owned by an active write handle")
	// Dead-owner recovery asks first and keeps the lease of a live owner.
	require.Equal(t, []string{activities.OpenHandleName, activities.ForfeitDeadOwnerName, activities.CloseHandleName}, resumeLog)
	evs := stored(t, h.store, "s16")
	require.Equal(t, []string{"turn/start", "turn/end"}, types(evs))
	te, err := evs[1].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "completed", string(te.Reason.Kind))
	requireReleased(t, h.store, "s16")
}

// resumeAndDispose resumes id on st in a fresh environment, returns the
// SessionInfo and disposes the session.
func resumeAndDispose(t *testing.T, st *jsonl.Store, id string, extra ...func(*harness)) (workflows.SessionInfo, *harness) {
	t.Helper()
	h := newHarnessOn(t, st).withID(id)
	for _, f := range extra {
		f(h)
	}
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.updateAt(2*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: id, Hooks: allHooks})
	require.NoError(t, h.env.GetWorkflowError())
	var info workflows.SessionInfo
	ready.decode(t, &info)
	disp.ok(t)
	requireReleased(t, st, id)
	return info, h
}

// S0-17: a stored [turn/start] reads as just that (no synthetic closers);
// resume stores [turn/start, turn/end{interrupted}, session/end-seed].
func TestS0_17_ResumeClosesOpenTurn(t *testing.T) {
	st := newStore(t, jsonl.CompressionZstd)
	writeStored(t, st, session.Header{ID: "s17", CreatedAt: 1}, 0, []session.Event{turnStart(t, 0, 1)})
	require.Equal(t, []string{"turn/start"}, types(stored(t, st, "s17")))
	info, _ := resumeAndDispose(t, st, "s17")
	require.Equal(t, int64(3), info.NextSeq)
	evs := stored(t, st, "s17")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, types(evs))
	requireContiguous(t, evs)
	te, err := evs[1].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "interrupted", string(te.Reason.Kind))
}

// S0-18: an open turn with a recorded tool call: resume stores the exact
// closers and the marker, seqs 0..7.
func TestS0_18_ResumeToolOutcomeUnknown(t *testing.T) {
	st := newStore(t, jsonl.CompressionZstd)
	msg := ev(t, session.TypeAssistantMessage, 2, map[string]any{
		"turn": 1, "step": 1, "stream": []any{},
		"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool-call", "id": "call-1", "name": "read", "arguments": map[string]any{}}}},
	})
	msg.SurfaceOp = session.AppendOp()
	writeStored(t, st, session.Header{ID: "s18", CreatedAt: 1}, 0, []session.Event{
		turnStart(t, 0, 1),
		ev(t, session.TypeStepStart, 1, map[string]any{"turn": 1, "step": 1}),
		msg,
		ev(t, session.TypeToolCall, 3, map[string]any{"turn": 1, "step": 1, "callId": "call-1", "name": "read", "arguments": "{}"}),
	})
	resumeAndDispose(t, st, "s18")
	evs := stored(t, st, "s18")
	requireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end", "session/end-seed"}, types(evs))
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
	st := newStore(t, jsonl.CompressionNone)
	writeStored(t, st, session.Header{ID: "s19", CreatedAt: 1}, 0, []session.Event{turnStart(t, 0, 1)})
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
	resumeAndDispose(t, st, "s19")
	evs := stored(t, st, "s19")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, types(evs))
	requireContiguous(t, evs)
	raw, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.NotContains(t, string(raw), "assistant/chunk")
}

// S0-20: create without meta has no header cwd.
func TestS0_20_CreateWithoutMetaHasNoCwd(t *testing.T) {
	h := newHarness(t).withID("s20")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	disp := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s20"})
	require.NoError(t, h.env.GetWorkflowError())
	app.ok(t)
	disp.ok(t)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Empty(t, info.Header.Cwd)
	snap, err := h.store.Stat(context.Background(), "s20")
	require.NoError(t, err)
	require.Empty(t, snap.Header.Cwd)
	require.Contains(t, snap.Path, "_no-cwd")
}

// S0-21: a no-cwd session run and disposed in lifecycle 1 resumes in
// lifecycle 2 without a cwd.
func TestS0_21_NoCwdSurvivesResume(t *testing.T) {
	h := newHarness(t).withID("s21")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	disp := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s21"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	app.ok(t)
	disp.ok(t)
	info, _ := resumeAndDispose(t, h.store, "s21")
	require.Empty(t, info.Header.Cwd)
}

// S0-22: agent/session-start has source startup for create and resume for
// resume, exactly once each, after session/created and agent/created.
func TestS0_22_SessionStartSource(t *testing.T) {
	h := newHarness(t).withID("s22")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	var created workflows.Description
	h.at(2*time.Second, func() { created = h.describe("") })
	app := h.updateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "x")})
	disp := h.updateAt(4*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s22", Hooks: allHooks})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	app.ok(t)
	disp.ok(t)
	require.Equal(t, []workflows.LifecycleEntry{{Type: "session/created"}, {Type: "agent/created"}, {Type: "agent/session-start", Source: "startup"}}, created.Lifecycle)
	require.Equal(t, workflows.PhaseLive, created.Phase)

	h2 := newHarnessOn(t, h.store).withID("s22")
	ready2 := h2.updateAt(time.Second, "", workflows.UpdateWaitReady)
	var resumed workflows.Description
	h2.at(2*time.Second, func() { resumed = h2.describe("") })
	disp2 := h2.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h2.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "s22", Hooks: allHooks})
	require.NoError(t, h2.env.GetWorkflowError())
	ready2.ok(t)
	disp2.ok(t)
	require.Equal(t, []workflows.LifecycleEntry{{Type: "session/created"}, {Type: "agent/created"}, {Type: "agent/session-start", Source: "resume"}}, resumed.Lifecycle)
	require.Equal(t, []string{"setup:start", "setup:end", "setup:commit", "session/created", "agent/created", "agent/session-start:resume", "dispose:dispose"}, h2.hooks.log())
}

// S0-23: resume with a setup that waits: meanwhile nothing is published and
// only setup has started; afterwards the order of LIFECYCLE.md §6 holds; setup
// sees 3 events (2 stored + the marker, already stored).
func TestS0_23_ResumeAsyncSetupOrder(t *testing.T) {
	h := newHarness(t).withID("s23")
	persisted(t, h.store, "s23", "")
	var seen []string
	var in0 workflows.SetupInput
	h.env.OnActivity(hookSetup, mock.Anything, mock.Anything).After(5 * time.Second).Return(
		func(ctx context.Context, in workflows.SetupInput) (workflows.SetupResult, error) {
			in0 = in
			seen = types(stored(t, h.store, "s23"))
			return h.hooks.Setup(ctx, in)
		})
	// The snapshot is taken when setup starts (it then waits 5 s).
	var during workflows.Description
	var duringLog []string
	var duringSetupStarted int
	h.onStarted = func(name string) {
		if name == hookSetup {
			during = h.describe("")
			duringLog = h.hooks.log()
			duringSetupStarted = h.count(hookSetup)
		}
	}
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.updateAt(2*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "s23", Hooks: allHooks})
	require.NoError(t, h.env.GetWorkflowError())
	require.Equal(t, workflows.PhaseSetup, during.Phase)
	require.Empty(t, during.Lifecycle)
	require.Empty(t, duringLog)
	require.Equal(t, 1, duringSetupStarted)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	disp.ok(t)
	require.Equal(t, int64(3), in0.EventCount)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, seen)
	require.Equal(t, []string{"setup:start", "setup:end", "setup:commit", "session/created", "agent/created", "agent/session-start:resume", "dispose:dispose"}, h.hooks.log())
}

// S0-24: the first resume stores the marker; a second resume shows the same
// three events and stores nothing.
func TestS0_24_SecondResumeStoresNothing(t *testing.T) {
	st := newStore(t, jsonl.CompressionZstd)
	persisted(t, st, "s24", "")
	resumeAndDispose(t, st, "s24")
	first := stored(t, st, "s24")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, types(first))
	snap1, err := st.Stat(context.Background(), "s24")
	require.NoError(t, err)
	info, _ := resumeAndDispose(t, st, "s24")
	require.Equal(t, int64(3), info.NextSeq)
	require.Equal(t, int64(3), info.FirstLiveSeq)
	second := stored(t, st, "s24")
	require.Equal(t, types(first), types(second))
	snap2, err := st.Stat(context.Background(), "s24")
	require.NoError(t, err)
	require.Equal(t, snap1.SizeBytes, snap2.SizeBytes)
}

// S0-25: while a resumed session lives, its loop lists the effect
// agentLoop.lifecycle(<id>); after Dispose none remains.
func TestS0_25_LifecycleEffect(t *testing.T) {
	h := newHarness(t)
	persisted(t, h.store, "s25", "")
	start := h.updateAt(time.Second, "", workflows.UpdateStart, workflows.StartRequest{Resume: &workflows.ResumeSessionRequest{ResumeSessionID: "s25"}})
	ready := h.updateAt(2*time.Second, workflows.WorkflowID("s25"), workflows.UpdateWaitReady)
	var live, after workflows.LoopDescription
	query := func(out *workflows.LoopDescription) func() {
		return func() {
			v, err := h.env.QueryWorkflow(workflows.QueryDescribe)
			require.NoError(t, err)
			require.NoError(t, v.Get(out))
		}
	}
	h.at(3*time.Second, query(&live))
	disp := h.updateAt(4*time.Second, workflows.WorkflowID("s25"), workflows.UpdateDispose)
	h.waitFor(5*time.Second, "the disposed session settled", h.loopChildrenSettled(1))
	h.at(5*time.Second, query(&after))
	h.at(6*time.Second, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{})
	require.NoError(t, h.env.GetWorkflowError())
	start.ok(t)
	ready.ok(t)
	require.Equal(t, []string{"agentLoop.lifecycle(s25)"}, live.Effects)
	var dr workflows.DisposeResult
	disp.decode(t, &dr)
	require.Empty(t, after.Effects)
	require.Equal(t, workflows.ChildSettled, after.Children[0].State)
	requireReleased(t, h.store, "s25")
}

// S0-26: a setup that fails later on resume: nothing is published, and a
// retry resume succeeds.
func TestS0_26_ResumeAsyncSetupRejects(t *testing.T) {
	h := newHarness(t).withID("s26")
	persisted(t, h.store, "s26", "")
	h.env.OnActivity(hookSetup, mock.Anything, mock.Anything).After(time.Second).Return(workflows.SetupResult{}, plainErr("setup rejected"))
	h.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "s26", Hooks: allHooks})
	requireMessage(t, h.env.GetWorkflowError(), "setup rejected")
	require.Empty(t, h.describe("").Lifecycle)
	require.Equal(t, 0, h.count(hookPublish))
	// The repair (the marker) stays stored.
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, types(stored(t, h.store, "s26")))
	requireReleased(t, h.store, "s26")
	_, h2 := resumeAndDispose(t, h.store, "s26")
	require.Equal(t, 3, h2.count(hookPublish))
}

// S0-27: the commit hook fails on resume: nothing is published, and a
// retry resume succeeds.
func TestS0_27_ResumeCommitFails(t *testing.T) {
	h := newHarness(t).withID("s27")
	persisted(t, h.store, "s27", "")
	h.hooks.commit = func(context.Context, workflows.SetupInput) error { return plainErr("commit failed") }
	h.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "s27", Hooks: allHooks})
	requireMessage(t, h.env.GetWorkflowError(), "commit failed")
	require.Empty(t, h.describe("").Lifecycle)
	require.Equal(t, []string{"setup:start", "setup:end", "setup:commit", "dispose:rollback"}, h.hooks.log())
	requireReleased(t, h.store, "s27")
	_, h2 := resumeAndDispose(t, h.store, "s27")
	require.Equal(t, 3, h2.count(hookPublish))
}

// S0-28: the owner goes away while the resume's setup is pending: the
// resume fails `owner disposed during setup`; when the abandoned setup
// later completes, still nothing is published; the identity is released
// and can be resumed again.
func TestS0_28_OwnerUnloadDuringSetup(t *testing.T) {
	h := newHarness(t)
	persisted(t, h.store, "s28", "")
	setupSettled := false
	h.env.OnActivity(hookSetup, mock.Anything, mock.Anything).Once().After(time.Hour).Return(
		func(context.Context, workflows.SetupInput) (workflows.SetupResult, error) {
			setupSettled = true
			return workflows.SetupResult{}, nil
		})
	h.env.OnActivity(hookSetup, mock.Anything, mock.Anything).Return(h.hooks.Setup)
	resume := workflows.StartRequest{Resume: &workflows.ResumeSessionRequest{ResumeSessionID: "s28", Hooks: allHooks}}
	start := h.updateAt(time.Second, "", workflows.UpdateStart, resume)
	ready := h.updateNoWaitAt(time.Second, workflows.WorkflowID("s28"), workflows.UpdateWaitReady)
	// The owner goes away once the setup is pending.
	h.atStarted(time.Second, hookSetup, func() {
		require.NoError(t, h.env.SignalWorkflowByID(workflows.WorkflowID("s28"), workflows.SignalOwnerUnload, nil))
	})
	var afterUnload workflows.LoopDescription
	h.at(2*time.Second, func() {
		v, err := h.env.QueryWorkflow(workflows.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&afterUnload))
	})
	// Long after the abandoned setup completed (at 1 h).
	var settledBeforeRetry bool
	var publishedBeforeRetry int
	h.at(2*time.Hour, func() {
		settledBeforeRetry = setupSettled
		publishedBeforeRetry = h.count(hookPublish)
		requireReleased(t, h.store, "s28")
	})
	retry := h.updateAt(2*time.Hour, "", workflows.UpdateStart, resume)
	ready2 := h.updateAt(2*time.Hour, workflows.WorkflowID("s28"), workflows.UpdateWaitReady)
	disp2 := h.updateAt(2*time.Hour, workflows.WorkflowID("s28"), workflows.UpdateDispose)
	h.at(3*time.Hour, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{})
	require.NoError(t, h.env.GetWorkflowError())

	start.ok(t)
	app := requireMessage(t, ready.failure(t), `agent "s28" setup aborted: owner disposed during setup`)
	require.Equal(t, "OwnerDisposed", app.Type())
	require.Len(t, afterUnload.Children, 1)
	require.Equal(t, workflows.ChildSettled, afterUnload.Children[0].State)
	require.False(t, afterUnload.Children[0].WasLive)
	require.Equal(t, `agent "s28" setup aborted: owner disposed during setup`, afterUnload.Children[0].Error.Message)
	require.True(t, settledBeforeRetry, "the abandoned setup never completed")
	require.Equal(t, 0, publishedBeforeRetry, "the late setup published")
	retry.ok(t)
	ready2.ok(t)
	disp2.ok(t)
	require.Equal(t, 1, strings.Count(strings.Join(h.hooks.log(), ","), "agent/session-start:resume"))
	requireReleased(t, h.store, "s28")
}

// S0-29: the owner goes away while the backend open never settles: the
// resume fails promptly `owner disposed during setup`; an immediate retry
// opens and publishes once; when the first open finally lands it finds its
// handle id revoked, releases what it took, and its handle was closed
// exactly once; the lease ends released.
func TestS0_29_OwnerUnloadWhileOpenHangs(t *testing.T) {
	h := newHarness(t)
	persisted(t, h.store, "s29", "")
	var lateErr error
	lateDone := false
	h.env.OnActivity(h.acts.OpenHandle, mock.Anything, mock.Anything).Once().After(time.Hour).Return(
		func(ctx context.Context, in activities.OpenHandleInput) (activities.HandleInfo, error) {
			info, err := h.acts.OpenHandle(context.WithoutCancel(ctx), in)
			lateErr, lateDone = err, true
			return info, err
		})
	h.env.OnActivity(h.acts.OpenHandle, mock.Anything, mock.Anything).Return(h.acts.OpenHandle)
	resume := workflows.StartRequest{Resume: &workflows.ResumeSessionRequest{ResumeSessionID: "s29", Hooks: allHooks}}
	start := h.updateAt(time.Second, "", workflows.UpdateStart, resume)
	h.atStarted(2*time.Second, activities.OpenHandleName, func() {
		require.NoError(t, h.env.SignalWorkflowByID(workflows.WorkflowID("s29"), workflows.SignalOwnerUnload, nil))
	})
	var afterUnload workflows.LoopDescription
	h.at(3*time.Second, func() {
		v, err := h.env.QueryWorkflow(workflows.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&afterUnload))
	})
	retry := h.updateAt(4*time.Second, "", workflows.UpdateStart, resume)
	ready := h.updateAt(5*time.Second, workflows.WorkflowID("s29"), workflows.UpdateWaitReady)
	h.at(2*time.Hour, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{})
	require.NoError(t, h.env.GetWorkflowError())

	start.ok(t)
	require.Len(t, afterUnload.Children, 1)
	first := afterUnload.Children[0]
	require.Equal(t, workflows.ChildSettled, first.State)
	require.False(t, first.WasLive)
	require.Equal(t, `agent "s29" setup aborted: owner disposed during setup`, first.Error.Message)
	var sr workflows.StartResult
	retry.decode(t, &sr)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	// Exactly one publication.
	require.Equal(t, 1, strings.Count(strings.Join(h.hooks.log(), ","), "agent/session-start:resume"))
	// The late open landed while the retry owned the session: it was
	// refused and left the retry's lease alone.
	require.True(t, lateDone, "the first open never landed")
	require.Equal(t, "SessionAlreadyOwned", appErr(t, lateErr).Type())
	var firstOpen activities.OpenHandleInput
	h.startedArg(activities.OpenHandleName, 0, &firstOpen)
	closes := 0
	for _, id := range h.closedHandles() {
		if id == firstOpen.HandleID {
			closes++
		}
	}
	require.Equal(t, 1, closes)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, types(stored(t, h.store, "s29")))
	requireReleased(t, h.store, "s29")
}

// S0-30: the loop deactivates while the open hangs: the resume fails
// `agent loop is not active` at once, the loop waits for it to settle,
// nothing is published; the open then lands (while a neighbour's slow
// disposal keeps the teardown running), is refused and releases what it
// took, and its handle id was closed once.
func TestS0_30_LoopDeactivatedWhileOpenHangs(t *testing.T) {
	h := newHarness(t)
	persisted(t, h.store, "s30", "")
	late := h.lateOpen(time.Hour)
	h.env.OnActivity(hookDispose, mock.Anything, mock.Anything).After(2 * time.Hour).Return(nil)
	neighbour := h.updateAt(time.Second, "", workflows.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{
		SessionID: "neighbour", Hooks: workflows.Hooks{DisposeActivity: hookDispose}}})
	neighbourReady := h.updateAt(time.Second, workflows.WorkflowID("neighbour"), workflows.UpdateWaitReady)
	start := h.updateAt(time.Second, "", workflows.UpdateStart, workflows.StartRequest{Resume: &workflows.ResumeSessionRequest{ResumeSessionID: "s30", Hooks: allHooks}})
	h.atStarted(2*time.Second, activities.OpenHandleName, h.env.CancelWorkflow)
	var midTeardown workflows.LoopDescription
	var landedByMid bool
	h.at(10*time.Second, func() {
		v, err := h.env.QueryWorkflow(workflows.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&midTeardown))
		landedByMid = late.done
	})
	h.env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{})
	require.NoError(t, h.env.GetWorkflowError())
	neighbour.ok(t)
	neighbourReady.ok(t)
	start.ok(t)
	// Settled long before the open landed.
	require.False(t, midTeardown.Active)
	require.Equal(t, "s30", midTeardown.Children[1].SessionID)
	require.Equal(t, workflows.ChildSettled, midTeardown.Children[1].State)
	require.Equal(t, "agent loop is not active", midTeardown.Children[1].Error.Message)
	require.False(t, landedByMid, "the open landed before the resume settled")
	var res workflows.LoopDescription
	require.NoError(t, h.env.GetWorkflowResult(&res))
	require.False(t, res.Active)
	require.Len(t, res.Children, 2)
	require.Equal(t, workflows.ChildSettled, res.Children[1].State)
	require.Equal(t, "agent loop is not active", res.Children[1].Error.Message)
	require.Equal(t, 0, h.count(hookPublish))
	requireLateOpenReleased(t, h, late, "s30")
	requireErased(t, h.store, "neighbour")
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
func (h *harness) lateOpen(d time.Duration) *lateOpenResult {
	late := &lateOpenResult{}
	h.env.OnActivity(h.acts.OpenHandle, mock.Anything, mock.Anything).Once().After(d).Return(
		func(ctx context.Context, in activities.OpenHandleInput) (activities.HandleInfo, error) {
			info, err := h.acts.OpenHandle(context.WithoutCancel(ctx), in)
			late.err, late.done = err, true
			return info, err
		})
	h.env.OnActivity(h.acts.OpenHandle, mock.Anything, mock.Anything).Return(h.acts.OpenHandle)
	return late
}

// requireLateOpenReleased checks that the abandoned first open landed
// during the run, was refused (its handle id revoked), that its handle id
// was closed exactly once, and that the session is stored and released.
func requireLateOpenReleased(t *testing.T, h *harness, late *lateOpenResult, id string) {
	t.Helper()
	require.True(t, late.done, "the late open never landed")
	app := appErr(t, late.err)
	require.Equal(t, "HandleRevoked", app.Type())
	var in activities.OpenHandleInput
	h.startedArg(activities.OpenHandleName, 0, &in)
	closes := 0
	for _, hid := range h.closedHandles() {
		if hid == in.HandleID {
			closes++
		}
	}
	require.Equal(t, 1, closes)
	requireReleased(t, h.store, id)
}

// S0-31: a fork round trip: create with a seed, cwd, parentSession,
// isSeeded, delegationDepth 1 and inheritedEventCount 2; after a resume all
// of them hold and the inherited count comes from storage.
func TestS0_31_ForkRoundTrip(t *testing.T) {
	h := newHarness(t).withID("s31")
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.updateAt(2*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{
		SessionID:           "s31",
		Seed:                []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)},
		Meta:                &workflows.SessionMeta{Cwd: "/w", ParentSession: "parent-sess", IsSeeded: true, DelegationDepth: 1},
		InheritedEventCount: 2,
	})
	require.NoError(t, h.env.GetWorkflowError())
	var created workflows.SessionInfo
	ready.decode(t, &created)
	disp.ok(t)
	require.Equal(t, int64(2), created.InheritedEventCount)
	info, _ := resumeAndDispose(t, h.store, "s31")
	require.Equal(t, "parent-sess", info.Header.ParentSession)
	require.Equal(t, "/w", info.Header.Cwd)
	require.True(t, info.Header.IsSeeded)
	require.Equal(t, int64(1), info.Header.DelegationDepth)
	require.Equal(t, int64(2), info.InheritedEventCount)
	evs := stored(t, h.store, "s31")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, types(evs))
	marker, err := evs[2].IsInheritedMarker()
	require.NoError(t, err)
	require.True(t, marker)
}

// S0-32: an idle injection flushed as agent/inbox/spliced after a completed
// turn; the owner is wedged (its lease forfeited); a new lifecycle resumes,
// stores only the marker (no synthetic turn) and continues at turn 2.
func TestS0_32_SpliceSurvivesWedgedOwner(t *testing.T) {
	h := newHarness(t).withID("s32")
	splice := ev(t, session.TypeInboxSpliced, 5, map[string]any{"list": "nextStep", "op": "append", "messages": []any{map[string]any{"role": "user", "content": "later"}}})
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: append(liveTurn(t, 0, 1, "x"), splice)})
	var info workflows.SessionInfo
	var after []session.Event
	h.at(3*time.Second, func() {
		lease, err := h.store.ForceUnlock(context.Background(), "s32")
		require.NoError(t, err)
		require.NotNil(t, lease)
		info, _ = resumeAndDispose(t, h.store, "s32")
		after = stored(t, h.store, "s32")
	})
	h.at(4*time.Second, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s32"})
	require.NoError(t, h.env.GetWorkflowError())
	ready.ok(t)
	app.ok(t)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "step/end", "turn/end", "agent/inbox/spliced", "session/end-seed"}, types(after))
	require.Equal(t, int64(1), info.LastTurn)
	require.Equal(t, int64(7), info.NextSeq)
	// The wedged owner's late disposal changed nothing.
	require.Equal(t, types(after), types(stored(t, h.store, "s32")))
	requireReleased(t, h.store, "s32")
}

// S0-33: one full turn, dispose, resume in a fresh environment: same id,
// old events unchanged plus the marker at the old count; a new turn is
// turn 2 and seqs stay contiguous.
func TestS0_33_ResumeContinuesNumbering(t *testing.T) {
	h := newHarness(t).withID("s33")
	ready1 := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app1 := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "first")})
	disp1 := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s33"})
	require.NoError(t, h.env.GetWorkflowError())
	ready1.ok(t)
	app1.ok(t)
	disp1.ok(t)
	old := stored(t, h.store, "s33")

	h2 := newHarnessOn(t, h.store).withID("s33")
	ready := h2.updateAt(time.Second, "", workflows.UpdateWaitReady)
	var mid []session.Event
	h2.at(2*time.Second, func() { mid = stored(t, h2.store, "s33") })
	app := h2.updateAt(3*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 6, 2, "second")})
	disp2 := h2.updateAt(4*time.Second, "", workflows.UpdateDispose)
	h2.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "s33"})
	require.NoError(t, h2.env.GetWorkflowError())
	disp2.ok(t)
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Equal(t, "s33", info.SessionID)
	require.Len(t, mid, len(old)+1)
	require.Equal(t, int64(len(old)), info.FirstLiveSeq)
	require.Equal(t, session.TypeEndSeed, mid[len(mid)-1].Type)
	for i := range old {
		a, _ := old[i].MarshalJSON()
		b, _ := mid[i].MarshalJSON()
		require.Equal(t, string(a), string(b))
	}
	require.Equal(t, info.LastTurn+1, int64(2))
	var ar workflows.AppendResult
	app.decode(t, &ar)
	final := stored(t, h.store, "s33")
	requireContiguous(t, final)
	require.Len(t, final, 11)
}

// S0-34: without persistence a resume fails `session persistence is not
// configured`.
func TestS0_34_ResumeWithoutPersistence(t *testing.T) {
	h := newHarnessOn(t, nil).withID("s34")
	h.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "s34"})
	err := h.env.GetWorkflowError()
	requireMessage(t, err, "cannot resume: session persistence is not configured (load a dsh-session-persistence backend)")
	require.Empty(t, h.describe("").Lifecycle)
}
