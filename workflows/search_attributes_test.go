package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// phaseUpserts records the SessionPhase values a run upserts.
func phaseUpserts(h *sessiontest.Harness) *[]string {
	var phases []string
	h.Env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
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
	h := sessiontest.NewHarness(t)
	phases := phaseUpserts(h)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{
		SessionID: "sa", Options: &wire.Options{SearchAttributes: true},
	})
	require.NoError(t, h.Env.GetWorkflowError())
	var info wire.SessionInfo
	ready.Decode(t, &info)
	var dr wire.DisposeResult
	disp.Decode(t, &dr)
	require.Equal(t, []string{"setup", "committing", "live", "disposing", "closed"}, *phases)
}

// Without the option (every run recorded before it existed) nothing is
// upserted, so those histories replay unchanged.
func TestSessionPhaseSearchAttributeOff(t *testing.T) {
	h := sessiontest.NewHarness(t)
	phases := phaseUpserts(h)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	disp := h.UpdateAt(2*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "nosa"})
	require.NoError(t, h.Env.GetWorkflowError())
	var info wire.SessionInfo
	ready.Decode(t, &info)
	var dr wire.DisposeResult
	disp.Decode(t, &dr)
	require.Empty(t, *phases)
}
