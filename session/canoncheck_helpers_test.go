package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// shortInteger is the fast path's test for numbers whose spelling is their
// canonical form: integers of at most 15 digits, optionally negative.
func TestShortIntegerContract(t *testing.T) {
	cases := map[string]bool{
		"0":                true,
		"7":                true,
		"-7":               true,
		"-0":               true, // the caller refuses -0 itself
		"123456789012345":  true,
		"-123456789012345": true,
		"1234567890123456": false,
		"1.5":              false,
		"1e3":              false,
		"-1.0":             false,
		"-":                false,
	}
	for text, want := range cases {
		assert.Equal(t, want, shortInteger([]byte(text)), text)
	}
}

// canonicalControlEscape accepts exactly the \u00xx spellings, in
// lower-case hex, of the control characters without a short escape.
func TestCanonicalControlEscapeContract(t *testing.T) {
	cases := map[string]bool{
		`\u0000`: true,
		`\u0001`: true,
		`\u0009`: false, // \t
		`\u000a`: false, // \n
		`\u000b`: true,
		`\u000e`: true,
		`\u000f`: true,
		`\u0010`: true,
		`\u0019`: true,
		`\u001a`: true,
		`\u001f`: true,
		`\u0008`: false, // \b
		`\u000c`: false, // \f
		`\u000d`: false, // \r
		`\u000B`: false, // upper-case hex
		`\u0020`: false, // printable
		`\u0100`: false,
		`\u1000`: false,
		`\u000g`: false,
		`\u00`:   false, // short
	}
	for esc, want := range cases {
		assert.Equal(t, want, canonicalControlEscape([]byte(esc)), esc)
	}
}
