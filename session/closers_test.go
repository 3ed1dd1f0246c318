package session

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// assistantWithCalls is an assistant/message data with tool-call blocks.
func assistantWithCalls(step int, ids ...string) string {
	blocks := []string{`{"type":"text","text":"thinking"}`}
	for _, id := range ids {
		b, _ := json.Marshal(id)
		blocks = append(blocks, `{"type":"tool-call","id":`+string(b)+`,"name":"read","arguments":{"path":"/x"}}`)
	}
	s, _ := json.Marshal(step)
	return `{"turn":1,"step":` + string(s) + `,"message":{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]},"stream":[]}`
}

func toolCallData(step int, id string) string {
	b, _ := json.Marshal(id)
	s, _ := json.Marshal(step)
	return `{"turn":1,"step":` + string(s) + `,"callId":` + string(b) + `,"name":"read","arguments":"{}"}`
}

func toolResultData(step int, id string) string {
	b, _ := json.Marshal(id)
	s, _ := json.Marshal(step)
	return `{"turn":1,"step":` + string(s) + `,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":` + string(b) +
		`},"content":[{"type":"tool-result","toolCallId":` + string(b) + `,"isError":false,"content":[]}]}}`
}

func lines(t *testing.T, events []Event) []string {
	t.Helper()
	out := make([]string, len(events))
	for i, e := range events {
		require.NoError(t, e.Validate())
		out[i] = encodeLine(t, e)
	}
	return out
}

func TestClosersSpecExample(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		mk(wire.TypeAssistantMessage, 2, assistantWithCalls(1, "call-1")),
		mk(wire.TypeToolCall, 3, toolCallData(1, "call-1")),
	}
	events[2].SurfaceOp = AppendOp()
	closers, err := InterruptedTurnClosers(events)
	require.NoError(t, err)

	want := []string{
		`{"type":"tool/result","seq":4,"time":1003,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call-1-4","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","isError":true,"content":[{"type":"text","text":"The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."}]}]},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[3]}`,
		`{"type":"step/end","seq":5,"time":1003,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":6,"time":1003,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
	}
	assert.Equal(t, want, lines(t, closers))

	// The typed view agrees.
	r, err := closers[0].ToolResult()
	require.NoError(t, err)
	assert.Equal(t, ToolOutcomeUnknown, r.Error.Code)
	assert.Equal(t, ToolOutcomeUnknownErrorName, r.Error.Name)
	assert.Equal(t, "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.", r.Message.Content[0].Content[0].Text)
	assert.Equal(t, []int64{3}, closers[0].SourceEventSeqs)
	te, err := closers[2].TurnEnd()
	require.NoError(t, err)
	assert.Equal(t, wire.TurnEndInterrupted, te.Reason.Kind)

	// The resume marker follows at seq 7.
	seed := append(append([]Event(nil), events...), closers...)
	marker, ok := EndSeedMarker(seed, false, EndSeedTime(seed, 0))
	require.True(t, ok)
	assert.Equal(t, `{"type":"session/end-seed","seq":7,"time":1003,"data":{}}`, encodeLine(t, marker))
}

func TestClosersSpecTexts(t *testing.T) {
	assert.Equal(t, "TOOL_OUTCOME_UNKNOWN", ToolOutcomeUnknown)
	assert.Equal(t, "TOOL_NOT_STARTED", ToolNotStarted)
	assert.Equal(t, "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.", ToolOutcomeUnknownText)
	assert.Equal(t, "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.", ToolNotStartedText)
}

func TestClosersUnrecordedCall(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":3}`),
		mk(wire.TypeStepStart, 1, `{"turn":3,"step":2}`),
		mk(wire.TypeAssistantMessage, 2, assistantWithCalls(2, "c<&>")),
	}
	closers, err := InterruptedTurnClosers(events)
	require.NoError(t, err)
	want := []string{
		`{"type":"tool/result","seq":3,"time":1002,"data":{"turn":3,"step":2,"message":{"id":"interrupted-tool-result-c<&>-3","role":"user","source":{"kind":"tool","callId":"c<&>"},"content":[{"type":"tool-result","toolCallId":"c<&>","isError":true,"content":[{"type":"text","text":"The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`,
		`{"type":"step/end","seq":4,"time":1002,"data":{"turn":3,"step":2}}`,
		`{"type":"turn/end","seq":5,"time":1002,"data":{"turn":3,"reason":{"kind":"interrupted"}}}`,
	}
	assert.Equal(t, want, lines(t, closers))
	assert.Nil(t, closers[0].SourceEventSeqs)
}

