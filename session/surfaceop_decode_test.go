package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The surfaceOp field decodes from both of its wire forms, also with the
// whitespace a pretty-printed line may hold around it.
func TestSurfaceOpDecodesBothForms(t *testing.T) {
	var op SurfaceOp
	require.NoError(t, json.Unmarshal([]byte(`"append"`), &op))
	assert.Equal(t, SurfaceOp{Op: "append"}, op)

	op = SurfaceOp{}
	require.NoError(t, op.UnmarshalJSON([]byte(" \"append\" ")))
	assert.Equal(t, SurfaceOp{Op: "append"}, op)

	op = SurfaceOp{}
	require.NoError(t, json.Unmarshal([]byte(`{"op":"replace","startSeq":2,"endSeq":5}`), &op))
	assert.Equal(t, SurfaceOp{Op: "replace", StartSeq: 2, EndSeq: 5}, op)

	e, err := decodeLine(`{"type":"user/message","seq":6,"time":1,"data":{},"surfaceOp":{ "op" : "replace" , "startSeq" : 1 , "endSeq" : 3 }}`)
	require.NoError(t, err)
	assert.Equal(t, &SurfaceOp{Op: "replace", StartSeq: 1, EndSeq: 3}, e.SurfaceOp)

	// The published harness's spelling has the same meaning and writes back
	// as it was read.
	line := `{"type":"user/message","seq":6,"time":1,"data":{},"surfaceOp":{"op":"replace","start":4,"end":2}}`
	e, err = decodeLine(line)
	require.NoError(t, err)
	assert.Equal(t, &SurfaceOp{Op: "replace", StartSeq: 4, EndSeq: 2, Spelling: SpellingV0}, e.SurfaceOp)
	b, err := e.MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, line, string(b))
}

// Every malformed surfaceOp is refused with its own message.
func TestSurfaceOpDecodeRefusals(t *testing.T) {
	cases := map[string]string{
		``:                              `surfaceOp must be "append" or a replace object: unexpected end of JSON input`,
		`"replace"`:                     `surfaceOp must be "append" or a replace object, got "replace"`,
		`{"op":"replace","startSeq":1}`: `surfaceOp object must be exactly {op:"replace", start, end} or {op:"replace", startSeq, endSeq}`,
		`{"op":"append","startSeq":1,"endSeq":2}`:                 `surfaceOp object must be exactly {op:"replace", start, end} or {op:"replace", startSeq, endSeq}`,
		`{"op":7,"startSeq":1,"endSeq":2}`:                        `surfaceOp object must be exactly {op:"replace", start, end} or {op:"replace", startSeq, endSeq}`,
		`{"op":"replace","startSeq":1,"endSeq":2,"x":0}`:          `surfaceOp object must be exactly {op:"replace", start, end} or {op:"replace", startSeq, endSeq}`,
		`{"op":"replace","startSeq":-1,"endSeq":2}`:               `surfaceOp startSeq: must be a non-negative safe integer, got -1`,
		`{"op":"replace","startSeq":1,"endSeq":"2"}`:              `surfaceOp endSeq: must be a safe integer, got "2"`,
		`{"op":"replace","startSeq":1,"endSeq":9007199254740992}`: `surfaceOp endSeq: must be a safe integer, got 9007199254740992`,
		`{"op":"replace","start":1}`:                              `surfaceOp object must be exactly {op:"replace", start, end} or {op:"replace", startSeq, endSeq}`,
		`{"op":"replace","start":1,"endSeq":2}`:                   `surfaceOp object must be exactly {op:"replace", start, end} or {op:"replace", startSeq, endSeq}`,
		`{"op":"replace","start":-1,"end":2}`:                     `surfaceOp start: must be a non-negative safe integer, got -1`,
		`{"op":"replace","start":1,"end":2.5}`:                    `surfaceOp end: must be a safe integer, got 2.5`,
	}
	for in, want := range cases {
		var op SurfaceOp
		err := op.UnmarshalJSON([]byte(in))
		if assert.Error(t, err, in) {
			assert.Equal(t, want, err.Error(), in)
		}
		assert.Equal(t, SurfaceOp{}, op, "a refused surfaceOp leaves the value unchanged: %s", in)
	}
}

// shortUint is the fast path for the seq and time fields: 1 to 15 digits,
// no leading zero.
func TestShortUintContract(t *testing.T) {
	type res struct {
		n  int64
		ok bool
	}
	cases := map[string]res{
		"0":                {0, true},
		"9":                {9, true},
		"10":               {10, true},
		"123456789012345":  {123456789012345, true},
		"1234567890123456": {0, false},
		"01":               {0, false},
		"00":               {0, false},
		"":                 {0, false},
		"-1":               {0, false},
		"1.0":              {0, false},
		"1e3":              {0, false},
		"1:":               {0, false},
	}
	for in, want := range cases {
		n, ok := shortUint([]byte(in))
		assert.Equal(t, want, res{n, ok}, in)
	}
}
