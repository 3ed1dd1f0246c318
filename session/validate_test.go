package session

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func TestValidateAccepts(t *testing.T) {
	for _, e := range []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk("plugin/unknown", 3, ` {"x":[1,"a"]} `),
		{Type: "x/log", Seq: 1, Time: 0, Data: json.RawMessage(`{}`), Ignorable: true},
		{Type: wire.TypeUserMessage, Seq: wire.MaxSafeInteger, Time: wire.MaxSafeInteger, Data: json.RawMessage(`{}`), SurfaceOp: AppendOp()},
		{Type: wire.TypeToolResult, Seq: 4, Data: json.RawMessage(`{}`), SurfaceOp: AppendOp(), SourceEventSeqs: []int64{3}},
		{Type: wire.TypeSystemMessage, Seq: 4, Data: json.RawMessage(`{}`), SurfaceOp: &SurfaceOp{Op: SurfaceReplace, StartSeq: 0, EndSeq: 3}},
		{Type: wire.TypeAssistantMessage, Seq: 4, Data: json.RawMessage(`{}`), SurfaceOp: &SurfaceOp{Op: SurfaceReplace, StartSeq: 2, EndSeq: 2}},
		{Type: wire.TypeUserMessage, Seq: 4, Data: json.RawMessage(`{}`), SourceEventSeqs: []int64{0, 1}},
		// The harness's envelope: a replace range after an earlier
		// replacement (start after end in seq order), a negative time, an
		// assistant/message citing its chunks or nothing.
		{Type: wire.TypeUserMessage, Seq: 9, Time: -5, Data: json.RawMessage(`{}`), SurfaceOp: &SurfaceOp{Op: SurfaceReplace, StartSeq: 7, EndSeq: 3}},
		{Type: wire.TypeAssistantMessage, Seq: 4, Data: json.RawMessage(`{}`), SurfaceOp: AppendOp(), SourceEventSeqs: []int64{1, 2, 3}},
		{Type: wire.TypeAssistantMessage, Seq: 4, Data: json.RawMessage(`{}`), SurfaceOp: AppendOp(), SourceEventSeqs: []int64{}},
		// Any JSON value is a payload, and the type may be empty (an
		// unknown type, read only when ignorable), as the harness takes them.
		{Type: "x/y", Seq: 1, Data: json.RawMessage(`[1]`)},
		{Type: "x/y", Seq: 1, Data: json.RawMessage(`null`)},
		{Type: "", Seq: 1, Data: json.RawMessage(`"s"`), Ignorable: true},
	} {
		assert.NoError(t, e.Validate(), "%+v", e)
	}
}

func TestValidateRefuses(t *testing.T) {
	obj := json.RawMessage(`{}`)
	cases := []struct {
		e    Event
		want string
	}{
		{Event{Type: "a\xff", Data: obj}, `event type "a\xff" is not valid UTF-8`},
		{Event{Type: "a", Seq: -1, Data: obj}, "event seq must be a non-negative safe integer, got -1"},
		{Event{Type: "a", Seq: wire.MaxSafeInteger + 1, Data: obj}, "event seq must be a non-negative safe integer, got 9007199254740992"},
		{Event{Type: "a", Time: -wire.MaxSafeInteger - 1, Data: obj}, "event time must be a safe integer, got -9007199254740992"},
		{Event{Type: "a", Time: wire.MaxSafeInteger + 1, Data: obj}, "event time must be a safe integer, got 9007199254740992"},
		{Event{Type: "a"}, "event data is missing"},
		{Event{Type: "a", Data: json.RawMessage("  ")}, "event data is missing"},
		{Event{Type: "a", Data: json.RawMessage(`{"a":{"b":-0.0}}`)}, "event data: not losslessly JSON-serializable: negative zero -0.0"},
		{Event{Type: "a", Data: json.RawMessage(`{"a":1e400}`)}, "event data: not losslessly JSON-serializable: non-finite number 1e400"},
		{Event{Type: "a", Data: json.RawMessage(`{"a":1,"a":1}`)}, `event data: not losslessly JSON-serializable: duplicate object key "a"`},
		{Event{Type: "a", Data: json.RawMessage(`{"a":1`)}, "event data: not losslessly JSON-serializable: invalid JSON: unexpected end of input, expected ',' or '}'"},
		{Event{Type: wire.TypeTurnStart, Data: obj, SurfaceOp: AppendOp()}, `surfaceOp is not allowed on "turn/start" events`},
		{Event{Type: wire.TypeUserMessage, Data: obj, SurfaceOp: &SurfaceOp{Op: "x"}}, `surfaceOp must be "append" or "replace", got "x"`},
		{Event{Type: wire.TypeUserMessage, Seq: 5, Data: obj, SurfaceOp: &SurfaceOp{Op: SurfaceReplace, StartSeq: 1, EndSeq: 5}},
			"surfaceOp replace range must name earlier events, got start 1, end 5, seq 5"},
		{Event{Type: wire.TypeUserMessage, Seq: 5, Data: obj, SurfaceOp: &SurfaceOp{Op: SurfaceReplace, StartSeq: 5, EndSeq: 1}},
			"surfaceOp replace range must name earlier events, got start 5, end 1, seq 5"},
		{Event{Type: wire.TypeUserMessage, Seq: 5, Data: obj, SurfaceOp: &SurfaceOp{Op: SurfaceReplace, StartSeq: -1, EndSeq: 2}},
			"surfaceOp replace range must name earlier events, got start -1, end 2, seq 5"},
		{Event{Type: wire.TypeToolCall, Seq: 5, Data: obj, SourceEventSeqs: []int64{1}}, `sourceEventSeqs is not allowed on "tool/call" events`},
		{Event{Type: wire.TypeToolResult, Seq: 5, Data: obj, SourceEventSeqs: []int64{}}, "sourceEventSeqs must be non-empty when present, except on assistant/message"},
		{Event{Type: wire.TypeAssistantMessage, Seq: 5, Data: obj, SourceEventSeqs: []int64{1, 5}}, "sourceEventSeqs must cite earlier events: 5 >= seq 5"},
		{Event{Type: wire.TypeAssistantMessage, Seq: 5, Data: obj, SourceEventSeqs: []int64{1, 2, 1}}, "sourceEventSeqs must not repeat a seq: 1"},
		{Event{Type: wire.TypeToolResult, Seq: 5, Data: obj, SourceEventSeqs: []int64{-2}}, "sourceEventSeqs[0] must be a non-negative safe integer, got -2"},
		{Event{Type: wire.TypeToolResult, Seq: 5, Data: obj, Ignorable: true}, `ignorable is not allowed on surface-eligible "tool/result" events`},
	}
	for _, c := range cases {
		assert.EqualError(t, c.e.Validate(), c.want)
	}
}

