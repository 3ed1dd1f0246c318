package agent

import (
	"encoding/json"
	"fmt"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// storedBlock is a content block as the log stores it. A tool-call block's
// arguments are the model's raw JSON text (a JSON string); logs written by
// other harnesses may hold the arguments object itself.
type storedBlock struct {
	Type       string          `json:"type"`
	Text       string          `json:"text,omitempty"`
	Signature  string          `json:"signature,omitempty"`
	ID         string          `json:"id,omitempty"`
	Name       string          `json:"name,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	IsError    bool            `json:"isError,omitempty"`
	Content    []storedBlock   `json:"content,omitempty"`
}

// block converts a stored block to a provider block.
func (b storedBlock) block() (provider.Block, error) {
	out := provider.Block{Type: b.Type, Text: b.Text, Signature: b.Signature, ID: b.ID, Name: b.Name, ToolCallID: b.ToolCallID, IsError: b.IsError}
	args, err := argumentsText(b.Arguments)
	if err != nil {
		return provider.Block{}, fmt.Errorf("tool-call block %q: %w", b.ID, err)
	}
	out.Arguments = args
	for _, c := range b.Content {
		cb, err := c.block()
		if err != nil {
			return provider.Block{}, err
		}
		out.Content = append(out.Content, cb)
	}
	return out, nil
}

// argumentsText returns a tool call's arguments as JSON text: a JSON string
// is unquoted, any other value is its own text, absent is "".
func argumentsText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		return s, nil
	}
	return string(raw), nil
}

func blocks(in []storedBlock) ([]provider.Block, error) {
	out := make([]provider.Block, 0, len(in))
	for _, b := range in {
		pb, err := b.block()
		if err != nil {
			return nil, err
		}
		out = append(out, pb)
	}
	return out, nil
}

// Conversation derives the messages sent to a model from log events, in
// the order of the log's surface (docs/FORMAT.md §1.7), the harness's fold:
// a replacement (a compaction's summary, a pruned tool result) stands where
// the events it replaced stood, and they are left out. A user/message is a
// user message; an assistant/message with content (an interrupted anchor
// included) is an assistant message, its tool-call blocks kept; a
// tool/result is a user message holding its tool-result block.
// system/message events are left out (the system prompt is the worker's)
// and other events carry no message. A message event whose payload cannot
// be read, or a log whose surface does not fold, is an error naming its
// seq.
func Conversation(events []session.Event) ([]provider.Message, error) {
	order, err := surfaceOrder(events)
	if err != nil {
		return nil, err
	}
	var out []provider.Message
	for _, i := range order {
		e := events[i]
		if !isMessageEvent(e.Type) {
			continue
		}
		msg, ok, err := messageOf(e)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, msg)
		}
	}
	return out, nil
}

// surfaceOrder returns the indexes of events, a log from seq 0, in the
// order of its surface (session.Surface). A message event without a
// surfaceOp, which a v3 log may hold from another writer, is appended, as
// the conversation always took it. A log without a replacement, and a
// window that does not start at seq 0, are taken in log order.
func surfaceOrder(events []session.Event) ([]int, error) {
	out := make([]int, 0, len(events))
	replaced := false
	for _, e := range events {
		if e.SurfaceOp != nil && e.SurfaceOp.Op == session.SurfaceReplace {
			replaced = true
			break
		}
	}
	if !replaced || events[0].Seq != 0 {
		// Without a replacement the surface is the message events in log
		// order (the store checked a v0 log's fold when it read it).
		for i := range events {
			out = append(out, i)
		}
		return out, nil
	}
	var s session.Surface
	for _, e := range events {
		if e.SurfaceOp == nil && isMessageEvent(e.Type) {
			e.SurfaceOp = session.AppendOp()
		}
		if err := s.Next(e); err != nil {
			return nil, fmt.Errorf("conversation: %w", err)
		}
	}
	for _, seq := range s.Nodes() {
		out = append(out, int(seq))
	}
	return out, nil
}

// isMessageEvent reports whether events of typ carry a message.
func isMessageEvent(typ string) bool {
	switch typ {
	case wire.TypeUserMessage, wire.TypeToolResult, wire.TypeAssistantMessage:
		return true
	}
	return false
}

// messageOf is the message of message event e; ok is false for one without
// content.
func messageOf(e session.Event) (msg provider.Message, ok bool, err error) {
	role := provider.RoleUser
	if e.Type == wire.TypeAssistantMessage {
		role = provider.RoleAssistant
	}
	content, err := messageContent(e)
	if err != nil {
		return provider.Message{}, false, fmt.Errorf("conversation: %s (seq %d): %w", e.Type, e.Seq, err)
	}
	content = sendable(e.Type, content)
	if len(content) == 0 {
		if e.Type == wire.TypeToolResult {
			return provider.Message{}, false, fmt.Errorf("conversation: tool/result (seq %d) has no content", e.Seq)
		}
		return provider.Message{}, false, nil
	}
	return provider.Message{Role: role, Content: content}, true, nil
}

// sendable returns content with every block the agent cannot send in the
// message of an event of type typ replaced by a text block naming it, so a
// log that holds one (appended by another writer, or accepted before the
// input updates refused it, docs/API.md "InputRequest") still runs its
// turns: a user/message sends only text (a tool result belongs to a
// tool/result, never to user input); a tool/result sends tool-result blocks
// whose content is text; an assistant/message sends text, reasoning and
// tool-call blocks. content is not modified.
func sendable(typ string, content []provider.Block) []provider.Block {
	keep := func(b provider.Block) bool {
		switch typ {
		case wire.TypeUserMessage:
			return b.Type == provider.BlockText
		case wire.TypeToolResult:
			if b.Type != provider.BlockToolResult {
				return false
			}
			for _, c := range b.Content {
				if c.Type != provider.BlockText {
					return false
				}
			}
			return true
		}
		switch b.Type {
		case provider.BlockText, provider.BlockReasoning, provider.BlockToolCall:
			return true
		}
		return false
	}
	var out []provider.Block
	for i, b := range content {
		if keep(b) {
			if out != nil {
				out = append(out, b)
			}
			continue
		}
		if out == nil {
			out = append(make([]provider.Block, 0, len(content)), content[:i]...)
		}
		if typ == wire.TypeToolResult && b.Type == provider.BlockToolResult {
			r := b
			r.Content = make([]provider.Block, 0, len(b.Content))
			for _, c := range b.Content {
				if c.Type != provider.BlockText {
					c = omitted(c.Type)
				}
				r.Content = append(r.Content, c)
			}
			out = append(out, r)
			continue
		}
		out = append(out, omitted(b.Type))
	}
	if out == nil {
		return content
	}
	return out
}

// omitted is the text block that stands for a block of type typ the agent
// cannot send.
func omitted(typ string) provider.Block {
	return provider.Block{Type: provider.BlockText, Text: fmt.Sprintf("[a %q block was left out: this agent cannot send it to the model]", typ)}
}

// messageContent decodes the content blocks of a message event: a
// user/message holds them at "content", an assistant/message and a
// tool/result at "message.content".
func messageContent(e session.Event) ([]provider.Block, error) {
	if e.Type == wire.TypeUserMessage {
		var m struct {
			Content []storedBlock `json:"content"`
		}
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return nil, err
		}
		return blocks(m.Content)
	}
	var m struct {
		Message struct {
			Content []storedBlock `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(e.Data, &m); err != nil {
		return nil, err
	}
	return blocks(m.Message.Content)
}
