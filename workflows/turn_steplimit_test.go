package workflows_test

import (
	"testing"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

// A model that asks for a tool at every step, forever: the turn ends
// "blocked" at the default step limit, 100 steps (docs/API.md, maxSteps),
// after 100 model calls and 100 tool runs. Only the limit ends this turn:
// were it broken, the harness's deadline would fail this test by name with
// the activities it ran, instead of the package hanging.
func TestRealTurnDefaultStepLimit(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rd")
	p, err := scripted.New(scripted.Script{Loop: true, Responses: []scripted.Response{
		{ToolCalls: []scripted.Call{{ID: "c1", Name: "list_dir", Arguments: `{}`}}},
	}})
	require.NoError(t, err)
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"scripted": p}))
	req := workflows.CreateSessionRequest{SessionID: "rd", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: t.TempDir()}}
	evs := h.RunTurns(req, sessiontest.Prompt("go on forever"))
	require.Equal(t, []string{"blocked"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Equal(t, 100, h.Count(wire.CallModelActivity), "model calls")
	require.Equal(t, 100, h.Count(wire.RunToolActivity), "tool runs")
}
