package testsuite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/workflows"
)

func TestCreateAppendDispose(t *testing.T) {
	h := newHarness(t)
	ready := h.updateAt(time.Second, "", workflows.UpdateWaitReady)
	app := h.updateAt(2*time.Second, "", workflows.UpdateAppend, workflows.AppendRequest{Events: liveTurn(t, 0, 1, "hi")})
	disp := h.updateAt(3*time.Second, "", workflows.UpdateDispose)
	h.env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "s1", Hooks: allHooks})
	require.NoError(t, h.env.GetWorkflowError())
	var info workflows.SessionInfo
	ready.decode(t, &info)
	require.Equal(t, "s1", info.SessionID)
	var ar workflows.AppendResult
	app.decode(t, &ar)
	require.Equal(t, int64(5), ar.NextSeq)
	var dr workflows.DisposeResult
	disp.decode(t, &dr)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "step/end", "turn/end"}, types(stored(t, h.store, "s1")))
	requireReleased(t, h.store, "s1")
	t.Log(h.hooks.log(), h.startedNames())
}
