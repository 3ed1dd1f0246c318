package session

import (
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/wire"
)

// benchLine is a stored assistant/message line with about 1 KB of prose.
func benchLine(b *testing.B) []byte {
	b.Helper()
	text := strings.Repeat("read write edit search list run tests build deploy file directory ", 16)
	e, err := NewEvent(wire.TypeAssistantMessage, 7, 1_700_000_000_007, map[string]any{
		"turn": 1, "step": 1, "stream": []any{},
		"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	line, err := e.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	return line
}

// BenchmarkLineDecoder decodes a canonical line without copying it.
func BenchmarkLineDecoder(b *testing.B) {
	line := benchLine(b)
	var d LineDecoder
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(line); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeEventLineSlow decodes the same line through the
// canonicalizer.
func BenchmarkDecodeEventLineSlow(b *testing.B) {
	line := benchLine(b)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeEventLineSlow(line, nil); err != nil {
			b.Fatal(err)
		}
	}
}
