package workflows_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// A create whose agent/session-start publication fails, after
// session/created and agent/created succeeded, fails with that error: the
// session never goes live and is erased.
func TestCreateFailsWhenSessionStartPublicationFails(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ssp")
	var published []string
	h.Hooks.PublishFunc = func(_ context.Context, in wire.PublishInput) error {
		published = append(published, in.Entry.Type)
		if in.Entry.Type == "agent/session-start" {
			return sessiontest.PlainErr("start announcement refused")
		}
		return nil
	}
	ready := h.UpdateAt(0, "", wire.UpdateWaitReady)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ssp", Hooks: sessiontest.AllHooks})
	sessiontest.RequireMessage(t, h.Env.GetWorkflowError(), "start announcement refused")
	require.Equal(t, []string{"session/created", "agent/created", "agent/session-start"}, published)
	sessiontest.RequireMessage(t, ready.Failure(t), "start announcement refused")
	require.Equal(t, wire.PhaseClosed, h.Describe("").Phase)
	sessiontest.RequireErased(t, h.Store, "ssp")
}
