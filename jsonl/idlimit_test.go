package jsonl_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
)

func TestCheckIDLength(t *testing.T) {
	for id, n := range map[string]int{
		strings.Repeat("a", 255): 255,
		strings.Repeat("é", 51):  255,
		strings.Repeat("日", 51):  255,
		strings.Repeat("😀", 25):  250,
		".":                      5,
		"..":                     10,
		"a b":                    7,
	} {
		require.Equal(t, n, jsonl.SegmentLen(id), "%q", id)
		require.NoError(t, jsonl.CheckIDLength(id), "%q", id)
		seg, err := jsonl.EncodeSegment(id)
		require.NoError(t, err)
		require.Len(t, seg, n)
	}
	for _, id := range []string{strings.Repeat("a", 256), strings.Repeat("é", 52), strings.Repeat("😀", 26)} {
		err := jsonl.CheckIDLength(id)
		require.ErrorIs(t, err, jsonl.ErrIDTooLong)
		require.ErrorContains(t, err, "the store's limit is 255 bytes")
		_, err = jsonl.EncodeSegment(id)
		require.ErrorIs(t, err, jsonl.ErrIDTooLong)
	}
}

// FuzzSegmentLen checks that SegmentLen, which workflows use to refuse an
// id before any activity, is the length of EncodeSegment, and that
// EncodeSegment refuses exactly the ids beyond the limit.
func FuzzSegmentLen(f *testing.F) {
	for _, s := range []string{"a", "é", "😀", ".", "..", "~", "a/b", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if id == "" || !utf8.ValidString(id) {
			return
		}
		want := 0
		switch id {
		case ".":
			want = 5
		case "..":
			want = 10
		default:
			for _, u := range utf16.Encode([]rune(id)) {
				if u < 0x80 && (u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z' || u >= '0' && u <= '9' || u == '.' || u == '_' || u == '-') {
					want++
				} else {
					want += 5
				}
			}
		}
		if got := jsonl.SegmentLen(id); got != want {
			t.Fatalf("SegmentLen(%q) = %d, want %d", id, got, want)
		}
		seg, err := jsonl.EncodeSegment(id)
		if want > jsonl.MaxSegmentBytes {
			if !errors.Is(err, jsonl.ErrIDTooLong) {
				t.Fatalf("EncodeSegment(%q) = %q, %v; want ErrIDTooLong", id, seg, err)
			}
			return
		}
		if err != nil || len(seg) != want {
			t.Fatalf("EncodeSegment(%q) = %q (%d bytes), %v; want %d bytes", id, seg, len(seg), err, want)
		}
	})
}