func TestClosersTwoCallsInOrder(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		mk(wire.TypeAssistantMessage, 2, assistantWithCalls(1, "b", "a")),
		mk(wire.TypeToolCall, 3, toolCallData(1, "a")),
		mk(wire.TypeToolCall, 4, toolCallData(1, "unknown-call")), // ignored
	}
	closers, err := InterruptedTurnClosers(events)
	require.NoError(t, err)
	require.Len(t, closers, 4)
	var got []string
	for _, c := range closers[:2] {
		r, err := c.ToolResult()
		require.NoError(t, err)
		got = append(got, r.Message.Source.CallID+":"+r.Error.Code+":"+r.Message.ID)
	}
	assert.Equal(t, []string{
		"b:TOOL_NOT_STARTED:interrupted-tool-result-b-5",
		"a:TOOL_OUTCOME_UNKNOWN:interrupted-tool-result-a-6",
	}, got)
	assert.Nil(t, closers[0].SourceEventSeqs)
	assert.Equal(t, []int64{3}, closers[1].SourceEventSeqs)
	assert.Equal(t, []int64{5, 6, 7, 8}, []int64{closers[0].Seq, closers[1].Seq, closers[2].Seq, closers[3].Seq})
	assert.Equal(t, wire.TypeStepEnd, closers[2].Type)
	assert.Equal(t, wire.TypeTurnEnd, closers[3].Type)
	for _, c := range closers {
		assert.Equal(t, int64(1004), c.Time)
	}
}

func TestClosersAnsweredCallIsNotPending(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		mk(wire.TypeAssistantMessage, 2, assistantWithCalls(1, "a", "b")),
		mk(wire.TypeToolCall, 3, toolCallData(1, "a")),
		mk(wire.TypeToolResult, 4, toolResultData(1, "a")),
		mk(wire.TypeToolCall, 5, toolCallData(1, "b")),
	}
	ot, ok, err := ScanOpenTurn(events)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, OpenTurn{Turn: 1, Step: 1, PendingCalls: []PendingCall{{CallID: "b", Step: 1, CallSeq: 5}}}, ot)
	assert.True(t, ot.PendingCalls[0].Recorded())
}

