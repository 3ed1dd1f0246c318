package anthropic

import (
	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/sessionflow/sessionflow/provider"
)

// blockKind is the kind of a content block of the response.
type blockKind int

const (
	blockIgnored blockKind = iota // a block type with no chunk (redacted_thinking, server tools)
	blockText
	blockThinking
	blockToolUse
)

// blockState is one content block of the response, by the API's index.
type blockState struct {
	kind      blockKind
	call      int    // tool_use: the tool call's index in model order
	signature []byte // thinking: the signature pieces so far
	stopped   bool
}

// streamState maps the events of one response to chunks.
type streamState struct {
	blocks    map[int64]*blockState
	calls     int
	started   bool
	input     int64 // input tokens, cache reads and writes included
	cacheRead int64
	output    int64
	reasoning int64
	stop      sdk.StopReason
}

// finishReason maps a stop_reason: end_turn, stop_sequence, pause_turn,
// refusal and any reason this package does not know end with "stop";
// tool_use with "tool-calls"; max_tokens and model_context_window_exceeded
// with "max-tokens".
func finishReason(r sdk.StopReason) provider.FinishReason {
	switch r {
	case sdk.StopReasonToolUse:
		return provider.FinishToolCalls
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return provider.FinishMaxTokens
	}
	return provider.FinishStop
}

// event maps one event, emitting its chunks. done is true after
// message_stop, or when emit returned false (the consumer stopped).
func (s *streamState) event(ev sdk.MessageStreamEventUnion, emit func(provider.Chunk) bool) (done bool, err error) {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		s.started = true
		s.input = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		s.cacheRead = u.CacheReadInputTokens
		s.output = u.OutputTokens
	case "content_block_start":
		if s.blocks == nil {
			s.blocks = make(map[int64]*blockState)
		}
		if _, dup := s.blocks[ev.Index]; dup {
			return true, malformedEvent("content block %d started twice", ev.Index)
		}
		b := &blockState{}
		s.blocks[ev.Index] = b
		cb := ev.ContentBlock
		switch cb.Type {
		case "text":
			b.kind = blockText
			if cb.Text != "" {
				return !emit(provider.Chunk{Type: provider.ChunkText, Delta: cb.Text}), nil
			}
		case "thinking":
			b.kind = blockThinking
			b.signature = append(b.signature, cb.Signature...)
			if cb.Thinking != "" {
				return !emit(provider.Chunk{Type: provider.ChunkReasoning, Delta: cb.Thinking}), nil
			}
		case "tool_use":
			if cb.ID == "" || cb.Name == "" {
				return true, malformedEvent("tool_use block %d without an id or a name", ev.Index)
			}
			b.kind, b.call = blockToolUse, s.calls
			s.calls++
			return !emit(provider.Chunk{Type: provider.ChunkToolCall, Index: b.call, ID: cb.ID, Name: cb.Name}), nil
		}
	case "content_block_delta":
		b, ok := s.blocks[ev.Index]
		if !ok || b.stopped {
			return true, malformedEvent("a delta for content block %d, which is not open", ev.Index)
		}
		d := ev.Delta
		var c provider.Chunk
		switch {
		case d.Type == "text_delta" && b.kind == blockText:
			c = provider.Chunk{Type: provider.ChunkText, Delta: d.Text}
		case d.Type == "thinking_delta" && b.kind == blockThinking:
			c = provider.Chunk{Type: provider.ChunkReasoning, Delta: d.Thinking}
		case d.Type == "signature_delta" && b.kind == blockThinking:
			b.signature = append(b.signature, d.Signature...)
		case d.Type == "input_json_delta" && b.kind == blockToolUse:
			c = provider.Chunk{Type: provider.ChunkToolCall, Index: b.call, Delta: d.PartialJSON}
		case d.Type == "text_delta" || d.Type == "thinking_delta" || d.Type == "signature_delta" || d.Type == "input_json_delta":
			if b.kind != blockIgnored {
				return true, malformedEvent("a %s for content block %d, which is of another type", d.Type, ev.Index)
			}
		}
		// Other delta types (citations) and deltas of ignored blocks have
		// no chunk.
		if c.Delta != "" {
			return !emit(c), nil
		}
	case "content_block_stop":
		b, ok := s.blocks[ev.Index]
		if !ok || b.stopped {
			return true, malformedEvent("content block %d stopped but not open", ev.Index)
		}
		b.stopped = true
		if b.kind == blockThinking && len(b.signature) > 0 {
			return !emit(provider.Chunk{Type: provider.ChunkReasoning, Signature: string(b.signature)}), nil
		}
	case "message_delta":
		s.stop = ev.Delta.StopReason
		u := ev.Usage
		s.output = u.OutputTokens
		s.reasoning = u.OutputTokensDetails.ThinkingTokens
		if in := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens; in > 0 {
			// Counts in message_delta are cumulative.
			s.input, s.cacheRead = in, u.CacheReadInputTokens
		}
	case "message_stop":
		if s.started {
			u := &provider.Usage{InputTokens: s.input, OutputTokens: s.output, ReasoningTokens: s.reasoning, CacheReadTokens: s.cacheRead}
			if !emit(provider.Chunk{Type: provider.ChunkUsage, Usage: u}) {
				return true, nil
			}
		}
		emit(provider.Chunk{Type: provider.ChunkFinish, Finish: finishReason(s.stop)})
		return true, nil
	}
	// ping is consumed by the SDK; unknown event types are skipped, as the
	// API's versioning policy asks.
	return false, nil
}
