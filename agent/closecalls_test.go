package agent_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/session"
)

func (f *fixture) closeCalls(acts *agent.Activities, in agent.CloseCallsInput) (agent.CloseCallsResult, error) {
	v, err := f.env(acts).ExecuteActivity(agent.CloseCallsActivity, in)
	if err != nil {
		return agent.CloseCallsResult{}, err
	}
	var r agent.CloseCallsResult
	require.NoError(f.t, v.Get(&r))
	return r, nil
}

// TestCloseCallsMaxTokens: the calls of a max-tokens message get their
// tool/call and the MAX_TOKENS_NOT_RUN result in model order, a recorded
// call without a result the outcome-unknown result, and nothing else (no
// step/end, no turn/end); a retry, from another store too, stores nothing.
func TestCloseCallsMaxTokens(t *testing.T) {
	f := newFixture(t, nil, toolCalls([3]string{"c1", "echo", `{"te`}, [3]string{"c2", "shell", `{}`}, [3]string{"c3", "echo", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	f.append(ev(t, session.TypeToolCall, 4, `{"turn":1,"step":1,"callId":"c2","name":"shell","arguments":"{}"}`))
	in := agent.CloseCallsInput{Ref: f.hd.Ref(), Turn: 1, MessageSeq: res.MessageSeq, MaxTokens: true}
	out, err := f.closeCalls(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, int64(10), out.NextSeq)
	log := f.log()
	require.Equal(t, []string{"turn/start", "user/message", "step/start", "assistant/message",
		"tool/call", "tool/call", "tool/result", "tool/result", "tool/call", "tool/result"}, types(log))
	call, err := log[5].ToolCall()
	require.NoError(t, err)
	require.Equal(t, session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "echo", Arguments: `{"te`}, call)
	for _, c := range []struct {
		i       int
		id      string
		callSeq int64
		code    string
		text    string
	}{
		{6, "c1", 5, "MAX_TOKENS_NOT_RUN", "Error: tool call not run: the response reached its max-tokens limit, so the call may be cut off"},
		{7, "c2", 4, "TOOL_OUTCOME_UNKNOWN", session.ToolOutcomeUnknownText},
		{9, "c3", 8, "MAX_TOKENS_NOT_RUN", "Error: tool call not run: the response reached its max-tokens limit, so the call may be cut off"},
	} {
		r, err := log[c.i].ToolResult()
		require.NoError(t, err)
		require.Equal(t, c.id, r.Message.Source.CallID)
		require.Equal(t, []int64{c.callSeq}, log[c.i].SourceEventSeqs)
		require.Equal(t, c.code, r.Error.Code)
		require.Equal(t, []session.ToolResultContent{{Type: "tool-result", ToolCallID: c.id, IsError: true,
			Content: []session.TextContent{{Type: "text", Text: c.text}}}}, r.Message.Content)
	}
	for _, acts := range []*agent.Activities{f.acts, f.actsOn(f.newStore())} {
		again, err := f.closeCalls(acts, in)
		require.NoError(t, err)
		require.Equal(t, out, again)
	}
	require.Len(t, f.log(), 10)

	// EndTurn after CloseCalls closes only the step and the turn.
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq, MaxTokens: true, Reason: session.TurnEndReason{Kind: "max-tokens"}})
	require.NoError(t, err)
	require.Equal(t, []string{"step/end", "turn/end"}, types(f.log()[10:]))
	requireBalanced(t, f.log())
}

// TestCloseCallsClosedStep: once the message's step has ended nothing is
// stored; a seq that is no assistant/message is refused.
func TestCloseCallsClosedStep(t *testing.T) {
	f := newFixture(t, nil, toolCalls([3]string{"c1", "echo", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	f.append(ev(t, session.TypeStepEnd, 4, `{"turn":1,"step":1}`))
	out, err := f.closeCalls(f.acts, agent.CloseCallsInput{Ref: f.hd.Ref(), Turn: 1, MessageSeq: res.MessageSeq})
	require.NoError(t, err)
	require.Equal(t, int64(5), out.NextSeq)
	require.Len(t, f.log(), 5)

	_, err = f.closeCalls(f.acts, agent.CloseCallsInput{Ref: f.hd.Ref(), Turn: 1, MessageSeq: 1})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "InvalidLog", app.Type())
	require.Contains(t, app.Error(), "no assistant/message at seq 1")
}

// TestEndTurnMaxTokens: EndTurn of a max-tokens message closes its calls
// with the max-tokens result.
func TestEndTurnMaxTokens(t *testing.T) {
	f := newFixture(t, nil, toolCalls([3]string{"c1", "echo", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq, MaxTokens: true, Reason: session.TurnEndReason{Kind: "max-tokens"}})
	require.NoError(t, err)
	log := f.log()
	require.Equal(t, []string{"tool/call", "tool/result", "step/end", "turn/end"}, types(log[4:]))
	r, err := log[5].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "ToolNotRunError", r.Error.Name)
	require.Equal(t, "MAX_TOKENS_NOT_RUN", r.Error.Code)
	requireBalanced(t, log)
}
