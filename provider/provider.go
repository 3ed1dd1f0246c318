// Package provider defines how sessionflow talks to a model: a streaming
// Provider interface, the messages and tools a request carries, the chunks a
// response streams, and the Assembler that folds a stream into the content
// of an assistant/message event and the record of the stream stored as the
// assistant/chunk events it cites, in the published harness's chunk
// vocabulary (FORMAT.md §1.2).
//
// A provider knows nothing of Temporal or of the store: the agent's model
// activity derives the request from the session log, calls Stream, and stores
// what the Assembler produced.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 3. It
// may import wire, internal/lib/... and session; not its neighbours jsonl and
// tool, nor anything above. The vendors (anthropic, openai, scripted) are on
// the same row and import provider.
package provider

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"
)

// Block types of message content, in the session format's shapes.
const (
	BlockText       = "text"
	BlockReasoning  = "reasoning"
	BlockToolCall   = "tool-call"
	BlockToolResult = "tool-result"
)

// Roles of messages sent to a model.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Block is one content block of a message, in the shapes of FORMAT.md §1.2.
type Block struct {
	// Type is one of the Block* constants.
	Type string `json:"type"`
	// Text is the text of a text or reasoning block.
	Text string `json:"text,omitempty"`
	// Signature is the opaque signature a provider attached to a reasoning
	// block (Anthropic's thinking signature). A provider that requires its
	// reasoning sent back on later calls verifies it; it is passed back
	// verbatim and never shown.
	Signature string `json:"signature,omitempty"`
	// ID is the call id of a tool-call block.
	ID string `json:"id,omitempty"`
	// Name is the tool name of a tool-call block.
	Name string `json:"name,omitempty"`
	// Arguments is the raw JSON text of a tool-call block's arguments, as
	// the model produced it.
	Arguments string `json:"arguments,omitempty"`
	// ToolCallID is the call a tool-result block answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	// IsError marks a tool-result block that reports a failure.
	IsError bool `json:"isError,omitempty"`
	// Content is the content of a tool-result block (text blocks).
	Content []Block `json:"content,omitempty"`
}

// Message is one message of the conversation sent to a model.
type Message struct {
	// Role is RoleUser or RoleAssistant (tool results are user messages).
	Role string `json:"role"`
	// Content is the message's blocks in order.
	Content []Block `json:"content"`
}

// Tool is a tool offered to the model.
type Tool struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Description tells the model what the tool does.
	Description string `json:"description,omitempty"`
	// Schema is the JSON Schema of the tool's arguments object.
	Schema []byte `json:"schema,omitempty"`
}

// Request is one model call.
type Request struct {
	// Provider and Model name the route.
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// System is the system prompt; empty for none.
	System string `json:"system,omitempty"`
	// ReasoningEffort is passed to providers that support it.
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
	// MaxTokens caps the output tokens; 0 leaves the provider's default.
	MaxTokens int64 `json:"maxTokens,omitempty"`
	// SessionID is the session the call is made for.
	SessionID string `json:"sessionId,omitempty"`
	// Messages is the conversation, oldest first.
	Messages []Message `json:"messages"`
	// Tools are the tools the model may call.
	Tools []Tool `json:"tools,omitempty"`
	// Purpose is "" for a step of a turn, PurposeCompaction for the call
	// that summarises a compaction's span.
	Purpose string `json:"purpose,omitempty"`
}

// ChunkType names the kind of a streamed chunk.
type ChunkType string

// Chunk types.
const (
	ChunkText      ChunkType = "text"
	ChunkReasoning ChunkType = "reasoning"
	ChunkToolCall  ChunkType = "tool-call"
	ChunkUsage     ChunkType = "usage"
	ChunkFinish    ChunkType = "finish"
)

// FinishReason says why a model call ended.
type FinishReason string

// Finish reasons.
const (
	FinishStop      FinishReason = "stop"
	FinishToolCalls FinishReason = "tool-calls"
	FinishMaxTokens FinishReason = "max-tokens"
)

// Chunk is one streamed piece of a response.
type Chunk struct {
	// Type is the kind of chunk.
	Type ChunkType `json:"type"`
	// Index is the 0-based position of a tool call in model order.
	Index int `json:"index,omitempty"`
	// ID and Name are set on a tool call's first chunk.
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// Delta is the text or reasoning delta, or a piece of a tool call's
	// arguments.
	Delta string `json:"delta,omitempty"`
	// Signature, on a reasoning chunk, is the signature of the reasoning
	// block it ends: the block becomes Block.Signature and the next
	// reasoning delta starts a new block.
	Signature string `json:"signature,omitempty"`
	// Usage is set on a usage chunk.
	Usage *Usage `json:"usage,omitempty"`
	// Finish is set on the finish chunk.
	Finish FinishReason `json:"finish,omitempty"`
}

// Usage counts the tokens of one model call.
type Usage struct {
	InputTokens     int64 `json:"inputTokens"`
	OutputTokens    int64 `json:"outputTokens"`
	ReasoningTokens int64 `json:"reasoningTokens,omitempty"`
	CacheReadTokens int64 `json:"cacheReadTokens,omitempty"`
}

// Provider performs model calls.
type Provider interface {
	// Stream performs one model call. The sequence yields chunks and ends
	// after a finish chunk, or yields one non-nil error and ends. Stopping
	// the iteration early abandons the call.
	Stream(ctx context.Context, req Request) iter.Seq2[Chunk, error]
}

// ErrUnknownProvider is returned by Set.Get for a name no provider has.
var ErrUnknownProvider = errors.New("unknown model provider")

// Set maps provider names to providers: the providers a worker offers.
type Set map[string]Provider

// Get returns the provider called name.
func (s Set) Get(name string) (Provider, error) {
	if p, ok := s[name]; ok && p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownProvider, name)
}

// Error is a failed model call. A retryable error (rate limit, server
// error, a stream cut mid-way) is retried, after RetryAfter when the service
// gave one; any other (a request the service refuses) ends the turn with an
// error.
type Error struct {
	// Retryable reports whether the call may succeed if made again.
	Retryable bool `json:"retryable"`
	// Status is the HTTP status, when there is one.
	Status int `json:"status,omitempty"`
	// Code is the provider's error code, when there is one.
	Code string `json:"code,omitempty"`
	// Message is the provider's message.
	Message string `json:"message"`
	// RetryAfter is the delay the service asked for; 0 for none.
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	switch {
	case e.Status != 0 && e.Code != "":
		return fmt.Sprintf("model call failed (status %d, %s): %s", e.Status, e.Code, e.Message)
	case e.Status != 0:
		return fmt.Sprintf("model call failed (status %d): %s", e.Status, e.Message)
	case e.Code != "":
		return fmt.Sprintf("model call failed (%s): %s", e.Code, e.Message)
	}
	return "model call failed: " + e.Message
}
