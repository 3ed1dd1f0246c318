package agent_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestEndTurnClosesSkippedCalls: an aborted turn's undispatched calls get
// their tool/call and an aborted-before-dispatch result in model order,
// then step/end and turn/end, in one batch; a retry stores nothing.
func TestEndTurnClosesSkippedCalls(t *testing.T) {
	f := newFixture(t, nil, toolCalls([3]string{"c1", "echo", `{"text":"a"}`}, [3]string{"c2", "echo", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	in := agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq, Skipped: []string{"c1", "c2"},
		Reason: wire.TurnEndReason{Kind: wire.TurnEndAborted, Reason: json.RawMessage(`{"kind":"user"}`)}}
	out, err := f.endTurn(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, m+7, out.NextSeq)
	log := f.log()
	require.Equal(t, []string{"tool/call", "tool/result", "tool/call", "tool/result", "step/end", "turn/end"}, types(log[m+1:]))
	call, err := log[m+1].ToolCall()
	require.NoError(t, err)
	require.Equal(t, wire.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "echo", Arguments: `{"text":"a"}`}, call)
	for _, i := range []int64{m + 2, m + 4} {
		r, err := log[i].ToolResult()
		require.NoError(t, err)
		require.Equal(t, []int64{i - 1}, log[i].SourceEventSeqs)
		require.Equal(t, session.AppendOp(), log[i].SurfaceOp)
		require.Equal(t, "AbortError", r.Error.Name)
		require.Equal(t, "ABORTED_BEFORE_DISPATCH", r.Error.Code)
		require.Equal(t, []wire.ToolResultContent{{Type: "tool-result", ToolCallID: r.Message.Source.CallID, IsError: true,
			Content: []wire.TextContent{{Type: "text", Text: "Error: tool call aborted before dispatch"}}}}, r.Message.Content)
	}
	te, err := log[m+6].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, wire.TurnEnd{Turn: 1, Reason: wire.TurnEndReason{Kind: "aborted", Reason: json.RawMessage(`{"kind":"user"}`)}}, te)
	requireBalanced(t, log)

	for _, acts := range []*agent.Activities{f.acts, f.actsOn(f.newStore())} {
		again, err := f.endTurn(acts, in)
		require.NoError(t, err)
		require.Equal(t, out, again)
	}
	require.Len(t, f.log(), int(m)+7)
}

// TestEndTurnCompleted: a completed turn whose step is still open gets
// step/end and turn/end; one whose step the workflow closed gets turn/end.
func TestEndTurnCompleted(t *testing.T) {
	f := newFixture(t, nil, answer("done"))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	out, err := f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq, Reason: wire.TurnEndReason{Kind: "completed"}})
	require.NoError(t, err)
	require.Equal(t, m+3, out.NextSeq)
	require.Equal(t, []string{"assistant/message", "step/end", "turn/end"}, types(f.log()[m:]))
	requireBalanced(t, f.log())

	g := newFixture(t, nil)
	g.append(ev(t, wire.TypeStepEnd, 3, `{"turn":1,"step":1}`))
	out, err = g.endTurn(g.acts, agent.EndTurnInput{Ref: g.hd.Ref(), Turn: 1, Step: 1, MessageSeq: -1, Reason: wire.TurnEndReason{Kind: "blocked"}})
	require.NoError(t, err)
	require.Equal(t, int64(5), out.NextSeq)
	require.Equal(t, []string{"turn/start", "user/message", "step/start", "step/end", "turn/end"}, types(g.log()), "a closed step is not closed again")
	requireBalanced(t, g.log())
}

// TestEndTurnRecordedCallWithoutResult: a call whose tool/call is stored
// but whose result is not gets the outcome-unknown result, byte for byte
// what resume's closers would store.
func TestEndTurnRecordedCallWithoutResult(t *testing.T) {
	f := newFixture(t, nil, toolCalls([3]string{"c1", "shell", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	f.append(ev(t, wire.TypeToolCall, m+1, `{"turn":1,"step":1,"callId":"c1","name":"shell","arguments":"{}"}`))
	closers, err := session.InterruptedTurnClosers(f.log())
	require.NoError(t, err)
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq, Reason: wire.TurnEndReason{Kind: "aborted", Reason: json.RawMessage(`{"kind":"parent"}`)}})
	require.NoError(t, err)
	log := f.log()
	require.Equal(t, []string{"tool/result", "step/end", "turn/end"}, types(log[m+2:]))
	requireSameResult(t, closers[0], log[m+2])
	requireBalanced(t, log)
}

// requireSameResult asserts that two tool/result events agree in all but
// time.
func requireSameResult(t *testing.T, want, got session.Event) {
	t.Helper()
	want.Time = got.Time
	wb, err := want.MarshalJSON()
	require.NoError(t, err)
	gb, err := got.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(wb), string(gb))
}

// TestEndTurnRefusals: a turn the log never started, or a message seq that
// is not the turn's assistant/message, is a non-retryable error that
// stores nothing.
func TestEndTurnRefusals(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 2, MessageSeq: -1, Reason: wire.TurnEndReason{Kind: "completed"}})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "InvalidLog", app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Error(), "end of turn 2: the log has no turn/start of it")
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, MessageSeq: 1, Reason: wire.TurnEndReason{Kind: "completed"}})
	require.ErrorAs(t, err, &app)
	require.Contains(t, app.Error(), "no assistant/message at seq 1")
	require.Len(t, f.log(), 3)
}

// TestEndTurnNextStepHeld: the log holds, past the workflow's ExpectSeq,
// the opening of the next step that an earlier attempt of the workflow
// task stored (docs/DECISIONS.md D77): EndTurn stores nothing and reports
// it, the claimed input by its message id. Anything else past ExpectSeq
// does not stop the end.
func TestEndTurnNextStepHeld(t *testing.T) {
	f := newFixture(t, nil, answer("done"))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	expect := res.NextSeq
	f.append(
		ev(t, wire.TypeStepEnd, expect, `{"turn":1,"step":1}`),
		ev(t, wire.TypeStepStart, expect+1, `{"turn":1,"step":2}`),
		surface(t, wire.TypeUserMessage, expect+2, `{"id":"s9","role":"user","content":[{"type":"text","text":"nine"}],"source":{"kind":"user"}}`),
	)
	in := agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: -1, Reason: wire.TurnEndReason{Kind: "completed"}, ExpectSeq: expect}
	out, err := f.endTurn(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, expect+3, out.NextSeq)
	require.Equal(t, []activities.HeldEvent{
		{Type: "step/end", Data: json.RawMessage(`{"turn":1,"step":1}`)},
		{Type: "step/start", Data: json.RawMessage(`{"turn":1,"step":2}`)},
		{Type: "user/message", MessageID: "s9"},
	}, out.Held)
	require.Equal(t, []string{"assistant/message", "step/end", "step/start", "user/message"}, types(f.log()[res.MessageSeq:]), "nothing stored")

	// Without ExpectSeq, or with the workflow's cursor at the log's end,
	// the turn ends as before.
	in.ExpectSeq, in.Step = expect+3, 2
	out, err = f.endTurn(f.acts, in)
	require.NoError(t, err)
	require.Nil(t, out.Held)
	require.Equal(t, expect+5, out.NextSeq)
	requireBalanced(t, f.log())
}
