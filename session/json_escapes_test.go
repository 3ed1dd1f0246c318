package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The canonicalizer's \u escapes at their edges: lower- and upper-case hex
// letters, a pair that starts with a low surrogate (not a pair: both stay
// escaped), and escapes cut off by the end of the input.
func TestCanonicalJSONUnicodeEscapeEdges(t *testing.T) {
	good := map[string]string{
		`"\u00aa"`:       `"ª"`,
		`"\u00AA"`:       `"ª"`,
		`"\u00fF"`:       `"ÿ"`,
		`"\ud800\udc00"`: `"𐀀"`,
		`"\udbff\udfff"`: "\"\U0010FFFF\"",
		`"\udc00\udc00"`: `"\udc00\udc00"`,
		`"\ud800\u0041"`: `"\ud800A"`,
		`"\ud800\udfff"`: "\"\U000103FF\"",
		`"\ud800\ue000"`: "\"\\ud800\uE000\"",
		`"\ue000"`:       "\"\uE000\"",
	}
	for in, want := range good {
		out, err := CanonicalJSON([]byte(in))
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, string(out), in)
		}
	}
	bad := map[string]string{
		`"\u0041`:  "not losslessly JSON-serializable: invalid JSON: unterminated string",
		`"\ud800\`: "not losslessly JSON-serializable: invalid JSON: unterminated string",
		`"\u004`:   "not losslessly JSON-serializable: invalid JSON: unexpected byte '0' at offset 3, expected four hex digits",
		`"\u00ag"`: "not losslessly JSON-serializable: invalid JSON: unexpected byte '0' at offset 3, expected four hex digits",
	}
	for in, want := range bad {
		_, err := CanonicalJSON([]byte(in))
		if assert.Error(t, err, in) {
			assert.Equal(t, want, err.Error(), in)
		}
	}
}
