package workflows_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func TestWorkflowIDEncoding(t *testing.T) {
	cases := []struct{ id, wid string }{
		{"cli-x", "session/cli-x"},
		{"a/b c~!", "session/a/b c~!"},
		{"é", "session/%C3%A9"},
		{"日本", "session/%E6%97%A5%E6%9C%AC"},
		{"50%", "session/50%25"},
		{"tab\there", "session/tab%09here"},
		{"\x7f", "session/%7F"},
		{"😀", "session/%F0%9F%98%80"},
	}
	for _, c := range cases {
		require.Equal(t, c.wid, wire.WorkflowID(c.id), "id %q", c.id)
		got, err := wire.SessionIDFromWorkflowID(c.wid)
		require.NoError(t, err, "wid %q", c.wid)
		require.Equal(t, c.id, got)
	}
}

func TestWorkflowIDDecodeRefusesNonCanonical(t *testing.T) {
	for wid, want := range map[string]string{
		"loop/x":         `does not start with "session/"`,
		"session/%c3%a9": "two upper-case hex digits",
		"session/%41":    `encodes 'A', which is written as itself`,
		"session/%2":     "truncated escape at offset 0",
		"session/%":      "truncated escape at offset 0",
		"session/%C3":    "not valid UTF-8",
		"session/a\x01":  "byte 0x01 at offset 1 is not printable ASCII",
		"session/é":      "byte 0xC3 at offset 0 is not printable ASCII",
		"session/%25%ZZ": "escape at offset 3 is not",
	} {
		_, err := wire.SessionIDFromWorkflowID(wid)
		require.ErrorIs(t, err, wire.ErrBadWorkflowID, wid)
		require.ErrorContains(t, err, want, wid)
	}
}

// FuzzWorkflowIDPart checks that the encoding is printable ASCII, reversible
// and canonical: decode(encode(s)) == s for every valid UTF-8 s, and a part
// that decodes encodes back to itself.
func FuzzWorkflowIDPart(f *testing.F) {
	for _, s := range []string{"", "cli-x", "é", "日本", "50%", "%C3%A9", "%41", "a\x00b", "\xff", "😀 x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := wire.EncodeWorkflowIDPart(s)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7E {
				t.Fatalf("encode(%q) = %q holds byte 0x%02X", s, enc, enc[i])
			}
		}
		if !strings.Contains(s, "%") && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7E }) && enc != s {
			t.Fatalf("printable ASCII %q changed to %q", s, enc)
		}
		dec, err := wire.DecodeWorkflowIDPart(enc)
		if utf8.ValidString(s) {
			if err != nil || dec != s {
				t.Fatalf("decode(encode(%q)) = %q, %v", s, dec, err)
			}
		} else if err == nil {
			t.Fatalf("decode(encode(%q)) accepted invalid UTF-8", s)
		}
		// Any string read as an encoded part: if it decodes, it is canonical.
		if d, err := wire.DecodeWorkflowIDPart(s); err == nil {
			if back := wire.EncodeWorkflowIDPart(d); back != s {
				t.Fatalf("decode(%q) = %q encodes to %q", s, d, back)
			}
		}
	})
}
