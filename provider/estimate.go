package provider

import (
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// The token estimate is the published harness's fixed-density heuristic
// (its token meter, docs/FORMAT.md §9 "Tokens"): a text counts one token per
// four UTF-16 code units, rounded up, and every block and message adds a
// fixed framing overhead. A compaction's shadowedTokenCount and the pressure
// of a request are priced by it, so both harnesses agree on the numbers a
// log records.
const (
	charsPerToken = 4
	blockOverhead = 4
	roleOverhead  = 4
)

// CodeContextWindowExceeded is the code of a model call refused because its
// request does not fit the model's context window: each vendor's own code
// for it is mapped to this one, the harness's (docs/API.md "Compaction").
const CodeContextWindowExceeded = "CONTEXT_WINDOW_EXCEEDED"

// PurposeCompaction is the Purpose of a model call that summarises a span
// of the conversation for a compaction.
const PurposeCompaction = "compaction"

// utf16Len is the length of s in UTF-16 code units, JavaScript's
// String.prototype.length.
func utf16Len(s string) int {
	n := 0
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		n += utf16.RuneLen(r) // an invalid byte decodes to U+FFFD: one unit
	}
	return n
}

// tokensOf is the heuristic token count of a text of s.
func tokensOf(s string) int {
	return (utf16Len(s) + charsPerToken - 1) / charsPerToken
}

// EstimateContent is the heuristic token count of content blocks: a text or
// reasoning block its text plus the block overhead, a tool call its name
// and its arguments (counted apart) plus the overhead, a tool result its
// content plus the overhead, and any other block its JSON text plus the
// overhead.
func EstimateContent(blocks []Block) int {
	n := 0
	for _, b := range blocks {
		switch b.Type {
		case BlockText, BlockReasoning:
			n += tokensOf(b.Text) + blockOverhead
		case BlockToolCall:
			n += tokensOf(b.Name) + tokensOf(b.Arguments) + blockOverhead
		case BlockToolResult:
			n += EstimateContent(b.Content) + blockOverhead
		default:
			raw, _ := json.Marshal(b)
			n += blockOverhead + tokensOf(string(raw))
		}
	}
	return n
}

// EstimateMessage is the heuristic token count of one message: its content
// plus the role overhead.
func EstimateMessage(m Message) int {
	return EstimateContent(m.Content) + roleOverhead
}

// EstimateEnvelope is the heuristic token count of what a request sends
// besides its messages: the system prompt (with the role overhead) and the
// tools' JSON text (with the block overhead), each 0 when absent.
func EstimateEnvelope(system string, tools []Tool) int {
	n := 0
	if system != "" {
		n += tokensOf(system) + roleOverhead
	}
	if len(tools) > 0 {
		raw, _ := json.Marshal(tools)
		n += tokensOf(string(raw)) + blockOverhead
	}
	return n
}

// EstimateRequest is the heuristic token count of a request's input: its
// envelope and every message.
func EstimateRequest(req Request) int {
	n := EstimateEnvelope(req.System, req.Tools)
	for _, m := range req.Messages {
		n += EstimateMessage(m)
	}
	return n
}
