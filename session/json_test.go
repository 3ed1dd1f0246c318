package session

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCanonicalJSONAccepts(t *testing.T) {
	cases := map[string]string{
		`null`:   `null`,
		` true `: `true`,
		"\t{ \"a\" : [ 1 , 2.5e3 , -7 , 0 , 0.0 , 1e-400 ] }\n": `{"a":[1,2.5e3,-7,0,0.0,1e-400]}`,
		`{"a":{"b":{"c":[]}},"d":{}}`:                           `{"a":{"b":{"c":[]}},"d":{}}`,
		`"\u0041\/\"\\"`:                                        `"A/\"\\"`,
		`"\u003c\u003e\u0026"`:                                  `"<>&"`,
		`"\u2028\u2029"`:                                        "\"\u2028\u2029\"",
		`"\b\f\n\r\t\u0001\u001F"`:                              `"\b\f\n\r\t\u0001\u001f"`,
		`"\u0008\u000C"`:                                        `"\b\f"`,
		`"\ud834\udd1e"`:                                        `"𝄞"`,
		`"\uD800"`:                                              `"\ud800"`,
		`"\udc00\ud800x"`:                                       `"\udc00\ud800x"`,
		`"é漢字🙂"`:                                                `"é漢字🙂"`,
		`"\u007f"`:                                              "\"\x7f\"",
		`12345678901234567890`:                                  `12345678901234567890`,
		`{"a":1,"A":2}`:                                         `{"a":1,"A":2}`,
	}
	for in, want := range cases {
		got, err := CanonicalJSON([]byte(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, string(got), in)
		again, err := CanonicalJSON(got)
		require.NoError(t, err, in)
		assert.Equal(t, string(got), string(again), "idempotent: %s", in)
	}
}

func TestCanonicalJSONRefuses(t *testing.T) {
	cases := map[string]string{
		``:                         "empty input",
		`   `:                      "empty input",
		`-0`:                       "negative zero",
		`-0.0`:                     "negative zero",
		`-0e1`:                     "negative zero",
		`-0E-5`:                    "negative zero",
		`-1e-400`:                  "negative zero",
		`{"a":{"b":[1,{"c":-0}]}}`: "negative zero",
		`{"a":[{"b":-0.0}]}`:       "negative zero",
		`{"x":{"y":-0e1}}`:         "negative zero",
		`1e400`:                    "non-finite",
		`{"a":[-1e400]}`:           "non-finite",
		`NaN`:                      "invalid JSON",
		`{"a":NaN}`:                "invalid JSON",
		`{"a":Infinity}`:           "invalid JSON",
		`{"a":-Infinity}`:          "invalid JSON",
		`{"a":"NaN"x}`:             "invalid JSON",
		`{"a":1,"a":2}`:            "duplicate object key",
		`{"a":1,"\u0061":2}`:       "duplicate object key",
		`{"x":{"k":1,"k":1}}`:      "duplicate object key",
		`{"a":1}{"b":2}`:           "trailing data",
		`{"a":1,}`:                 "invalid JSON",
		`[1,]`:                     "invalid JSON",
		`[01]`:                     "invalid JSON",
		`+1`:                       "invalid JSON",
		`.5`:                       "invalid JSON",
		`1.`:                       "invalid JSON",
		`1e`:                       "invalid JSON",
		`{'a':1}`:                  "invalid JSON",
		`{"a" 1}`:                  "invalid JSON",
		`"abc`:                     "unterminated",
		"\"a\nb\"":                 "control character",
		`"\x"`:                     "escape",
		`"\u12"`:                   "hex",
		"\"\xff\"":                 "invalid UTF-8",
		"\"\xed\xa0\x80\"":         "invalid UTF-8",
		`tru`:                      "invalid JSON",
		`nul`:                      "invalid JSON",
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001): "nesting too deep",
	}
	for in, want := range cases {
		_, err := CanonicalJSON([]byte(in))
		require.Error(t, err, in)
		assert.ErrorIs(t, err, ErrNotLossless, in)
		var le *LosslessError
		require.ErrorAs(t, err, &le, in)
		assert.Contains(t, err.Error(), want, in)
	}
}

func TestCanonicalJSONDuplicateKeysInLargeObject(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		b.WriteString(`"k` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":1,`)
	}
	b.WriteString(`"kaa":2}`)
	_, err := CanonicalJSON([]byte(b.String()))
	require.ErrorIs(t, err, ErrNotLossless)
	assert.Contains(t, err.Error(), `duplicate object key "kaa"`)
}

func TestCanonicalJSONDoesNotAlias(t *testing.T) {
	in := []byte(`{"a":"b"}`)
	out, err := CanonicalJSON(in)
	require.NoError(t, err)
	in[6] = 'X'
	assert.Equal(t, `{"a":"b"}`, string(out))
}

func TestMarshalData(t *testing.T) {
	b, err := MarshalData(map[string]any{"html": "<a&b>", "n": 1.5})
	require.NoError(t, err)
	assert.Equal(t, `{"html":"<a&b>","n":1.5}`, string(b))

	_, err = MarshalData(map[string]any{"z": negZero()})
	assert.ErrorIs(t, err, ErrNotLossless)
	_, err = MarshalData(map[string]any{"nan": nan()})
	assert.ErrorIs(t, err, ErrNotLossless)
	_, err = MarshalData(func() {})
	assert.ErrorIs(t, err, ErrNotLossless)
}

// FuzzCanonicalJSON: CanonicalJSON never panics; on success its output is
// valid JSON, a fixed point, and the same value as the input; it refuses
// valid UTF-8 JSON only for the lossless rule's reasons.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `null`, `{"a":[1,2,{"b":"c"}]}`, `-0`, `-0.0`, `1e400`, `{"a":1,"a":2}`,
		`"\ud800"`, `"\ud834\udd1e"`, `"\u2028<>&"`, "\"\xff\"", `{"a":-1e-400}`, ` [ 1 , 2 ] `,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `[[[[[[]]]]]]`, `"\u0000"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalJSON(in)
		if err != nil {
			if !errors.Is(err, ErrNotLossless) {
				t.Fatalf("error does not match ErrNotLossless: %v", err)
			}
			if json.Valid(in) && utf8.Valid(in) {
				msg := err.Error()
				if !strings.Contains(msg, "duplicate object key") && !strings.Contains(msg, "negative zero") &&
					!strings.Contains(msg, "non-finite") && !strings.Contains(msg, "nesting too deep") {
					t.Fatalf("valid JSON %q refused: %v", in, err)
				}
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		if !json.Valid(out) {
			t.Fatalf("output %q is not valid JSON", out)
		}
		again, err := CanonicalJSON(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		var a, b any
		if json.Unmarshal(in, &a) == nil {
			if err := json.Unmarshal(out, &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("value changed: %q -> %q", in, out)
			}
		}
	})
}
