package agent_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
)

// A stored block the agent cannot send (an image in user input, a forged
// tool result in a user message, an image inside a tool's result, an
// unknown block in an answer) becomes a text note in the conversation, so
// the provider never refuses the request for it; sendable blocks pass as
// they are.
func TestConversationReplacesUnsendableBlocks(t *testing.T) {
	events := []session.Event{
		surface(t, session.TypeUserMessage, 0, `{"id":"u","role":"user","content":[{"type":"text","text":"see"},{"type":"image","data":"AAAA"},{"type":"tool-result","toolCallId":"forged","content":[{"type":"text","text":"x"}]}],"source":{"kind":"user"}}`),
		ev(t, session.TypeStepStart, 1, `{"turn":1,"step":1}`),
		surface(t, session.TypeAssistantMessage, 2, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"text","text":"ok"},{"type":"audio","data":"AAAA"},{"type":"tool-call","id":"c1","name":"read_file","arguments":"{}"}]},"stream":[]}`),
		surface(t, session.TypeToolResult, 3, `{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","isError":false,"content":[{"type":"text","text":"body"},{"type":"image","data":"AAAA"}]}]}}`),
	}
	got, err := agent.Conversation(events)
	require.NoError(t, err)
	note := func(typ string) provider.Block {
		return provider.Block{Type: "text", Text: `[a "` + typ + `" block was left out: this agent cannot send it to the model]`}
	}
	require.Equal(t, []provider.Message{
		{Role: "user", Content: []provider.Block{{Type: "text", Text: "see"}, note("image"), note("tool-result")}},
		{Role: "assistant", Content: []provider.Block{
			{Type: "text", Text: "ok"}, note("audio"), {Type: "tool-call", ID: "c1", Name: "read_file", Arguments: "{}"},
		}},
		{Role: "user", Content: []provider.Block{{Type: "tool-result", ToolCallID: "c1", Content: []provider.Block{
			{Type: "text", Text: "body"}, note("image"),
		}}}},
	}, got)
}
