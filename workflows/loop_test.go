package testsuite

// SessionLoop construction checks and registry rules (LIFECYCLE.md §11),
// and the rollback rows of LIFECYCLE.md §7.2 that no S0 case pins on the
// store by itself.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/internal/sessiontest"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestLoopConfigValidation(t *testing.T) {
	cases := []struct {
		name string
		in   workflows.SessionLoopInput
		want string
	}{
		{"mutually exclusive", workflows.SessionLoopInput{Agents: []workflows.AgentConfig{{ID: "main", SessionID: "a", ResumeSessionID: "b"}}},
			`agent "main": sessionId and resumeSessionId are mutually exclusive`},
		{"duplicate identity", workflows.SessionLoopInput{Agents: []workflows.AgentConfig{{ID: "one", SessionID: "same"}, {ID: "two", ResumeSessionID: "same"}}},
			`agents "one" and "two" use duplicate exact session identity "same"`},
		{"launcher identity duplicates", workflows.SessionLoopInput{
			Agents:                    []workflows.AgentConfig{{ID: "one", SessionID: "a"}, {ID: "two", SessionID: "b"}},
			ConfiguredAgentIdentities: map[string]workflows.AgentIdentity{"two": {ID: "a", Resume: true}}},
			`agents "one" and "two" use duplicate exact session identity "a"`},
		{"max parallel tool calls", workflows.SessionLoopInput{MaxParallelToolCalls: sessiontest.F64(0.5)},
			"maxParallelToolCalls must be a positive integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := sessiontest.NewHarness(t)
			h.Env.ExecuteWorkflow(workflows.SessionLoop, c.in)
			sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), c.want)
			require.Empty(t, h.StartedNames())
		})
	}
}

func TestLoopRefusesWorkWhenInactive(t *testing.T) {
	h := sessiontest.NewHarness(t)
	start := h.UpdateAt(time.Second, "", workflows.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "live"}})
	ready := h.UpdateAt(2*time.Second, workflows.WorkflowID("live"), workflows.UpdateWaitReady)
	late := h.NewResult(workflows.UpdateStart)
	h.At(3*time.Second, func() {
		h.Env.CancelWorkflow()
		h.Send(late, "", workflows.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "late"}})
	})
	h.Env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{})
	require.NoError(t, h.Env.GetWorkflowError())
	start.OK(t)
	ready.OK(t)
	require.ErrorContains(t, late.Rejection(t), "agent loop is not active")
	var res workflows.LoopDescription
	require.NoError(t, h.Env.GetWorkflowResult(&res))
	require.Len(t, res.Children, 1)
	require.True(t, res.Children[0].WasLive)
	require.Equal(t, workflows.ChildSettled, res.Children[0].State)
	require.Nil(t, res.Children[0].Error, "a live child disposes cleanly on deactivation")
	// Never appended to, so its disposal erased it.
	sessiontest.RequireErased(t, h.Store, "live")
}

// LIFECYCLE.md §7.2, a failing setup hook, for a resume of an open turn:
// nothing published, handle closed, and the closers and marker remain
// stored.
func TestRollbackResumeSetupKeepsRepair(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rb")
	sessiontest.WriteStored(t, h.Store, session.Header{ID: "rb", CreatedAt: 1}, 0, []session.Event{sessiontest.TurnStart(t, 0, 1)})
	h.Hooks.SetupFunc = func(context.Context, workflows.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{}, sessiontest.PlainErr("setup failed")
	}
	h.Env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "rb", Hooks: sessiontest.AllHooks})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "setup failed")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "rb")))
	require.Equal(t, 0, h.Count(sessiontest.HookPublish))
	sessiontest.RequireReleased(t, h.Store, "rb")
}

// LIFECYCLE.md §7.2, a failing commit point, with setup events: the whole
// suffix is one batch; nothing is stored when it fails.
func TestCreateSetupEventsStoredWithSeed(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("se")
	h.Hooks.SetupFunc = func(_ context.Context, in workflows.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{Events: []session.Event{sessiontest.Ev(t, session.TypeTodoWrite, in.EventCount, map[string]any{"todos": []any{}})}}, nil
	}
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "se", Seed: []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}, Hooks: sessiontest.AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	var info workflows.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, int64(4), info.NextSeq)
	require.Equal(t, 1, h.Count(activities.AppendBatchName), "seed, marker and setup events in one batch")
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

// dupParent runs a session outside the loop's registry, then a loop: a
// Start of the same id in the loop is refused by Temporal's workflow id
// uniqueness, reported as `session "<id>" already exists`.
func dupParent(ctx workflow.Context) error {
	live := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: workflows.WorkflowID("dup")}),
		workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "dup"})
	if err := live.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return err
	}
	loop := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: "loop"}),
		workflows.SessionLoop, workflows.SessionLoopInput{})
	if err := loop.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return err
	}
	if err := live.Get(ctx, nil); err != nil {
		return err
	}
	// The loop is cancelled from outside; only its settling matters here.
	_ = loop.Get(ctx, nil)
	return nil
}

func TestLoopStartOfRunningIDAlreadyExists(t *testing.T) {
	h := sessiontest.NewHarness(t)
	h.Env.RegisterWorkflow(dupParent)
	dup := h.UpdateAt(time.Second, "loop", workflows.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "dup"}})
	disp := h.UpdateAt(2*time.Second, workflows.WorkflowID("dup"), workflows.UpdateDispose)
	h.At(3*time.Second, func() { h.Env.CancelWorkflowByID("loop", "") })
	h.Env.ExecuteWorkflow(dupParent)
	require.NoError(t, h.Env.GetWorkflowError())
	app := sessiontest.RequireMessage(t, dup.Failure(t), `session "dup" already exists`)
	disp.OK(t)
	require.Equal(t, "SessionAlreadyExists", app.Type())
	require.Equal(t, 1, h.Count(activities.CreateHandleName))
	sessiontest.RequireErased(t, h.Store, "dup")
}
