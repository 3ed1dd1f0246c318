package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func cacheEvent(t *testing.T, typ string, seq int64, data string) session.Event {
	t.Helper()
	return session.Event{Type: typ, Seq: seq, Data: json.RawMessage(data)}
}

func userText(text string) string {
	return `{"id":"u","role":"user","content":[{"type":"text","text":"` + text + `"}],"source":{"kind":"user"}}`
}

func text(role, s string) provider.Message {
	return provider.Message{Role: role, Content: []provider.Block{{Type: "text", Text: s}}}
}

// The cache answers what Conversation answers as the log grows, decodes a
// stored event once, and decodes again an event whose bytes changed under
// the same seq (a repaired or compacted log read again).
func TestConversationCacheFollowsTheLog(t *testing.T) {
	c := &convCache{sessions: map[convKey]*convEntries{}}
	log := []session.Event{
		cacheEvent(t, wire.TypeUserMessage, 0, userText("one")),
		cacheEvent(t, wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		cacheEvent(t, wire.TypeAssistantMessage, 2, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"text","text":"two"}]},"stream":[]}`),
	}
	got, err := c.conversation(nil, "s", log)
	require.NoError(t, err)
	require.Equal(t, []provider.Message{text("user", "one"), text("assistant", "two")}, got)

	// Appended events are decoded; the stored ones come from the cache.
	log = append(log, cacheEvent(t, wire.TypeUserMessage, 3, userText("three")))
	got, err = c.conversation(nil, "s", log)
	require.NoError(t, err)
	require.Equal(t, []provider.Message{text("user", "one"), text("assistant", "two"), text("user", "three")}, got)
	require.True(t, sameBytes(c.sessions[convKey{nil, "s"}].byseq[0].data, log[0].Data), "seq 0 was decoded again")

	// The same seqs read again with other bytes (a rewritten log): the new
	// content, not the cached one.
	rewritten := []session.Event{
		cacheEvent(t, wire.TypeUserMessage, 0, userText("ONE")),
		cacheEvent(t, wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		cacheEvent(t, wire.TypeTurnEnd, 2, `{"turn":1,"reason":{"kind":"interrupted"}}`),
	}
	got, err = c.conversation(nil, "s", rewritten)
	require.NoError(t, err)
	require.Equal(t, []provider.Message{text("user", "ONE")}, got)

	// A window from a later seq (after a compaction point) holds only its
	// own messages; another session does not see this one's.
	got, err = c.conversation(nil, "s", log[2:])
	require.NoError(t, err)
	require.Equal(t, []provider.Message{text("assistant", "two"), text("user", "three")}, got)
	got, err = c.conversation(nil, "other", log[3:])
	require.NoError(t, err)
	require.Equal(t, []provider.Message{text("user", "three")}, got)

	// An unreadable message is the error Conversation gives, and is not
	// cached as a message.
	bad := []session.Event{cacheEvent(t, wire.TypeToolResult, 0, `{"message":{"content":[]}}`)}
	_, want := Conversation(bad)
	_, err = c.conversation(nil, "s", bad)
	require.EqualError(t, err, want.Error())
	_, err = c.conversation(nil, "s", bad)
	require.EqualError(t, err, "conversation: tool/result (seq 0) has no content")
}

// The cache holds at most maxCachedConversations sessions.
func TestConversationCacheIsBounded(t *testing.T) {
	c := &convCache{sessions: map[convKey]*convEntries{}}
	for i := range maxCachedConversations + 10 {
		_, err := c.conversation(nil, string(rune('a'+i)), []session.Event{cacheEvent(t, wire.TypeUserMessage, 0, userText("x"))})
		require.NoError(t, err)
	}
	require.Len(t, c.sessions, maxCachedConversations)
}
