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
	h := newHarness(t).withID("ssp")
	var published []string
	h.hooks.publish = func(_ context.Context, in workflows.PublishInput) error {
		published = append(published, in.Entry.Type)
		if in.Entry.Type == "agent/session-start" {
			return plainErr("start announcement refused")
		}
		return nil
	}
	ready := h.updateAt(0, "", workflows.UpdateWaitReady)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ssp", Hooks: allHooks})
	requireMessage(t, h.env.GetWorkflowError(), "start announcement refused")
	require.Equal(t, []string{"session/created", "agent/created", "agent/session-start"}, published)
	requireMessage(t, ready.failure(t), "start announcement refused")
	require.Equal(t, workflows.PhaseClosed, h.describe("").Phase)
	requireErased(t, h.store, "ssp")
}
