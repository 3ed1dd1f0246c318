package agent

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/wire"
)

// TestProgressWindow: the progress text is the last ProgressWindow bytes of
// the shown text at most, cut at a character boundary, with TextOffset its
// start in the shown text; Reasoning is set while only reasoning streamed.
func TestProgressWindow(t *testing.T) {
	f := newFold()
	var shown strings.Builder
	p := wire.ModelProgress{Turn: 2, Step: 3}
	c := provider.Chunk{Type: provider.ChunkReasoning, Delta: "plan"}
	f.Push(c, 1)
	p = withShownTail(nextProgress(p, f, c), f)
	require.Equal(t, wire.ModelProgress{Turn: 2, Step: 3, Chunks: 1, Reasoning: true}, p)
	for i := range 300 {
		s := strings.Repeat(string(rune('a'+i%26)), 20) + "é"
		shown.WriteString(s)
		c := provider.Chunk{Type: provider.ChunkText, Delta: s}
		f.Push(c, int64(i))
		p = withShownTail(nextProgress(p, f, c), f)
		full := shown.String()
		require.False(t, p.Reasoning)
		require.True(t, utf8.ValidString(p.Text))
		require.LessOrEqual(t, len(p.Text), ProgressWindow)
		require.Equal(t, full[p.TextOffset:], p.Text)
		require.True(t, strings.HasPrefix(full[p.TextOffset:], p.Text))
		if len(full) <= ProgressWindow {
			require.Equal(t, int64(0), p.TextOffset)
		} else {
			require.GreaterOrEqual(t, len(p.Text), ProgressWindow-1, "the window is only cut back to a character boundary")
		}
	}
	require.Equal(t, int64(301), p.Chunks)
	require.Greater(t, p.TextOffset, int64(0))
}
