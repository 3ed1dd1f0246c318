package testsuite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/workflows"
)

// phaseUpserts records the SessionPhase values a run upserts.
func phaseUpserts(h *harness) *[]string {
	var phases []string
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		if v, ok := sa.GetKeyword(workflows.SearchAttributeSessionPhase); ok {
			phases = append(phases, v)
		}
	}).Return(nil)
	return &phases
}

// With Options.SearchAttributes the workflow keeps SessionPhase current
// through its lifecycle.
func TestSessionPhaseSearchAttribute(t *testing.T) {
	h := newHarness(t)
	phases := phaseUpserts(h)
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.updateAt(2*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{
		SessionID: "sa", Options: &workflows.Options{SearchAttributes: true},
	})
	require.NoError(t, h.env.GetWorkflowError())
	var info workflows.SessionInfo
	ready.decode(t, &info)
	var dr workflows.DisposeResult
	disp.decode(t, &dr)
	require.Equal(t, []string{"setup", "committing", "live", "disposing", "closed"}, *phases)
}

// Without the option (every run recorded before it existed) nothing is
// upserted, so those histories replay unchanged.
func TestSessionPhaseSearchAttributeOff(t *testing.T) {
	h := newHarness(t)
	phases := phaseUpserts(h)
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	disp := h.updateAt(2*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "nosa"})
	require.NoError(t, h.env.GetWorkflowError())
	var info workflows.SessionInfo
	ready.decode(t, &info)
	var dr workflows.DisposeResult
	disp.decode(t, &dr)
	require.Empty(t, *phases)
}