func TestClosersPendingResetAtStepEnd(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		mk(wire.TypeAssistantMessage, 2, assistantWithCalls(1, "a")),
		mk(wire.TypeToolCall, 3, toolCallData(1, "a")),
		mk(wire.TypeStepEnd, 4, `{"turn":1,"step":1}`),
	}
	closers, err := InterruptedTurnClosers(events)
	require.NoError(t, err)
	assert.Equal(t, []string{
		`{"type":"turn/end","seq":5,"time":1004,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
	}, lines(t, closers))

	ot, ok, err := ScanOpenTurn(events)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, OpenTurn{Turn: 1}, ot)
}

func TestClosersPendingResetAtTurnStart(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		mk(wire.TypeAssistantMessage, 2, assistantWithCalls(1, "a")),
		mk(wire.TypeTurnStart, 3, `{"turn":2}`),
		mk("agent/inbox/spliced", 4, `{"target":"next-step","start":0,"inserted":[]}`),
	}
	closers, err := InterruptedTurnClosers(events)
	require.NoError(t, err)
	assert.Equal(t, []string{
		`{"type":"turn/end","seq":5,"time":1004,"data":{"turn":2,"reason":{"kind":"interrupted"}}}`,
	}, lines(t, closers))
}

func TestClosersBalancedLogNone(t *testing.T) {
	balanced := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		mk(wire.TypeAssistantMessage, 2, assistantWithCalls(1, "a")),
		mk(wire.TypeStepEnd, 3, `{"turn":1,"step":1}`),
		mk(wire.TypeTurnEnd, 4, `{"turn":1,"reason":{"kind":"completed"}}`),
		mk(wire.TypeInboxSpliced, 5, `{"target":"next-step","start":0,"inserted":[]}`),
		mk(wire.TypeEndSeed, 6, `{}`),
	}
	for _, events := range [][]Event{nil, {}, balanced, balanced[:5]} {
		closers, err := InterruptedTurnClosers(events)
		require.NoError(t, err)
		assert.Nil(t, closers)
		_, ok, err := ScanOpenTurn(events)
		require.NoError(t, err)
		assert.False(t, ok)
	}
}

func TestClosersTurnWithoutStep(t *testing.T) {
	// FORMAT.md §5.5: turn/start@0 + torn fragment -> turn/end@1.
	closers, err := InterruptedTurnClosers([]Event{mk(wire.TypeTurnStart, 0, `{"turn":1}`)})
	require.NoError(t, err)
	assert.Equal(t, []string{`{"type":"turn/end","seq":1,"time":1000,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`}, lines(t, closers))
}

func TestClosersReinsertionOrder(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		mk(wire.TypeAssistantMessage, 2, assistantWithCalls(1, "a", "b", "c")),
		mk(wire.TypeToolCall, 3, toolCallData(1, "a")),
		mk(wire.TypeToolCall, 4, toolCallData(1, "c")),
		mk(wire.TypeToolResult, 5, toolResultData(1, "b")),
		// Re-inserting "a" keeps its position and resets its callSeq; "b"
		// was deleted, so it goes last.
		mk(wire.TypeAssistantMessage, 6, assistantWithCalls(7, "b", "a")),
	}
	ot, ok, err := ScanOpenTurn(events)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []PendingCall{
		{CallID: "a", Step: 7, CallSeq: -1},
		{CallID: "c", Step: 1, CallSeq: 4},
		{CallID: "b", Step: 7, CallSeq: -1},
	}, ot.PendingCalls)

	closers, err := InterruptedTurnClosers(events)
	require.NoError(t, err)
	require.Len(t, closers, 5)
	var ids []string
	for _, c := range closers[:3] {
		r, err := c.ToolResult()
		require.NoError(t, err)
		ids = append(ids, r.Message.ID)
	}
	assert.Equal(t, []string{
		"interrupted-tool-result-a-7", "interrupted-tool-result-c-8", "interrupted-tool-result-b-9",
	}, ids)
	r, err := closers[0].ToolResult()
	require.NoError(t, err)
	assert.Equal(t, int64(7), r.Step)
	assert.Equal(t, ToolNotStarted, r.Error.Code)
}

func TestTurnScannerIncremental(t *testing.T) {
	var s TurnScanner
	_, ok := s.OpenTurn()
	assert.False(t, ok)
	got, err := s.Closers(Event{})
	require.NoError(t, err)
	assert.Nil(t, got)

	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":4}`),
		mk(wire.TypeStepStart, 1, `{"turn":4,"step":1}`),
	}
	n := 2
	for i := range 200 { // many calls answered: exercises tombstone compaction
		id := "k" + strings.Repeat("x", i%3) + string(rune('A'+i%50)) + string(rune('a'+i/50))
		events = append(events,
			mk(wire.TypeAssistantMessage, int64(n), assistantWithCalls(1, id, "keep")),
			mk(wire.TypeToolResult, int64(n+1), toolResultData(1, id)))
		n += 2
	}
	for _, e := range events {
		require.NoError(t, s.Observe(e))
	}
	ot, ok := s.OpenTurn()
	require.True(t, ok)
	assert.Equal(t, OpenTurn{Turn: 4, Step: 1, PendingCalls: []PendingCall{{CallID: "keep", Step: 1, CallSeq: -1}}}, ot)
	assert.Equal(t, int64(4), s.LastTurn())

	_, err = s.Closers(events[0])
	assert.EqualError(t, err, "closers: last event seq 0 is not the last observed seq 401")
	closers, err := s.Closers(events[len(events)-1])
	require.NoError(t, err)
	require.Len(t, closers, 3)
	assert.Equal(t, int64(402), closers[0].Seq)

	// The returned open turn is a copy.
	ot.PendingCalls[0].CallID = "mutated"
	ot2, _ := s.OpenTurn()
	assert.Equal(t, "keep", ot2.PendingCalls[0].CallID)
}

