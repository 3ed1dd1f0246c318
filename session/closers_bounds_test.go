package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// openStepWithCall is a log whose turn 1 has step 1 open with one recorded,
// unanswered call, its last event at seq last and time lastTime.
func openStepWithCall(last, lastTime int64) []Event {
	events := []Event{
		mk(wire.TypeTurnStart, last-3, `{"turn":1}`),
		mk(wire.TypeStepStart, last-2, `{"turn":1,"step":1}`),
		mk(wire.TypeAssistantMessage, last-1, assistantWithCalls(1, "c1")),
		mk(wire.TypeToolCall, last, toolCallData(1, "c1")),
	}
	events[3].Time = lastTime
	return events
}

// Three closers follow a log with one pending call in an open step: the
// last of them may take exactly MaxSafeInteger, one more seq may not.
func TestClosersSeqsUpToMaxSafeInteger(t *testing.T) {
	const max = 1<<53 - 1
	closers, err := InterruptedTurnClosers(openStepWithCall(max-3, 5000))
	require.NoError(t, err)
	require.Len(t, closers, 3)
	assert.Equal(t, []int64{max - 2, max - 1, max}, []int64{closers[0].Seq, closers[1].Seq, closers[2].Seq})

	_, err = InterruptedTurnClosers(openStepWithCall(max-2, 5000))
	require.Error(t, err)
	assert.Equal(t, "closers: seqs after 9007199254740989 would exceed the safe-integer range", err.Error())
}

// The closers take the last event's time, which may be MaxSafeInteger
// itself but not more.
func TestClosersTimeUpToMaxSafeInteger(t *testing.T) {
	const max = 1<<53 - 1
	closers, err := InterruptedTurnClosers(openStepWithCall(10, max))
	require.NoError(t, err)
	require.Len(t, closers, 3)
	for _, c := range closers {
		assert.Equal(t, int64(max), c.Time)
	}

	_, err = InterruptedTurnClosers(openStepWithCall(10, max+1))
	require.Error(t, err)
	assert.Equal(t, "closers: last event time must be a safe integer, got 9007199254740992", err.Error())
}

// A tool/result that answers a call of an already ended step must not
// answer the call of the current step that took the same slot.
func TestClosersLateResultOfEndedStepLeavesCurrentCallPending(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 1, `{"turn":1}`),
		mk(wire.TypeStepStart, 2, `{"turn":1,"step":1}`),
		mk(wire.TypeAssistantMessage, 3, assistantWithCalls(1, "old")),
		mk(wire.TypeStepEnd, 4, `{"turn":1,"step":1}`),
		mk(wire.TypeStepStart, 5, `{"turn":1,"step":2}`),
		mk(wire.TypeAssistantMessage, 6, assistantWithCalls(2, "new")),
		mk(wire.TypeToolResult, 7, toolResultData(1, "old")),
	}
	var s TurnScanner
	for _, e := range events {
		require.NoError(t, s.Observe(e))
	}
	ot, open := s.OpenTurn()
	require.True(t, open)
	assert.Equal(t, OpenTurn{Turn: 1, Step: 2, PendingCalls: []PendingCall{{CallID: "new", Step: 2, CallSeq: -1}}}, ot)
}

// A call recorded by a tool/call at seq 0 is recorded: only -1 means not.
func TestPendingCallRecordedAtSeqZero(t *testing.T) {
	assert.True(t, PendingCall{CallID: "c", Step: 1, CallSeq: 0}.Recorded())
	assert.False(t, PendingCall{CallID: "c", Step: 1, CallSeq: -1}.Recorded())
}

// Seq 0 and time 0 are valid for the last event: a log holding only an open
// turn/start at seq 0, time 0 is closed by a turn/end at seq 1, time 0.
func TestClosersAfterSeqZeroTimeZero(t *testing.T) {
	start := Event{Type: wire.TypeTurnStart, Seq: 0, Time: 0, Data: []byte(`{"turn":1}`)}
	closers, err := InterruptedTurnClosers([]Event{start})
	require.NoError(t, err)
	require.Len(t, closers, 1)
	assert.Equal(t, `{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`, encodeLine(t, closers[0]))
}

// A turn number may be any safe integer from 1 up.
func TestTurnNumberUpToMaxSafeInteger(t *testing.T) {
	var s TurnScanner
	require.NoError(t, s.Observe(mk(wire.TypeTurnStart, 0, `{"turn":9007199254740991}`)))
	assert.Equal(t, int64(9007199254740991), s.LastTurn())
	err := s.Observe(mk(wire.TypeTurnStart, 1, `{"turn":9007199254740992}`))
	require.Error(t, err)
	assert.Equal(t, "turn/start event (seq 1): malformed data: must be a safe integer, got 9007199254740992", err.Error())
	err = s.Observe(mk(wire.TypeTurnStart, 2, `{"turn":0}`))
	require.Error(t, err)
	assert.Equal(t, "turn/start event (seq 2): data.turn must be a safe integer >= 1, got 0", err.Error())
}
