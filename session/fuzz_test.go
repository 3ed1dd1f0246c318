package session

import (
	"encoding/json"
	"testing"

	"github.com/sessionflow/sessionflow/wire"
)

// FuzzEventJSON: strict decoding never panics, and a decoded event encodes to
// bytes that decode back to the same event and re-encode identically.
func FuzzEventJSON(f *testing.F) {
	for _, s := range []string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"tool/result","seq":9,"time":5,"data":{},"surfaceOp":{"op":"replace","startSeq":2,"endSeq":8},"sourceEventSeqs":[3]}`,
		`{"type":"x","seq":2,"time":5,"data":{},"ignorable":true}`,
		`{"type":"x","seq":-0,"time":5,"data":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var e Event
		if json.Unmarshal(in, &e) != nil {
			return
		}
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("decoded event %q does not encode: %v", in, err)
		}
		var again Event
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("encoded event %q does not decode: %v", b, err)
		}
		b2, err := again.MarshalJSON()
		if err != nil || string(b2) != string(b) {
			t.Fatalf("re-encoding differs: %q vs %q (%v)", b, b2, err)
		}
		_ = e.Validate()
	})
}

// FuzzTurnScanner: arbitrary payloads on repair-relevant events never panic,
// and closers of an open turn always validate and continue the seqs.
func FuzzTurnScanner(f *testing.F) {
	f.Add([]byte(`{"turn":1}`), []byte(`{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"a"}]}}`), []byte(`{"callId":"a"}`), uint8(7))
	f.Add([]byte(`{"turn":2}`), []byte(`{"step":3,"message":{"content":[]}}`), []byte(`{"message":{"source":{"callId":"a"}}}`), uint8(0))
	types := []string{wire.TypeTurnStart, wire.TypeStepStart, wire.TypeAssistantMessage, wire.TypeToolCall, wire.TypeToolResult, wire.TypeStepEnd, wire.TypeTurnEnd, "other"}
	f.Fuzz(func(t *testing.T, a, b, c []byte, pattern uint8) {
		datas := [][]byte{a, b, c}
		events := []Event{mk(wire.TypeTurnStart, 0, `{"turn":1}`)}
		for i := range 9 {
			typ := types[(int(pattern)+i*3)%len(types)]
			events = append(events, Event{Type: typ, Seq: int64(len(events)), Time: 5, Data: datas[i%3]})
		}
		closers, err := InterruptedTurnClosers(events)
		if err != nil {
			return
		}
		for i, e := range closers {
			if e.Seq != int64(len(events)+i) || e.Time != 5 {
				t.Fatalf("closer %d has seq %d time %d", i, e.Seq, e.Time)
			}
			if err := e.Validate(); err != nil {
				t.Fatalf("closer %d invalid: %v", i, err)
			}
		}
		if len(closers) > 0 && closers[len(closers)-1].Type != wire.TypeTurnEnd {
			t.Fatalf("last closer is %s", closers[len(closers)-1].Type)
		}
	})
}
