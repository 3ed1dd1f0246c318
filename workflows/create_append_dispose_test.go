package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestCreateAppendDispose(t *testing.T) {
	h := sessiontest.NewHarness(t)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "hi")})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s1", Hooks: sessiontest.AllHooks})
	require.NoError(t, h.Env.GetWorkflowError())
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, "s1", info.SessionID)
	var ar wire.AppendResult
	app.Decode(t, &ar)
	require.Equal(t, int64(5), ar.NextSeq)
	var dr wire.DisposeResult
	disp.Decode(t, &dr)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "s1")))
	sessiontest.RequireReleased(t, h.Store, "s1")
	t.Log(h.Hooks.Log(), h.StartedNames())
}
