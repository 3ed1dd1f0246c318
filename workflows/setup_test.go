package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// The setup hooks of create and resume: what they see, what a failing
// one leaves (the rollback rows of LIFECYCLE.md §7.2 that no S0 case pins
// on the store by itself), and the validation done before any side
// effect.

// LIFECYCLE.md §7.2, a failing setup hook, for a resume of an open turn:
// nothing published, handle closed, and the closers and marker remain
// stored.
func TestRollbackResumeSetupKeepsRepair(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rb")
	sessiontest.WriteStored(t, h.Store, wire.Header{ID: "rb", CreatedAt: 1}, 0, []session.Event{sessiontest.TurnStart(t, 0, 1)})
	h.Hooks.SetupFunc = func(context.Context, wire.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{}, sessiontest.PlainErr("setup failed")
	}
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "rb", Hooks: sessiontest.AllHooks})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "setup failed")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "rb")))
	require.Equal(t, 0, h.Count(sessiontest.HookPublish))
	sessiontest.RequireReleased(t, h.Store, "rb")
}

// LIFECYCLE.md §7.2, a failing commit point, with setup events: the whole
// suffix is one batch; nothing is stored when it fails.
func TestCreateSetupEventsStoredWithSeed(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("se")
	h.Hooks.SetupFunc = func(_ context.Context, in wire.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{Events: []session.Event{sessiontest.Ev(t, wire.TypeTodoWrite, in.EventCount, map[string]any{"todos": []any{}})}}, nil
	}
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "se", Seed: []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}, Hooks: sessiontest.AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, int64(4), info.NextSeq)
	require.Equal(t, 1, h.Count(wire.AppendBatchName), "seed, marker and setup events in one batch")
	disp.OK(t)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed", "todo/write"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "se")))
	sessiontest.RequireReleased(t, h.Store, "se")
}

// A create refused by validation has no side effect at all.
func TestCreateValidationBeforeSideEffects(t *testing.T) {
	h := sessiontest.NewHarness(t)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "bad", Seed: []session.Event{sessiontest.TurnStart(t, 1, 1)}})
	app := sessiontest.AppErr(t, h.Env.GetWorkflowError())
	require.Equal(t, "InvalidArgument", app.Type())
	require.Empty(t, h.StartedNames())
	lease, err := h.Store.LeaseOf(context.Background(), "bad")
	require.NoError(t, err)
	require.Nil(t, lease)
}
