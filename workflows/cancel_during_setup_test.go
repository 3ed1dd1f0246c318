package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/workflows"
)

// A cancellation of a create during its setup hook, with no Abort signal
// before it, aborts the create with `agent "<id>" creation aborted` and an
// empty reason; nothing is published, and the session is erased.
func TestPlainCancelDuringSetupIsCreationAborted(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("pc")
	h.Env.OnActivity(sessiontest.HookSetup, mock.Anything, mock.Anything).After(time.Hour).Return(workflows.SetupResult{}, nil)
	h.At(time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "pc", Hooks: sessiontest.AllHooks})
	app := sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), `agent "pc" creation aborted`)
	require.Equal(t, "AbortError", app.Type())
	var reason string
	require.NoError(t, app.Details(&reason))
	require.Equal(t, "", reason)
	require.Equal(t, 0, h.Count(sessiontest.HookPublish))
	sessiontest.RequireErased(t, h.Store, "pc")
}
