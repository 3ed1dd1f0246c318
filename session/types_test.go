package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVocabulary(t *testing.T) {
	for _, typ := range []string{TypeTurnStart, TypeEndSeed, TypeInboxSpliced, TypeToolResult} {
		assert.True(t, KnownEventType(typ), typ)
	}
	assert.False(t, KnownEventType("compaction/test-only"))
	require.NoError(t, RegisterEventType("compaction/test-only"))
	require.NoError(t, RegisterEventType("compaction/test-only"))
	assert.True(t, KnownEventType("compaction/test-only"))
	assert.Error(t, RegisterEventType(""))
	assert.Error(t, RegisterEventType("a\xff"))
	assert.EqualError(t, RegisterEventType(TypeTurnStart), `session: event type "turn/start" is built in`)

	for _, typ := range []string{TypeUserMessage, TypeAssistantMessage, TypeToolResult, TypeSystemMessage} {
		assert.True(t, SurfaceEligible(typ), typ)
	}
	for _, typ := range []string{TypeToolCall, TypeTurnStart, TypeEndSeed, "x"} {
		assert.False(t, SurfaceEligible(typ), typ)
	}
}
