package workflows_test

// A step whose tool calls are not all run (a max-tokens finish, a failed
// tool activity) closes them, so the next model request holds no tool call
// without a result: real providers refuse such a request.

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"testing"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

// strictProvider refuses, as OpenAI's and Anthropic's APIs do, a request
// whose assistant tool calls are not each answered by a tool result before
// the next assistant message; otherwise it streams from next. Response 0
// waits for hold to be closed (when set).
type strictProvider struct {
	next provider.Provider
	hold chan struct{}

	mu      sync.Mutex
	refused []string
}

func (p *strictProvider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	if msg := unanswered(req.Messages); msg != "" {
		p.mu.Lock()
		p.refused = append(p.refused, msg)
		p.mu.Unlock()
		return func(yield func(provider.Chunk, error) bool) {
			yield(provider.Chunk{}, &provider.Error{Status: 400, Code: "INVALID_REQUEST", Message: msg})
		}
	}
	if p.hold != nil && scripted.ResponseIndex(req) == 0 {
		select {
		case <-p.hold:
		case <-ctx.Done():
		}
	}
	return p.next.Stream(ctx, req)
}

// unanswered describes the first tool call of msgs without a result before
// the next assistant message ("" when every call is answered).
func unanswered(msgs []provider.Message) string {
	open := map[string]bool{}
	var order []string
	check := func() string {
		for _, id := range order {
			if open[id] {
				return fmt.Sprintf("tool call %q has no tool result", id)
			}
		}
		return ""
	}
	for _, m := range msgs {
		if m.Role == provider.RoleAssistant {
			if s := check(); s != "" {
				return s
			}
		}
		for _, b := range m.Content {
			switch b.Type {
			case provider.BlockToolCall:
				if m.Role == provider.RoleAssistant {
					open[b.ID] = true
					order = append(order, b.ID)
				}
			case provider.BlockToolResult:
				delete(open, b.ToolCallID)
			}
		}
	}
	return check()
}

func TestUnansweredToolCalls(t *testing.T) {
	call := provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockToolCall, ID: "x", Name: "n"}}}
	result := provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockToolResult, ToolCallID: "x"}}}
	user := provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: "go on"}}}
	two := provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockToolCall, ID: "x", Name: "n"}, {Type: provider.BlockToolCall, ID: "y", Name: "n"}}}
	resultY := provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockToolResult, ToolCallID: "y"}}}
	require.Equal(t, `tool call "x" has no tool result`, unanswered([]provider.Message{user, call, user}))
	require.Equal(t, `tool call "x" has no tool result`, unanswered([]provider.Message{user, two, resultY, user, call}))
	require.Empty(t, unanswered([]provider.Message{user, call, result, user}))
	require.Empty(t, unanswered([]provider.Message{user, two, result, resultY, user}))
}

// useStrictAgent registers the real agent activities with the built-in
// tools and a strict provider over a script of responses.
func useStrictAgent(h *sessiontest.Harness, hold chan struct{}, responses ...scripted.Response) (*strictProvider, *agent.Activities) {
	h.T.Helper()
	p := &strictProvider{next: sessiontest.ScriptedProvider(h.T, responses...), hold: hold}
	return p, sessiontest.AgentActivities(h, provider.Set{"scripted": p})
}

// requireCallsAnswered asserts that every tool-call block of every stored
// assistant/message has a tool/result before its step ends.
func requireCallsAnswered(t *testing.T, evs []session.Event) {
	t.Helper()
	open := map[string]int64{}
	for _, e := range evs {
		switch e.Type {
		case wire.TypeAssistantMessage:
			m, err := e.AssistantMessage()
			require.NoError(t, err)
			for _, c := range m.ToolCalls() {
				open[c.ID] = e.Seq
			}
		case wire.TypeToolResult:
			r, err := e.ToolResult()
			require.NoError(t, err)
			delete(open, r.Message.Source.CallID)
		case wire.TypeStepEnd:
			require.Empty(t, open, "step/end@%d leaves tool calls without results", e.Seq)
		}
	}
	require.Empty(t, open, "tool calls without results")
}

// requireMaxTokensResult asserts the max-tokens result of call id at evs[i] (its tool/call
// at i-1).
func requireMaxTokensResult(t *testing.T, evs []session.Event, i int, id string) {
	t.Helper()
	call, err := evs[i-1].ToolCall()
	require.NoError(t, err)
	require.Equal(t, id, call.CallID)
	r, err := evs[i].ToolResult()
	require.NoError(t, err)
	require.Equal(t, []int64{evs[i-1].Seq}, evs[i].SourceEventSeqs)
	require.Equal(t, "ToolNotRunError", r.Error.Name)
	require.Equal(t, "MAX_TOKENS_NOT_RUN", r.Error.Code)
	require.Equal(t, []wire.ToolResultContent{{Type: "tool-result", ToolCallID: id, IsError: true,
		Content: []wire.TextContent{{Type: "text", Text: "Error: tool call not run: the response reached its max-tokens limit, so the call may be cut off"}}}}, r.Message.Content)
}

