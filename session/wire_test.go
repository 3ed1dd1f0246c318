package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// A plain envelope encodes to the bytes json.Marshal gives the event, and
// decodes back to the same event: clients and workflows exchange the same
// JSON (docs/DECISIONS.md D83).
func TestWireEnvelopeRoundTrip(t *testing.T) {
	replaceV0 := Event{Type: "surface/replace-thing", Seq: 9, Time: 3, Data: json.RawMessage(`{"a":"<b>"}`),
		SurfaceOp: &SurfaceOp{Op: SurfaceReplace, StartSeq: 1, EndSeq: 4, Spelling: SpellingV0}}
	events := []Event{
		{Type: wire.TypeTurnStart, Seq: 0, Time: 1700000000000, Data: json.RawMessage(`{"turn":1}`)},
		{Type: wire.TypeAssistantMessage, Seq: 1, Time: 2, Data: json.RawMessage(`{"turn":1,"step":1,"message":{"role":"assistant","content":[]},"stream":[]}`),
			SurfaceOp: AppendOp(), SourceEventSeqs: []int64{}},
		{Type: "future/thing", Seq: 2, Time: -5, Data: json.RawMessage("{\"k\":[1,2.50,\"é\u2028<\"]}"), Ignorable: true, SourceEventSeqs: []int64{0, 1}},
		replaceV0,
		{Type: "surface/replace-thing", Seq: 10, Time: 3, Data: json.RawMessage(`{}`),
			SurfaceOp: &SurfaceOp{Op: SurfaceReplace, StartSeq: 2, EndSeq: 2}},
	}
	for _, e := range events {
		want, err := json.Marshal(e)
		require.NoError(t, err)
		got, err := json.Marshal(e.Wire())
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		back, err := FromWire(e.Wire())
		require.NoError(t, err)
		require.Equal(t, e, back)
	}
	require.Contains(t, mustJSON(t, events[1].Wire()), `"sourceEventSeqs":[]`, "an empty citation list is kept")
	require.NotContains(t, mustJSON(t, events[0].Wire()), "sourceEventSeqs")
	require.Equal(t, `{"type":"turn/start","seq":0,"time":1700000000000,"data":{"turn":1}}`, mustJSON(t, events[0].Wire()))

	_, err := FromWire(wire.Event{Type: "turn/start", Seq: -1, Data: json.RawMessage(`{}`)})
	require.ErrorContains(t, err, `event field "seq"`)
	all, err := FromWireEvents(WireEvents(events))
	require.NoError(t, err)
	require.Equal(t, events, all)
	require.Nil(t, WireEvents(nil))
}

// ParseAppendLineWire applies this build's rules and counts the canonical
// size, as ParseAppendLine does.
func TestParseAppendLineWire(t *testing.T) {
	line := []byte(`{ "type":"turn/start", "seq":0, "time":1, "data":{"turn":1} }`)
	e, n, err := ParseAppendLineWire(line)
	require.NoError(t, err)
	require.Equal(t, len(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`)+1, n)
	require.Equal(t, "turn/start", e.Type)
	_, _, err = ParseAppendLineWire([]byte(`{"type":"future/thing","seq":2,"time":12,"data":{}}`))
	require.EqualError(t, err, `not a valid event: type "future/thing" is unknown to this build and not marked ignorable`)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