func TestErrorTexts(t *testing.T) {
	assert.Equal(t, "session event batch is not losslessly JSON-serializable because it contains non-JSON-serializable data", ErrBatchNotLossless.Error())
	assert.Equal(t, "invalid session event", ErrInvalidEvent.Error())
}

func TestSnapshotBatchDeepCopy(t *testing.T) {
	data := []byte(` { "k" : [ "v" ] } `)
	seqs := []int64{0}
	op := AppendOp()
	in := []Event{
		{Type: wire.TypeToolResult, Seq: 1, Time: 7, Data: data, SurfaceOp: op, SourceEventSeqs: seqs},
		mk(wire.TypeTurnEnd, 2, `{"turn":1,"reason":{"kind":"completed"}}`),
	}
	snap, err := SnapshotBatch(in)
	require.NoError(t, err)
	require.Len(t, snap, 2)

	// Mutate everything the caller still holds.
	for i := range data {
		data[i] = 'X'
	}
	seqs[0] = 42
	op.Op = SurfaceReplace
	in[0].Type = "changed"
	in[1].Data[2] = 'Z'
	in[1] = Event{}

	assert.Equal(t, Event{Type: wire.TypeToolResult, Seq: 1, Time: 7, Data: json.RawMessage(`{"k":["v"]}`),
		SurfaceOp: &SurfaceOp{Op: SurfaceAppend}, SourceEventSeqs: []int64{0}}, snap[0])
	assert.Equal(t, `{"turn":1,"reason":{"kind":"completed"}}`, string(snap[1].Data))
	assert.Equal(t, wire.TypeTurnEnd, snap[1].Type)

	empty, err := SnapshotBatch(nil)
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func TestSnapshotBatchLossless(t *testing.T) {
	for _, data := range []string{
		`{"a":-0}`, `{"a":{"b":[-0.0]}}`, `{"a":[{"b":-0e1}]}`, `{"a":1e400}`, `{"a":1,"a":2}`,
		`{"a":NaN}`, `{"a":Infinity}`, `{"a":"x"`, "{\"a\":\"\xff\"}",
	} {
		batch := []Event{mk("x", 0, `{}`), mk("x", 1, data)}
		_, err := SnapshotBatch(batch)
		require.Error(t, err, data)
		assert.Equal(t, ErrBatchNotLossless.Error(), err.Error(), data)
		assert.ErrorIs(t, err, ErrBatchNotLossless, data)
		assert.ErrorIs(t, err, ErrNotLossless, data)
		assert.NotErrorIs(t, err, ErrInvalidEvent, data)
		var be *BatchNotLosslessError
		require.ErrorAs(t, err, &be)
		assert.Equal(t, 1, be.Index)
		assert.Equal(t, int64(1), be.Seq)
		assert.Contains(t, be.Detail(), "event at index 1 (seq 1): data: not losslessly JSON-serializable")
		var le *LosslessError
		assert.ErrorAs(t, err, &le)
	}
	// The lossless rule is checked over the whole batch before the envelope.
	_, err := SnapshotBatch([]Event{{Type: "", Data: json.RawMessage(`{}`)}, mk("x", 1, `{"a":-0}`)})
	assert.ErrorIs(t, err, ErrBatchNotLossless)
}

func TestSnapshotBatchInvalidEvent(t *testing.T) {
	cases := []struct {
		e    Event
		want string
	}{
		{Event{Type: "x", Seq: 3}, "invalid session event at index 0 (seq 3): event data is missing"},
		{Event{Type: wire.TypeTurnStart, Seq: 3, Data: json.RawMessage(`{}`), SurfaceOp: AppendOp()}, `invalid session event at index 0 (seq 3): surfaceOp is not allowed on "turn/start" events`},
		{Event{Type: wire.TypeToolResult, Seq: 3, Data: json.RawMessage(`{}`), SourceEventSeqs: []int64{}}, "invalid session event at index 0 (seq 3): sourceEventSeqs must be non-empty when present, except on assistant/message"},
	}
	for _, c := range cases {
		_, err := SnapshotBatch([]Event{c.e})
		assert.EqualError(t, err, c.want)
		assert.ErrorIs(t, err, ErrInvalidEvent)
		assert.False(t, errors.Is(err, ErrBatchNotLossless))
	}
}
