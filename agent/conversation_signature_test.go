package agent_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// A reasoning block's provider signature goes back to the model with it: a
// provider that verifies its reasoning (Anthropic's thinking) refuses an
// unsigned block.
func TestConversationKeepsReasoningSignatures(t *testing.T) {
	events := []session.Event{
		surface(t, wire.TypeUserMessage, 0, `{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`),
		ev(t, wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		surface(t, wire.TypeAssistantMessage, 2, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"reasoning","text":"hmm","signature":"sig-1"},{"type":"reasoning","text":"","signature":"sig-2"},{"type":"tool-call","id":"c1","name":"read_file","arguments":"{}"}]},"stream":[]}`),
	}
	got, err := agent.Conversation(events)
	require.NoError(t, err)
	require.Equal(t, []provider.Message{
		{Role: "user", Content: []provider.Block{{Type: "text", Text: "hi"}}},
		{Role: "assistant", Content: []provider.Block{
			{Type: "reasoning", Text: "hmm", Signature: "sig-1"},
			{Type: "reasoning", Signature: "sig-2"},
			{Type: "tool-call", ID: "c1", Name: "read_file", Arguments: "{}"},
		}},
	}, got)
}
