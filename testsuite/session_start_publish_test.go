package testsuite

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/workflows"
)

// A create whose agent/session-start publication fails, after
// session/created and agent/created succeeded, fails with that error: the
// session never goes live and is erased.
func TestCreateFailsWhenSessionStartPublicationFails(t *testing.T) {
	h := NewHarness(t).WithID("ssp")
	var published []string
	h.Hooks.PublishFunc = func(_ context.Context, in workflows.PublishInput) error {
		published = append(published, in.Entry.Type)
		if in.Entry.Type == "agent/session-start" {
			return PlainErr("start announcement refused")
		}
		return nil
	}
	ready := h.UpdateAt(0, "", workflows.UpdateWaitReady)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ssp", Hooks: AllHooks})
	RequireMessage(t, h.Env.GetWorkflowError(), "start announcement refused")
	require.Equal(t, []string{"session/created", "agent/created", "agent/session-start"}, published)
	RequireMessage(t, ready.Failure(t), "start announcement refused")
	require.Equal(t, workflows.PhaseClosed, h.Describe("").Phase)
	RequireErased(t, h.Store, "ssp")
}