// A max-tokens step with tool calls that ends the turn: EndTurn closes the
// calls (not run), so the next turn's model request is accepted.
func TestTurnMaxTokensCallsClosedAtTurnEnd(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("mc")
	cut := scripted.Response{Text: "cut", ToolCalls: []scripted.Call{{ID: "x", Name: "list_dir", Arguments: `{"pa`}, {ID: "y", Name: "read_file"}}, Finish: provider.FinishMaxTokens}
	p, acts := useStrictAgent(h, nil, cut, scripted.Text("next turn"))
	h.Env.RegisterActivity(acts)
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "mc", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: t.TempDir()}}, sessiontest.Prompt("one"), sessiontest.Prompt("two"))
	sessiontest.RequireBalanced(t, evs)
	evs = sessiontest.WithoutRecords(t, evs)
	requireCallsAnswered(t, evs)
	require.Empty(t, p.refused)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message",
		"tool/call", "tool/result", "tool/call", "tool/result", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	requireMaxTokensResult(t, evs, 5, "x")
	requireMaxTokensResult(t, evs, 7, "y")
	call, err := evs[4].ToolCall()
	require.NoError(t, err)
	require.Equal(t, `{"pa`, call.Arguments, "the cut arguments are recorded as the model sent them")
	require.Equal(t, []string{"max-tokens", "completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Zero(t, h.Count(wire.RunToolActivity), "a max-tokens step runs no tool")
	require.Zero(t, h.Count(wire.CloseCallsActivity))
}

// A max-tokens step with a tool call followed by another step (a steer
// arrived during the model call): CloseCalls closes the call before the
// step ends, so the next step's model request is accepted; the turn stays
// max-tokens.
func TestTurnMaxTokensCallsClosedBeforeNextStep(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ms")
	hold := make(chan struct{})
	cut := scripted.Response{Text: "cut", ToolCalls: []scripted.Call{{ID: "x", Name: "list_dir", Arguments: `{}`}}, Finish: provider.FinishMaxTokens}
	p, acts := useStrictAgent(h, hold, cut, scripted.Text("rest"))
	h.Env.RegisterActivity(acts)
	evs := h.RunSteeredTurn(workflows.CreateSessionRequest{SessionID: "ms", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: t.TempDir()}}, hold)
	sessiontest.RequireBalanced(t, evs)
	evs = sessiontest.WithoutRecords(t, evs)
	requireCallsAnswered(t, evs)
	require.Empty(t, p.refused)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/result", "step/end",
		"step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	requireMaxTokensResult(t, evs, 5, "x")
	require.Equal(t, "rest", assistantOf(t, evs[9]).Message.Content[0].Text)
	require.Equal(t, []string{"max-tokens"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
	require.Equal(t, 1, h.Count(wire.CloseCallsActivity))
	require.Zero(t, h.Count(wire.RunToolActivity))
}

// A tool activity that fails ends the turn "error"; EndTurn closes the
// failed call and the undispatched ones, so the next turn's model request
// is accepted.
func TestTurnToolActivityFailureClosesCalls(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("tx")
	first := scripted.Response{ToolCalls: []scripted.Call{
		{ID: "c1", Name: "list_dir", Arguments: `{}`},
		{ID: "c2", Name: "write_file", Arguments: `{"path":"a.txt","content":"a"}`},
		{ID: "c3", Name: "list_dir", Arguments: `{}`},
	}}
	p, acts := useStrictAgent(h, nil, first, scripted.Text("next turn"))
	h.Env.RegisterActivityWithOptions(acts.CallModel, activity.RegisterOptions{Name: wire.CallModelActivity})
	h.Env.RegisterActivityWithOptions(acts.EndTurn, activity.RegisterOptions{Name: wire.EndTurnActivity})
	// c2's activity fails before it stores anything (its store failed).
	h.Env.RegisterActivityWithOptions(func(ctx context.Context, in agent.ToolInput) (agent.ToolOutcome, error) {
		if in.CallID == "c2" {
			return agent.ToolOutcome{}, temporal.NewNonRetryableApplicationError("disk full", "IOError", nil)
		}
		return acts.RunTool(ctx, in)
	}, activity.RegisterOptions{Name: wire.RunToolActivity})
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "tx", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: t.TempDir()}}, sessiontest.Prompt("one"), sessiontest.Prompt("two"))
	sessiontest.RequireBalanced(t, evs)
	evs = sessiontest.WithoutRecords(t, evs)
	requireCallsAnswered(t, evs)
	require.Empty(t, p.refused)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message",
		"tool/call", "tool/result", "tool/call", "tool/result", "tool/call", "tool/result", "step/end", "turn/end",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	r1, err := evs[5].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "c1", r1.Message.Source.CallID)
	require.False(t, r1.Message.Content[0].IsError, "c1 ran")
	for i, id := range map[int]string{7: "c2", 9: "c3"} {
		r, err := evs[i].ToolResult()
		require.NoError(t, err)
		require.Equal(t, id, r.Message.Source.CallID)
		require.Equal(t, "ABORTED_BEFORE_DISPATCH", r.Error.Code)
	}
	te, err := evs[11].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "error", te.Reason.Kind)
	require.JSONEq(t, `{"message":"disk full","code":"IOError"}`, string(te.Reason.Error))
	var end agent.EndTurnInput
	h.StartedArg(wire.EndTurnActivity, 0, &end)
	require.Equal(t, []string{"c3"}, end.Skipped)
	require.Equal(t, int64(14), end.MessageSeq, "the message, after its route and its 10 chunks")
	require.Equal(t, int64(14), evs[3].Seq)
}
