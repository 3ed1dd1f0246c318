package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// parseSafeIntSigned takes every spelling of a safe integer, integral
// floats included, and refuses -0 however it is written.
func TestParseSafeIntSignedValues(t *testing.T) {
	good := map[string]int64{
		"0": 0, "-7": -7, "0.0": 0, "-2.0": -2, "2.0": 2, "-1e3": -1000,
		"9007199254740991":      9007199254740991,
		"-9007199254740991":     -9007199254740991,
		"9.007199254740991e15":  9007199254740991,
		"-9.007199254740991e15": -9007199254740991,
	}
	for in, want := range good {
		got, err := parseSafeIntSigned(json.RawMessage(in))
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	bad := map[string]string{
		"-0":                    "must not be -0",
		"-0.0":                  "must not be -0",
		"-0e5":                  "must not be -0",
		"9007199254740992":      "must be a safe integer, got 9007199254740992",
		"-9007199254740992":     "must be a safe integer, got -9007199254740992",
		"9.007199254740992e15":  "must be a safe integer, got 9.007199254740992e15",
		"-9.007199254740992e15": "must be a safe integer, got -9.007199254740992e15",
		"1.5":                   "must be a safe integer, got 1.5",
		"01":                    "must be a safe integer, got 01",
	}
	for in, want := range bad {
		_, err := parseSafeIntSigned(json.RawMessage(in))
		if assert.Error(t, err, in) {
			assert.Equal(t, want, err.Error(), in)
		}
	}
}
