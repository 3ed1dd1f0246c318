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
		{"max parallel tool calls", workflows.SessionLoopInput{MaxParallelToolCalls: f64(0.5)},
			"maxParallelToolCalls must be a positive integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.env.ExecuteWorkflow(workflows.SessionLoop, c.in)
			requireMessage(t, h.env.GetWorkflowError(), c.want)
			require.Empty(t, h.startedNames())
		})
	}
}

func TestLoopRefusesWorkWhenInactive(t *testing.T) {
	h := newHarness(t)
	start := h.updateAt(time.Second, "", workflows.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "live"}})
	ready := h.updateAt(2*time.Second, workflows.WorkflowID("live"), workflows.UpdateWaitReady)
	late := h.newResult(workflows.UpdateStart)
	h.at(3*time.Second, func() {
		h.env.CancelWorkflow()
		h.send(late, "", workflows.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "late"}})
	})
	h.env.ExecuteWorkflow(workflows.SessionLoop, workflows.SessionLoopInput{})
	require.NoError(t, h.env.GetWorkflowError())
	start.ok(t)
	ready.ok(t)
	require.ErrorContains(t, late.rejection(t), "agent loop is not active")
	var res workflows.LoopDescription
	require.NoError(t, h.env.GetWorkflowResult(&res))
	require.Len(t, res.Children, 1)
	require.True(t, res.Children[0].WasLive)
	require.Equal(t, workflows.ChildSettled, res.Children[0].State)
	require.Nil(t, res.Children[0].Error, "a live child disposes cleanly on deactivation")
	// Never appended to, so its disposal erased it.
	requireErased(t, h.store, "live")
}

// LIFECYCLE.md §7.2, a failing setup hook, for a resume of an open turn:
// nothing published, handle closed, and the closers and marker remain
// stored.
func TestRollbackResumeSetupKeepsRepair(t *testing.T) {
	h := newHarness(t).withID("rb")
	writeStored(t, h.store, session.Header{ID: "rb", CreatedAt: 1}, 0, []session.Event{turnStart(t, 0, 1)})
	h.hooks.setup = func(context.Context, workflows.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{}, plainErr("setup failed")
	}
	h.env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: "rb", Hooks: allHooks})
	requireMessage(t, h.env.GetWorkflowError(), "setup failed")
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, types(stored(t, h.store, "rb")))
	require.Equal(t, 0, h.count(hookPublish))
	requireReleased(t, h.store, "rb")
}

// LIFECYCLE.md §7.2, a failing commit point, with setup events: the whole
// suffix is one batch; nothing is stored when it fails.
func TestCreateSetupEventsStoredWithSeed(t *testing.T) {
	h := newHarness(t).withID("se")
	h.hooks.setup = func(_ context.Context, in workflows.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{Events: []session.Event{ev(t, session.TypeTodoWrite, in.EventCount, map[string]any{"todos": []any{}})}}, nil
	}
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.updateAt(2*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "se", Seed: []session.Event{turnStart(t, 0, 1), turnEnd(t, 1, 1)}, Hooks: allHooks})
	require.NoError(t, h.env.GetWorkflowError())
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Equal(t, int64(4), info.NextSeq)
	require.Equal(t, 1, h.count(activities.AppendBatchName), "seed, marker and setup events in one batch")
	disp.ok(t)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed", "todo/write"}, types(stored(t, h.store, "se")))
	requireReleased(t, h.store, "se")
}

// A create refused by validation has no side effect at all.
func TestCreateValidationBeforeSideEffects(t *testing.T) {
	h := newHarness(t)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "bad", Seed: []session.Event{turnStart(t, 1, 1)}})
	app := appErr(t, h.env.GetWorkflowError())
	require.Equal(t, "InvalidArgument", app.Type())
	require.Empty(t, h.startedNames())
	lease, err := h.store.LeaseOf(context.Background(), "bad")
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
	h := newHarness(t)
	h.env.RegisterWorkflow(dupParent)
	dup := h.updateAt(time.Second, "loop", workflows.UpdateStart, workflows.StartRequest{Create: &workflows.CreateSessionRequest{SessionID: "dup"}})
	disp := h.updateAt(2*time.Second, workflows.WorkflowID("dup"), workflows.UpdateDispose)
	h.at(3*time.Second, func() { h.env.CancelWorkflowByID("loop", "") })
	h.env.ExecuteWorkflow(dupParent)
	require.NoError(t, h.env.GetWorkflowError())
	app := requireMessage(t, dup.failure(t), `session "dup" already exists`)
	disp.ok(t)
	require.Equal(t, "SessionAlreadyExists", app.Type())
	require.Equal(t, 1, h.count(activities.CreateHandleName))
	requireErased(t, h.store, "dup")
}
