package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func TestEventJSONRoundTrip(t *testing.T) {
	lines := []string{
		`{"type":"turn/start","seq":0,"time":1700000000000,"data":{"turn":1}}`,
		"{\"type\":\"user/message\",\"seq\":1,\"time\":5,\"data\":{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"<hi> & \u2028 \\ud800\"}]},\"surfaceOp\":\"append\"}",
		`{"type":"tool/result","seq":9,"time":5,"data":{"turn":1},"surfaceOp":{"op":"replace","startSeq":2,"endSeq":8},"sourceEventSeqs":[3,4]}`,
		`{"type":"x/log","seq":2,"time":5,"data":{},"ignorable":true}`,
	}
	for _, line := range lines {
		e, err := decodeLine(line)
		require.NoError(t, err, line)
		require.NoError(t, e.Validate(), line)
		assert.Equal(t, line, encodeLine(t, e), "round trip")
		again, err := decodeLine(encodeLine(t, e))
		require.NoError(t, err)
		assert.Equal(t, e, again)
	}
}

func TestEventDecodeNormalizes(t *testing.T) {
	e, err := decodeLine(` { "data" : { "b" : "\u003c" , "a" : [ 1 ] } , "time" : 1e3 , "seq" : 2.0 , "type" : "t/x" } `)
	require.NoError(t, err)
	assert.Equal(t, int64(2), e.Seq)
	assert.Equal(t, int64(1000), e.Time)
	assert.Equal(t, `{"b":"<","a":[1]}`, string(e.Data))
	assert.Equal(t, `{"type":"t/x","seq":2,"time":1000,"data":{"b":"<","a":[1]}}`, encodeLine(t, e))
}

func TestEventStrictDecodeRefusals(t *testing.T) {
	cases := map[string]string{
		"unknown key":          `{"type":"a","seq":0,"time":0,"data":{},"extra":1}`,
		"seq -0":               `{"type":"a","seq":-0,"time":0,"data":{}}`,
		"seq 1.5":              `{"type":"a","seq":1.5,"time":0,"data":{}}`,
		"seq -1":               `{"type":"a","seq":-1,"time":0,"data":{}}`,
		"seq string":           `{"type":"a","seq":"1","time":0,"data":{}}`,
		"seq unsafe":           `{"type":"a","seq":9007199254740992,"time":0,"data":{}}`,
		"time 1.5":             `{"type":"a","seq":0,"time":1.5,"data":{}}`,
		"time -0":              `{"type":"a","seq":0,"time":-0,"data":{}}`,
		"ignorable false":      `{"type":"a","seq":0,"time":0,"data":{},"ignorable":false}`,
		"ignorable null":       `{"type":"a","seq":0,"time":0,"data":{},"ignorable":null}`,
		"missing data":         `{"type":"a","seq":0,"time":0}`,
		"missing type":         `{"seq":0,"time":0,"data":{}}`,
		"missing seq":          `{"type":"a","time":0,"data":{}}`,
		"missing time":         `{"type":"a","seq":0,"data":{}}`,
		"type number":          `{"type":1,"seq":0,"time":0,"data":{}}`,
		"data -0":              `{"type":"a","seq":0,"time":0,"data":{"x":[-0]}}`,
		"duplicate key":        `{"type":"a","seq":0,"seq":0,"time":0,"data":{}}`,
		"duplicate data key":   `{"type":"a","seq":0,"time":0,"data":{"k":1,"k":2}}`,
		"surfaceOp bad":        `{"type":"user/message","seq":0,"time":0,"data":{},"surfaceOp":"prepend"}`,
		"surfaceOp bad object": `{"type":"user/message","seq":3,"time":0,"data":{},"surfaceOp":{"op":"replace","startSeq":0}}`,
		"sourceEventSeqs bad":  `{"type":"tool/result","seq":3,"time":0,"data":{},"sourceEventSeqs":[-1]}`,
		"sourceEventSeqs obj":  `{"type":"tool/result","seq":3,"time":0,"data":{},"sourceEventSeqs":{}}`,
		"not an object":        `[1]`,
		"null":                 `null`,
		"not JSON":             `{"type":"assistant/chunk","seq":3,"ti`,
	}
	for name, line := range cases {
		_, err := decodeLine(line)
		assert.Error(t, err, name)
	}
	// The harness's envelope takes any data and an empty type.
	for _, line := range []string{
		`{"type":"","seq":0,"time":0,"data":{}}`,
		`{"type":"a","seq":0,"time":0,"data":[]}`,
		`{"type":"a","seq":0,"time":0,"data":null}`,
	} {
		e, err := decodeLine(line)
		require.NoError(t, err, line)
		assert.Equal(t, line, encodeLine(t, e))
	}
	_, err := decodeLine(`{"type":"a","seq":0,"time":0,"data":{},"extra":1}`)
	assert.EqualError(t, err, `unexpected event field "extra"`)
	_, err = decodeLine(`{"type":"a","seq":0,"time":0}`)
	assert.EqualError(t, err, `event lacks required field "data"`)
	_, err = decodeLine(`{"type":"a","seq":-0,"time":0,"data":{}}`)
	assert.EqualError(t, err, `event is not lossless JSON: not losslessly JSON-serializable: negative zero -0`)
	assert.ErrorIs(t, err, ErrNotLossless)
	_, err = decodeLine(`{"type":"a","seq":-1,"time":0,"data":{}}`)
	assert.EqualError(t, err, `event field "seq": must be a non-negative safe integer, got -1`)
	_, err = decodeLine(`{"type":"a","seq":1.5,"time":0,"data":{}}`)
	assert.EqualError(t, err, `event field "seq": must be a safe integer, got 1.5`)
	_, err = decodeLine(`{"type":"a","seq":0,"time":0,"data":{},"ignorable":false}`)
	assert.EqualError(t, err, `event field "ignorable": may only be true, got false`)
}

