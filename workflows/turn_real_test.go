package workflows_test

// The agent loop over the real agent activities, the scripted provider and
// the built-in tools.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

func assistantOf(t *testing.T, e session.Event) wire.AssistantMessage {
	t.Helper()
	m, err := e.AssistantMessage()
	require.NoError(t, err)
	return m
}

func TestRealTurnPlain(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rp")
	sessiontest.UseRealAgentTools(h, nil, scripted.Text("Hello there").WithChunkSize(4).WithUsage(10, 3))
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "rp", AgentOptions: sessiontest.Route()}, sessiontest.PromptID("m1", "hi"))
	sessiontest.RequireBalanced(t, evs)
	evs = sessiontest.WithoutRecords(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	m := assistantOf(t, evs[3])
	require.Equal(t, int64(1), m.Turn)
	require.Equal(t, int64(1), m.Step)
	require.Equal(t, []wire.ContentBlock{{Type: "text", Text: "Hello there"}}, m.Message.Content)
	require.JSONEq(t, `{"inputTokens":10,"outputTokens":3}`, string(m.Usage))
	require.Equal(t, `{"turn":1,"reason":{"kind":"completed"}}`, string(evs[5].Data))
}

// Tool calls run for real in the session's cwd: two parallel reads and an
// exclusive write; results are stored in model order; the next step
// answers.
func TestRealTurnTools(t *testing.T) {
	cwd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("alpha\n"), 0o644))
	h := sessiontest.NewHarness(t).WithID("rt")
	sessiontest.UseRealAgentTools(h, nil,
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "c1", Name: "read_file", Arguments: `{"path":"a.txt"}`},
			{ID: "c2", Name: "list_dir", Arguments: `{}`},
			{ID: "c3", Name: "write_file", Arguments: `{"path":"b.txt","content":"beta"}`},
			{ID: "c4", Name: "read_file", Arguments: `{"path":"../outside"}`},
		}},
		scripted.Text("done"),
	)
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "rt", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: cwd}}, sessiontest.Prompt("work"))
	sessiontest.RequireBalanced(t, evs)
	var results []string
	for _, e := range evs {
		if e.Type == wire.TypeToolResult {
			r, err := e.ToolResult()
			require.NoError(t, err)
			results = append(results, r.Message.Source.CallID)
			if r.Message.Source.CallID == "c4" {
				require.True(t, r.Message.Content[0].IsError)
				require.Equal(t, "OUTSIDE_CWD", r.Error.Code)
			}
		}
	}
	require.Equal(t, []string{"c1", "c2", "c3", "c4"}, results, "results in model order")
	b, err := os.ReadFile(filepath.Join(cwd, "b.txt"))
	require.NoError(t, err)
	require.Equal(t, "beta", string(b))
	last := assistantOf(t, evs[len(evs)-3])
	require.Equal(t, int64(2), last.Step)
	require.Equal(t, "done", last.Message.Content[0].Text)
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}

// The script's end is a refused call: the turn ends "error" with the
// provider's text, and nothing of the call is stored.
func TestRealTurnRefused(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rr")
	sessiontest.UseRealAgentTools(h, nil)
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "rr", AgentOptions: sessiontest.Route()}, sessiontest.Prompt("hi"))
	sessiontest.RequireBalanced(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	te, err := evs[4].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "error", te.Reason.Kind)
	var f struct{ Message, Code string }
	require.NoError(t, json.Unmarshal(te.Reason.Error, &f))
	require.Contains(t, f.Message, "script exhausted")
	require.Equal(t, 1, h.Count(wire.CallModelActivity), "a refused call is not retried")
}

// max-tokens ends the step without running its tool calls (EndTurn closes
// them); the step limit ends a turn blocked.
func TestRealTurnMaxTokensAndStepLimit(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rm")
	call := func(id string) scripted.Response {
		return scripted.Response{ToolCalls: []scripted.Call{{ID: id, Name: "list_dir", Arguments: `{}`}}}
	}
	cut := scripted.Response{Text: "cut", ToolCalls: []scripted.Call{{ID: "x", Name: "list_dir"}}, Finish: provider.FinishMaxTokens}
	sessiontest.UseRealAgentTools(h, nil, cut, call("c1"), call("c2"))
	opts := sessiontest.Route()
	one := 1.0
	opts.MaxSteps = &one
	cwd := t.TempDir()
	h.RunTurns(workflows.CreateSessionRequest{SessionID: "rm", AgentOptions: opts, Meta: &wire.SessionMeta{Cwd: cwd}}, sessiontest.Prompt("one"), sessiontest.Prompt("two"))
	evs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, h.Store, "rm"))
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end"}, sessiontest.Types(evs),
		"the cut call is closed, not run (D40)")
	require.Equal(t, []string{"max-tokens", "blocked"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Zero(t, h.Count(wire.RunToolActivity)-1, "only turn 2's call ran")
}
