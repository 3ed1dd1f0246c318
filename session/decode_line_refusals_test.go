package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// DecodeEventLine's own verdicts, not only its agreement with the other
// decoders: escapes are decoded, a field that cannot be read is refused and
// the event keeps its type, and the envelope rules apply to a line whose
// fields all read.
func TestDecodeEventLineVerdicts(t *testing.T) {
	e, err := DecodeEventLine([]byte(`{"type":"\\x","seq":1,"time":2,"data":{}}`))
	require.NoError(t, err)
	assert.Equal(t, `\x`, e.Type)
	assert.Equal(t, int64(1), e.Seq)
	assert.Equal(t, int64(2), e.Time)

	cases := []struct{ line, typ, err string }{
		{`{"type":"turn/end","seq":"1","time":2,"data":{}}`, "turn/end", `event field "seq": must be a safe integer, got "1"`},
		{`{"type":"user/message","seq":1,"time":2,"data":{},"surfaceOp":{"op":"replace","startSeq":0,"endSeq":1}}`, "user/message",
			`surfaceOp replace range must name earlier events, got start 0, end 1, seq 1`},
		{`{"type":"turn/end","seq":1,"time":2,"data":{},"surfaceOp":"append"}`, "turn/end", `surfaceOp is not allowed on "turn/end" events`},
		// Not canonical (a space): the same verdict through the canonicalizer.
		{`{"type":"turn/end","seq":1, "time":2,"data":{},"surfaceOp":"append"}`, "turn/end", `surfaceOp is not allowed on "turn/end" events`},
	}
	for _, c := range cases {
		e, err := DecodeEventLine([]byte(c.line))
		if assert.Error(t, err, c.line) {
			assert.Equal(t, c.err, err.Error(), c.line)
		}
		assert.Equal(t, c.typ, e.Type, c.line)
	}
}

// The header's delegationDepth may be any non-negative safe integer.
func TestHeaderDelegationDepthRange(t *testing.T) {
	h := wire.Header{Version: wire.FormatVersion, ID: "s1", CreatedAt: 1, DelegationDepth: 1<<53 - 1}
	require.NoError(t, h.Validate())
	h.DelegationDepth = 1 << 53
	err := h.Validate()
	require.Error(t, err)
	assert.Equal(t, "session header delegationDepth must be a non-negative safe integer", err.Error())
	h.DelegationDepth = 0
	require.NoError(t, h.Validate())
	h.DelegationDepth = -1
	require.Error(t, h.Validate())
}

// A null sourceEventSeqs is refused, and a line that is not JSON at all is
// ErrUnparsable.
func TestDecodeEventLineNullSeqsAndUnparsable(t *testing.T) {
	_, err := DecodeEventLine([]byte(`{"type":"x","seq":1,"time":2,"data":{},"sourceEventSeqs":null}`))
	require.Error(t, err)
	assert.Equal(t, `event field "sourceEventSeqs": must be an array, got null`, err.Error())

	for line, want := range map[string]string{
		`{"type":"x",`: "not valid JSON: not losslessly JSON-serializable: invalid JSON: unexpected end of input, expected an object key",
		`not json`:     `not valid JSON: not losslessly JSON-serializable: invalid JSON: unexpected byte 'n' at offset 0, expected "null"`,
	} {
		_, err := DecodeEventLine([]byte(line))
		require.ErrorIs(t, err, ErrUnparsable, line)
		assert.Equal(t, want, err.Error(), line)
	}
}

// createdAt may be MaxSafeInteger; a cwd may be a Windows path on any drive
// letter, a to z in either case.
func TestHeaderCreatedAtAndDriveLetters(t *testing.T) {
	for _, cwd := range []string{"a:/w", "z:/w", `A:\w`, `Z:\w`} {
		h := wire.Header{Version: wire.FormatVersion, ID: "s1", CreatedAt: 1<<53 - 1, Cwd: cwd}
		require.NoError(t, h.Validate(), cwd)
	}
	h := wire.Header{Version: wire.FormatVersion, ID: "s1", CreatedAt: 1, Cwd: "{:/w"}
	require.Error(t, h.Validate())
}

// A typed payload accessor refuses null data as not an object, before it
// looks for the required fields.
func TestPayloadOfNullData(t *testing.T) {
	_, err := mk(wire.TypeTurnStart, 3, `null`).TurnStart()
	require.Error(t, err)
	assert.Equal(t, "turn/start event (seq 3): data is not a JSON object", err.Error())
}
