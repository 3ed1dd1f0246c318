package agent_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func (f *fixture) closeCalls(acts *agent.Activities, in agent.CloseCallsInput) (agent.CloseCallsResult, error) {
	v, err := f.env(acts).ExecuteActivity(wire.CloseCallsActivity, in)
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
	m := res.MessageSeq // the step's assistant/message, after its chunks
	f.append(ev(t, wire.TypeToolCall, m+1, `{"turn":1,"step":1,"callId":"c2","name":"shell","arguments":"{}"}`))
	in := agent.CloseCallsInput{Ref: f.hd.Ref(), Turn: 1, MessageSeq: res.MessageSeq, MaxTokens: true}
	out, err := f.closeCalls(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, m+7, out.NextSeq)
	log := f.log()
	require.Equal(t, []string{"tool/call", "tool/call", "tool/result", "tool/result", "tool/call", "tool/result"}, types(log[m+1:]))
	call, err := log[m+2].ToolCall()
	require.NoError(t, err)
	require.Equal(t, wire.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "echo", Arguments: `{"te`}, call)
	for _, c := range []struct {
		i       int64
		id      string
		callSeq int64
		code    string
		text    string
	}{
		{m + 3, "c1", m + 2, "MAX_TOKENS_NOT_RUN", "Error: tool call not run: the response reached its max-tokens limit, so the call may be cut off"},
		{m + 4, "c2", m + 1, "TOOL_OUTCOME_UNKNOWN", session.ToolOutcomeUnknownText},
		{m + 6, "c3", m + 5, "MAX_TOKENS_NOT_RUN", "Error: tool call not run: the response reached its max-tokens limit, so the call may be cut off"},
	} {
		r, err := log[c.i].ToolResult()
		require.NoError(t, err)
		require.Equal(t, c.id, r.Message.Source.CallID)
		require.Equal(t, []int64{c.callSeq}, log[c.i].SourceEventSeqs)
		require.Equal(t, c.code, r.Error.Code)
		require.Equal(t, []wire.ToolResultContent{{Type: "tool-result", ToolCallID: c.id, IsError: true,
			Content: []wire.TextContent{{Type: "text", Text: c.text}}}}, r.Message.Content)
	}
	for _, acts := range []*agent.Activities{f.acts, f.actsOn(f.newStore())} {
		again, err := f.closeCalls(acts, in)
		require.NoError(t, err)
		require.Equal(t, out, again)
	}
	require.Len(t, f.log(), int(m)+7)

	// EndTurn after CloseCalls closes only the step and the turn.
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq, MaxTokens: true, Reason: wire.TurnEndReason{Kind: "max-tokens"}})
	require.NoError(t, err)
	require.Equal(t, []string{"step/end", "turn/end"}, types(f.log()[m+7:]))
	requireBalanced(t, f.log())
}

// TestCloseCallsClosedStep: once the message's step has ended nothing is
// stored; a seq that is no assistant/message is refused.
func TestCloseCallsClosedStep(t *testing.T) {
	f := newFixture(t, nil, toolCalls([3]string{"c1", "echo", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	f.append(ev(t, wire.TypeStepEnd, m+1, `{"turn":1,"step":1}`))
	out, err := f.closeCalls(f.acts, agent.CloseCallsInput{Ref: f.hd.Ref(), Turn: 1, MessageSeq: res.MessageSeq})
	require.NoError(t, err)
	require.Equal(t, m+2, out.NextSeq)
	require.Len(t, f.log(), int(m)+2)

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
	m := res.MessageSeq // the step's assistant/message, after its chunks
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq, MaxTokens: true, Reason: wire.TurnEndReason{Kind: "max-tokens"}})
	require.NoError(t, err)
	log := f.log()
	require.Equal(t, []string{"tool/call", "tool/result", "step/end", "turn/end"}, types(log[m+1:]))
	r, err := log[m+2].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "ToolNotRunError", r.Error.Name)
	require.Equal(t, "MAX_TOKENS_NOT_RUN", r.Error.Code)
	requireBalanced(t, log)
}