func TestEventDecodeFailureLeavesTargetUnchanged(t *testing.T) {
	e := mk(wire.TypeTurnStart, 4, `{"turn":2}`)
	err := json.Unmarshal([]byte(`{"type":"a","seq":-1,"time":0,"data":{}}`), &e)
	require.Error(t, err)
	assert.Equal(t, mk(wire.TypeTurnStart, 4, `{"turn":2}`), e)
}

func TestEventMarshal(t *testing.T) {
	e := Event{Type: "x", Seq: 1, Time: 2, Data: json.RawMessage(` { "a" : "<\u2028>" } `)}
	assert.Equal(t, "{\"type\":\"x\",\"seq\":1,\"time\":2,\"data\":{\"a\":\"<\u2028>\"}}", encodeLine(t, e))

	_, err := Event{Type: "x", Data: json.RawMessage(`{"a":-0}`)}.MarshalJSON()
	assert.ErrorIs(t, err, ErrNotLossless)
	_, err = Event{Type: "x", Data: json.RawMessage(`{}`), SurfaceOp: &SurfaceOp{Op: "bogus"}}.MarshalJSON()
	assert.Error(t, err)
	assert.Equal(t, `{"type":"x","seq":0,"time":0,"data":null}`, encodeLine(t, Event{Type: "x"}))
	// Present-but-empty sourceEventSeqs is written (and refused by Validate).
	assert.Equal(t, `{"type":"x","seq":0,"time":0,"data":{},"sourceEventSeqs":[]}`,
		encodeLine(t, Event{Type: "x", Data: json.RawMessage(`{}`), SourceEventSeqs: []int64{}}))
}

func TestEventClone(t *testing.T) {
	e := Event{Type: "tool/result", Seq: 5, Data: json.RawMessage(`{"a":1}`), SurfaceOp: AppendOp(), SourceEventSeqs: []int64{1}}
	c := e.Clone()
	e.Data[2] = 'b'
	e.SurfaceOp.Op = SurfaceReplace
	e.SourceEventSeqs[0] = 9
	assert.Equal(t, `{"a":1}`, string(c.Data))
	assert.Equal(t, SurfaceAppend, c.SurfaceOp.Op)
	assert.Equal(t, []int64{1}, c.SourceEventSeqs)
	assert.Nil(t, CloneEvents(nil))
	assert.Len(t, CloneEvents([]Event{e}), 1)
}

func TestParseSafeInt(t *testing.T) {
	good := map[string]int64{"0": 0, "7": 7, " 12 ": 12, "9007199254740991": wire.MaxSafeInteger, "1e3": 1000, "2.0": 2}
	for in, want := range good {
		got, err := ParseSafeInt(json.RawMessage(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-0", "-1", "1.5", "9007199254740992", "01", "+1", "0x10", "1_0", "NaN", "Infinity", `"1"`, "null", "1e400", "-0.0"} {
		_, err := ParseSafeInt(json.RawMessage(in))
		assert.Error(t, err, in)
	}
}

// A clone keeps an empty sourceEventSeqs: an assistant/message that cites
// nothing is written with [], as it was read.
func TestCloneKeepsAnEmptySourceList(t *testing.T) {
	line := `{"type":"assistant/message","seq":2,"time":1,"data":{},"surfaceOp":"append","sourceEventSeqs":[]}`
	e, err := decodeLine(line)
	require.NoError(t, err)
	assert.Equal(t, line, encodeLine(t, e.Clone()))
	assert.Equal(t, line, encodeLine(t, CloneEvents([]Event{e})[0]))
}
