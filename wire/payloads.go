package wire

import "encoding/json"

// Turn-end reason kinds (FORMAT.md §1.2). TurnEndInterrupted is never emitted by a
// live loop; it only appears on a crash closer.
const (
	// TurnEndCompleted: the turn finished normally.
	TurnEndCompleted = "completed"
	// TurnEndAborted: the turn was aborted; Reason carries {kind:...}.
	TurnEndAborted = "aborted"
	// TurnEndBlocked: the turn was blocked.
	TurnEndBlocked = "blocked"
	// TurnEndError: the turn failed; Error carries the LlmFailure.
	TurnEndError = "error"
	// TurnEndMaxTokens: the model hit its token limit.
	TurnEndMaxTokens = "max-tokens"
	// TurnEndInterrupted: the turn was closed by crash repair.
	TurnEndInterrupted = "interrupted"
)

// Content-block and tool-result constants used by crash repair.
const (
	// BlockToolCall is the content-block type of a tool call requested by
	// the assistant.
	BlockToolCall = "tool-call"
	// BlockToolResult is the content-block type of a tool result.
	BlockToolResult = "tool-result"
	// BlockText is the content-block type of plain text.
	BlockText = "text"
	// RoleUser is the role of user and tool-result messages.
	RoleUser = "user"
	// RoleAssistant is the role of assistant messages.
	RoleAssistant = "assistant"
	// SourceKindTool is the message-source kind of a tool result.
	SourceKindTool = "tool"
)

// TurnStart is the data of a turn/start event.
type TurnStart struct {
	// Turn is the turn number, from 1.
	Turn int64 `json:"turn"`
}

// TurnEndReason says why a turn ended.
type TurnEndReason struct {
	// Kind is one of the TurnEnd* constants (other kinds are kept verbatim).
	Kind string `json:"kind"`
	// Reason is the abort reason of an aborted turn, e.g. {"kind":"user"}.
	Reason json.RawMessage `json:"reason,omitempty"`
	// Error is the LlmFailure of a turn that ended with an error.
	Error json.RawMessage `json:"error,omitempty"`
}

// TurnEnd is the data of a turn/end event.
type TurnEnd struct {
	// Turn is the number of the turn being closed.
	Turn int64 `json:"turn"`
	// Reason says why it ended.
	Reason TurnEndReason `json:"reason"`
}

// StepStart is the data of a step/start event.
type StepStart struct {
	// Turn is the enclosing turn.
	Turn int64 `json:"turn"`
	// Step is the step number inside the turn, from 1.
	Step int64 `json:"step"`
}

// StepEnd is the data of a step/end event.
type StepEnd struct {
	// Turn is the enclosing turn.
	Turn int64 `json:"turn"`
	// Step is the step being closed.
	Step int64 `json:"step"`
}

// ToolCall is the data of a tool/call event: the harness durably recorded a
// tool call as started.
type ToolCall struct {
	// Turn is the enclosing turn.
	Turn int64 `json:"turn"`
	// Step is the enclosing step.
	Step int64 `json:"step"`
	// CallID matches the id of the assistant's tool-call block.
	CallID string `json:"callId"`
	// Name is the tool name.
	Name string `json:"name"`
	// Arguments is the raw JSON text the model produced.
	Arguments string `json:"arguments"`
}

// ContentBlock is one block of an assistant message's content. Only the
// fields crash repair and the lifecycle read are modelled; decoding ignores
// the others.
type ContentBlock struct {
	// Type is e.g. "text" or "tool-call" (BlockToolCall).
	Type string `json:"type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// ID is the call id of a tool-call block.
	ID string `json:"id,omitempty"`
	// Name is the tool name of a tool-call block.
	Name string `json:"name,omitempty"`
	// Arguments are the arguments of a tool-call block, verbatim.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// AssistantMessageBody is the AssistantMessage value carried by an
// assistant/message event.
type AssistantMessageBody struct {
	// ID is the message id, when present.
	ID string `json:"id,omitempty"`
	// Role is "assistant".
	Role string `json:"role"`
	// Content holds the message's blocks.
	Content []ContentBlock `json:"content"`
}

// AssistantMessage is the data of an assistant/message event. Decoding keeps
// only the modelled fields; it is meant for reading (tool-call blocks), not
// for rewriting a stored event.
type AssistantMessage struct {
	// Turn is the enclosing turn.
	Turn int64 `json:"turn"`
	// Step is the enclosing step.
	Step int64 `json:"step"`
	// Message is the assistant message.
	Message AssistantMessageBody `json:"message"`
	// Stream is the compact raw stream record, verbatim (writers set at
	// least "[]").
	Stream json.RawMessage `json:"stream,omitempty"`
	// Usage is the token usage, verbatim.
	Usage json.RawMessage `json:"usage,omitempty"`
	// Interrupted marks a message cut short.
	Interrupted bool `json:"interrupted,omitempty"`
}

// ToolCalls returns the tool-call blocks of the message, in order.
func (m AssistantMessage) ToolCalls() []ContentBlock {
	var calls []ContentBlock
	for _, b := range m.Message.Content {
		if b.Type == BlockToolCall {
			calls = append(calls, b)
		}
	}
	return calls
}

// ToolResultSource says where a tool-result message comes from.
type ToolResultSource struct {
	// Kind is "tool" (SourceKindTool).
	Kind string `json:"kind"`
	// CallID is the id of the answered tool call.
	CallID string `json:"callId"`
}

// TextContent is a text part of a tool result.
type TextContent struct {
	// Type is "text" (BlockText).
	Type string `json:"type"`
	// Text is the text.
	Text string `json:"text"`
}

// ToolResultContent is the tool-result block of a tool-result message.
type ToolResultContent struct {
	// Type is "tool-result" (BlockToolResult).
	Type string `json:"type"`
	// ToolCallID is the id of the answered tool call.
	ToolCallID string `json:"toolCallId"`
	// IsError is true when the tool failed.
	IsError bool `json:"isError"`
	// Content is the result's text parts.
	Content []TextContent `json:"content"`
}

// ToolResultMessage is the ToolResultMessage value of a tool/result event.
type ToolResultMessage struct {
	// ID is the message id.
	ID string `json:"id"`
	// Role is "user" (RoleUser).
	Role string `json:"role"`
	// Source names the answered call.
	Source ToolResultSource `json:"source"`
	// Content holds the tool-result block.
	Content []ToolResultContent `json:"content"`
}

// ToolError describes a failed tool call (present only when isError).
type ToolError struct {
	// Name is the error class name, e.g. "ToolOutcomeUnknownError".
	Name string `json:"name"`
	// Code is the machine code, e.g. ToolOutcomeUnknown.
	Code string `json:"code"`
	// Reason is an optional detail, verbatim.
	Reason json.RawMessage `json:"reason,omitempty"`
}

// ToolResult is the data of a tool/result event.
type ToolResult struct {
	// Turn is the enclosing turn.
	Turn int64 `json:"turn"`
	// Step is the enclosing step.
	Step int64 `json:"step"`
	// Message is the tool-result message.
	Message ToolResultMessage `json:"message"`
	// Error is set only when the result is an error.
	Error *ToolError `json:"error,omitempty"`
	// Meta is optional JSON metadata, verbatim.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// EndSeed is the data of a session/end-seed marker (FORMAT.md §5.4).
type EndSeed struct {
	// Inherited is true on the marker that closes a fork-inherited prefix.
	Inherited bool `json:"inherited,omitempty"`
}
