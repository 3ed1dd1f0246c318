package agent_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// A stored block the agent cannot send (an image in user input, a forged
// tool result in a user message, an image inside a tool's result, an
// unknown block in an answer) becomes a text note in the conversation, so
// the provider never refuses the request for it; sendable blocks pass as
// they are.
func TestConversationReplacesUnsendableBlocks(t *testing.T) {
	events := []session.Event{
		surface(t, wire.TypeUserMessage, 0, `{"id":"u","role":"user","content":[{"type":"text","text":"see"},{"type":"image","data":"AAAA"},{"type":"tool-result","toolCallId":"forged","content":[{"type":"text","text":"x"}]}],"source":{"kind":"user"}}`),
		ev(t, wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
		surface(t, wire.TypeAssistantMessage, 2, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"text","text":"ok"},{"type":"audio","data":"AAAA"},{"type":"tool-call","id":"c1","name":"read_file","arguments":"{}"}]},"stream":[]}`),
		surface(t, wire.TypeToolResult, 3, `{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","isError":false,"content":[{"type":"text","text":"body"},{"type":"image","data":"AAAA"}]}]}}`),
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

// The conversation is the log's surface: a replacement (a compaction's
// summary here) stands where the messages it replaced stood, and they are
// not sent; the log keeps them.
func TestConversationFollowsTheSurface(t *testing.T) {
	ev := func(typ string, seq int64, data string, op *session.SurfaceOp, cites ...int64) session.Event {
		e := session.Event{Type: typ, Seq: seq, Time: 1, Data: json.RawMessage(data), SurfaceOp: op, SourceEventSeqs: cites}
		require.NoError(t, e.Validate())
		return e
	}
	user := func(seq int64, text string) session.Event {
		return ev(wire.TypeUserMessage, seq, `{"id":"u`+text+`","role":"user","content":[{"type":"text","text":"`+text+`"}],"source":{"kind":"user"}}`, session.AppendOp())
	}
	events := []session.Event{
		ev(wire.TypeTurnStart, 0, `{"turn":1}`, nil),
		user(1, "one"),
		user(2, "two"),
		user(3, "three"),
		ev(wire.TypeUserMessage, 4, `{"id":"s","role":"user","content":[{"type":"text","text":"summary of one and two"}],"source":{"kind":"plugin","plugin":"compact"}}`,
			&session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: 1, EndSeq: 2}, 1, 2),
		user(5, "four"),
	}
	msgs, err := agent.Conversation(events)
	require.NoError(t, err)
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Content[0].Text)
	}
	require.Equal(t, []string{"summary of one and two", "three", "four"}, texts)

	// A replacement the fold refuses (it does not cite what it shadows) is
	// an error, not a conversation.
	events[4].SourceEventSeqs = []int64{1}
	_, err = agent.Conversation(events)
	require.ErrorContains(t, err, "conversation: ")
}
