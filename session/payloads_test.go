package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func TestPayloadAccessors(t *testing.T) {
	ts, err := mk(wire.TypeTurnStart, 0, `{"turn":2,"extra":true}`).TurnStart()
	require.NoError(t, err)
	assert.Equal(t, wire.TurnStart{Turn: 2}, ts)

	te, err := mk(wire.TypeTurnEnd, 1, `{"turn":2,"reason":{"kind":"aborted","reason":{"kind":"user"}}}`).TurnEnd()
	require.NoError(t, err)
	assert.Equal(t, wire.TurnEnd{Turn: 2, Reason: wire.TurnEndReason{Kind: wire.TurnEndAborted, Reason: json.RawMessage(`{"kind":"user"}`)}}, te)

	ss, err := mk(wire.TypeStepStart, 2, `{"turn":2,"step":1}`).StepStart()
	require.NoError(t, err)
	assert.Equal(t, wire.StepStart{Turn: 2, Step: 1}, ss)

	se, err := mk(wire.TypeStepEnd, 3, `{"turn":2,"step":1}`).StepEnd()
	require.NoError(t, err)
	assert.Equal(t, wire.StepEnd{Turn: 2, Step: 1}, se)

	tc, err := mk(wire.TypeToolCall, 4, toolCallData(1, "c1")).ToolCall()
	require.NoError(t, err)
	assert.Equal(t, wire.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "read", Arguments: "{}"}, tc)

	am, err := mk(wire.TypeAssistantMessage, 5, assistantWithCalls(1, "c1", "c2")).AssistantMessage()
	require.NoError(t, err)
	assert.Equal(t, int64(1), am.Step)
	assert.Equal(t, wire.RoleAssistant, am.Message.Role)
	calls := am.ToolCalls()
	require.Len(t, calls, 2)
	assert.Equal(t, wire.ContentBlock{Type: wire.BlockToolCall, ID: "c2", Name: "read", Arguments: json.RawMessage(`{"path":"/x"}`)}, calls[1])
	assert.Equal(t, json.RawMessage(`[]`), am.Stream)

	tr, err := mk(wire.TypeToolResult, 6, toolResultData(1, "c1")).ToolResult()
	require.NoError(t, err)
	assert.Equal(t, "c1", tr.Message.Source.CallID)
	assert.Nil(t, tr.Error)

	es, err := mk(wire.TypeEndSeed, 7, `{"inherited":true}`).EndSeed()
	require.NoError(t, err)
	assert.True(t, es.Inherited)
	es, err = mk(wire.TypeEndSeed, 7, `{}`).EndSeed()
	require.NoError(t, err)
	assert.False(t, es.Inherited)
}

func TestPayloadAccessorErrors(t *testing.T) {
	_, err := mk(wire.TypeTurnEnd, 3, `{"turn":1}`).TurnStart()
	assert.EqualError(t, err, `event (seq 3) is a "turn/end" event, not "turn/start"`)
	_, err = mk(wire.TypeTurnStart, 3, `{}`).TurnStart()
	assert.EqualError(t, err, `turn/start event (seq 3): data lacks "turn"`)
	_, err = mk(wire.TypeTurnStart, 3, `{"turn":0}`).TurnStart()
	assert.EqualError(t, err, `turn/start event (seq 3): data.turn must be a safe integer >= 1, got 0`)
	_, err = mk(wire.TypeTurnStart, 3, `{"turn":1.5}`).TurnStart()
	assert.ErrorContains(t, err, `turn/start event (seq 3): malformed data`)
	_, err = mk(wire.TypeTurnStart, 3, `[]`).TurnStart()
	assert.EqualError(t, err, `turn/start event (seq 3): data is not a JSON object`)
	_, err = Event{Type: wire.TypeTurnStart}.TurnStart()
	assert.EqualError(t, err, `turn/start event (seq 0): data is not a JSON object`)
	_, err = mk(wire.TypeTurnEnd, 3, `{"turn":1,"reason":{}}`).TurnEnd()
	assert.EqualError(t, err, `turn/end event (seq 3): data.reason.kind must be a non-empty string`)
	_, err = mk(wire.TypeTurnEnd, 3, `{"turn":1}`).TurnEnd()
	assert.EqualError(t, err, `turn/end event (seq 3): data lacks "reason"`)
	_, err = mk(wire.TypeStepStart, 3, `{"turn":1,"step":0}`).StepStart()
	assert.EqualError(t, err, `step/start event (seq 3): data.step must be a safe integer >= 1, got 0`)
	_, err = mk(wire.TypeStepEnd, 3, `{"turn":1,"step":-1}`).StepEnd()
	assert.EqualError(t, err, `step/end event (seq 3): data.step must be a safe integer >= 0, got -1`)
	_, err = mk(wire.TypeToolCall, 3, `{"turn":1,"step":1}`).ToolCall()
	assert.EqualError(t, err, `tool/call event (seq 3): data lacks "callId"`)
	_, err = mk(wire.TypeAssistantMessage, 3, `{"turn":1,"step":1,"message":{"content":[{"type":"tool-call"}]}}`).AssistantMessage()
	assert.EqualError(t, err, `assistant/message event (seq 3): tool-call block 0 lacks "id"`)
	_, err = mk(wire.TypeToolResult, 3, `{"turn":1,"step":1,"message":{"id":"x"}}`).ToolResult()
	assert.EqualError(t, err, `tool/result event (seq 3): data lacks "message.source.callId"`)
	_, err = mk(wire.TypeEndSeed, 3, `{"inherited":"yes"}`).EndSeed()
	assert.ErrorContains(t, err, `session/end-seed event (seq 3): malformed data`)
}

func TestNewEvent(t *testing.T) {
	e, err := NewEvent(wire.TypeTurnStart, 0, 5, wire.TurnStart{Turn: 1})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}`, encodeLine(t, e))

	e, err = NewEvent("x", 1, 5, json.RawMessage(` {"a" : "<"} `))
	require.NoError(t, err)
	assert.Equal(t, `{"a":"<"}`, string(e.Data))

	_, err = NewEvent("x", 0, 5, map[string]float64{"z": negZero()})
	assert.ErrorIs(t, err, ErrNotLossless)
	e, err = NewEvent("x", 0, 5, []int{1})
	require.NoError(t, err)
	assert.Equal(t, `[1]`, string(e.Data))
	_, err = NewEvent("x", -1, 5, struct{}{})
	assert.ErrorIs(t, err, ErrInvalidEvent)
}
