package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func TestVocabulary(t *testing.T) {
	for _, typ := range []string{wire.TypeTurnStart, wire.TypeEndSeed, wire.TypeInboxSpliced, wire.TypeToolResult} {
		assert.True(t, KnownEventType(typ), typ)
	}
	// The vocabulary is process-wide: take the test's type out again so a
	// repeated run (go test -count=N) starts from the same vocabulary.
	t.Cleanup(func() {
		vocabMu.Lock()
		defer vocabMu.Unlock()
		delete(vocab, "compaction/test-only")
	})
	assert.False(t, KnownEventType("compaction/test-only"))
	require.NoError(t, RegisterEventType("compaction/test-only"))
	require.NoError(t, RegisterEventType("compaction/test-only"))
	assert.True(t, KnownEventType("compaction/test-only"))
	assert.Error(t, RegisterEventType(""))
	assert.Error(t, RegisterEventType("a\xff"))
	assert.EqualError(t, RegisterEventType(wire.TypeTurnStart), `session: event type "turn/start" is built in`)

	for _, typ := range []string{wire.TypeUserMessage, wire.TypeAssistantMessage, wire.TypeToolResult, wire.TypeSystemMessage} {
		assert.True(t, SurfaceEligible(typ), typ)
	}
	for _, typ := range []string{wire.TypeToolCall, wire.TypeTurnStart, wire.TypeEndSeed, "x"} {
		assert.False(t, SurfaceEligible(typ), typ)
	}
}