func TestTurnScannerMalformedPayloads(t *testing.T) {
	cases := map[string]Event{
		`turn/start event (seq 0): data lacks "turn"`:                            mk(wire.TypeTurnStart, 0, `{}`),
		`turn/start event (seq 0): data.turn must be a safe integer >= 1, got 0`: mk(wire.TypeTurnStart, 0, `{"turn":0}`),
		`step/start event (seq 0): data lacks "step"`:                            mk(wire.TypeStepStart, 0, `{"turn":1,"step":null}`),
		`step/start event (seq 0): data is not a JSON object`:                    mk(wire.TypeStepStart, 0, `[]`),
		`assistant/message event (seq 0): data lacks "message.content"`:          mk(wire.TypeAssistantMessage, 0, `{"turn":1,"step":1,"message":{}}`),
		`assistant/message event (seq 0): data lacks "step"`:                     mk(wire.TypeAssistantMessage, 0, `{"turn":1,"message":{"content":[]}}`),
		`assistant/message event (seq 0): tool-call block 0 lacks "id"`:          mk(wire.TypeAssistantMessage, 0, `{"turn":1,"step":1,"message":{"content":[{"type":"tool-call"}]}}`),
		`tool/result event (seq 0): data lacks "message.source.callId"`:          mk(wire.TypeToolResult, 0, `{"turn":1,"step":1,"message":{"source":{}}}`),
		`tool/result event (seq 0): data is not a JSON object`:                   {Type: wire.TypeToolResult},
	}
	for want, e := range cases {
		var s TurnScanner
		require.NoError(t, s.Observe(mk(wire.TypeTurnStart, 0, `{"turn":1}`)))
		before, _ := s.OpenTurn()
		err := s.Observe(e)
		assert.EqualError(t, err, want)
		after, _ := s.OpenTurn()
		assert.Equal(t, before, after, "state unchanged after an error")
	}
	// Type mismatches inside the payload are errors too, never panics.
	for _, data := range []string{
		`{"step":"1","message":{"content":[]}}`, `{"step":1,"message":{"content":{}}}`,
		`{"step":1,"message":"x"}`, `{"step":1.5,"message":{"content":[]}}`,
		`{"step":1,"message":{"content":[{"type":"tool-call","id":5}]}}`,
	} {
		var s TurnScanner
		assert.Error(t, s.Observe(mk(wire.TypeAssistantMessage, 0, data)), data)
	}
	_, err := InterruptedTurnClosers([]Event{mk(wire.TypeTurnStart, 0, `{"turn":"1"}`)})
	assert.Error(t, err)
}

// The repair scan reads what the harness's repair reads and no more: a
// whole number in any spelling is a turn or step, a tool/call whose callId
// is absent or not a string matches no call, and a content block whose type
// is not the string "tool-call" is not a call.
func TestTurnScannerReadsAsTheHarnessRepairs(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":2.0}`),
		mk(wire.TypeStepStart, 1, `{"turn":2,"step":1e0}`),
		mk(wire.TypeAssistantMessage, 2, `{"turn":2,"step":1.0,"message":{"content":[{"type":{"x":1}},{"type":"tool-call","id":"c1"}]}}`),
		mk(wire.TypeToolCall, 3, `{"turn":2,"step":1}`),
		mk(wire.TypeToolCall, 4, `{"turn":2,"step":1,"callId":7}`),
	}
	closers, err := InterruptedTurnClosers(events)
	require.NoError(t, err)
	require.Len(t, closers, 3)
	// c1 was never recorded by a tool/call with its id: not started.
	assert.Equal(t, `{"type":"tool/result","seq":5,"time":1004,"data":{"turn":2,"step":1,"message":{"id":"interrupted-tool-result-c1-5","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","isError":true,"content":[{"type":"text","text":"The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`, encodeLine(t, closers[0]))
	assert.Equal(t, `{"type":"step/end","seq":6,"time":1004,"data":{"turn":2,"step":1}}`, encodeLine(t, closers[1]))
	assert.Equal(t, `{"type":"turn/end","seq":7,"time":1004,"data":{"turn":2,"reason":{"kind":"interrupted"}}}`, encodeLine(t, closers[2]))
}

func TestClosersSeqRange(t *testing.T) {
	var s TurnScanner
	last := mk(wire.TypeTurnStart, wire.MaxSafeInteger, `{"turn":1}`)
	require.NoError(t, s.Observe(last))
	_, err := s.Closers(last)
	assert.Error(t, err)
}
