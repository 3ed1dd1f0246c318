package provider

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrMalformedStream is matched (errors.Is) by every refusal of
// Assembler.Push and ReplayRecord: a chunk that cannot follow the chunks
// before it, or a recorded chunk that does not decode.
var ErrMalformedStream = errors.New("malformed model stream")

// MaxSafeInteger is the largest integer a JSON reader that uses float64
// numbers (JavaScript's Number) represents exactly: 2^53-1. Times and token
// counts in a record stay within it.
const MaxSafeInteger = 1<<53 - 1

// TimedChunk is a chunk with the time (Unix milliseconds) it arrived at.
type TimedChunk struct {
	// Chunk is the chunk as the provider streamed it.
	Chunk Chunk
	// Time is its arrival time in Unix milliseconds.
	Time int64
}

// asmBlock is one content block under assembly. Text and reasoning blocks
// are a range of the assembler's text or reasoning buffer; a tool-call block
// has its own arguments buffer.
type asmBlock struct {
	kind       ChunkType
	start, end int    // text/reasoning: byte range in the kind's buffer
	call       int    // tool-call: index into Assembler.calls
	signature  string // reasoning: the signature that ended the block
	ended      bool   // its block-end is recorded
}

// asmCall is one tool call under assembly.
type asmCall struct {
	id, name string
	block    int // position in Assembler.blocks
	args     []byte
}

// Assembler folds a chunk stream into the content of an assistant message
// and the record of the stream stored beside it (Record: the chunks in the
// published harness's vocabulary). Push refuses a malformed stream, so what
// it has accepted always assembles. The zero value is not usable; call
// NewAssembler. An Assembler is not safe for concurrent use.
//
// Content blocks come in model order: a block starts where its first chunk
// arrived; consecutive text (or reasoning) deltas join one block, and a chunk
// of another kind in between (a reasoning or tool-call chunk) closes it.
// Usage chunks do not close a block. An empty text or reasoning delta that
// does not continue an open block of its kind closes the open block and
// starts none. A reasoning chunk with a signature ends the open reasoning
// block (or is a block of its own, possibly with empty text): the block gets
// the signature, and the next reasoning delta starts a new block, so
// separately signed blocks never merge.
type Assembler struct {
	text, reasoning []byte
	blocks          []asmBlock
	calls           []asmCall
	open            int // position of the open text/reasoning block, -1 for none
	usage           *Usage
	usageTime       int64
	finish          FinishReason
	finishTime      int64
	chunks          int
	rec             []recEntry // the record but its usage and finish (record.go)
	// textLimit is the most text the record may hold (-1: no limit);
	// recBytes is the text the record holds; elided is set once recBytes
	// passed textLimit (LimitRecordText).
	textLimit, recBytes int
	elided              bool
}

// NewAssembler returns an empty Assembler.
func NewAssembler() *Assembler {
	return &Assembler{open: -1, textLimit: -1}
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedStream, fmt.Sprintf(format, args...))
}

// Push adds the chunk c that arrived at timeMs (Unix milliseconds, 0 to
// MaxSafeInteger). It refuses, with an error wrapping ErrMalformedStream and
// leaving the Assembler unchanged, a chunk that cannot follow the ones
// before it: any chunk after the finish chunk; an unknown chunk type; a
// delta that is not valid UTF-8; a text or reasoning chunk carrying fields of
// another kind, or a signature on a chunk that is not reasoning; a
// tool-call chunk for an index never started, or starting an
// index out of order, or without an id and name on its first chunk, or with
// an id or name that differs from its first chunk's, or reusing another
// call's id; a usage chunk without usage or with negative or unsafe counts;
// a finish chunk with an unknown reason.
func (a *Assembler) Push(c Chunk, timeMs int64) error {
	n := a.chunks
	if err := a.check(c, timeMs); err != nil {
		return fmt.Errorf("chunk %d (%q): %w", n, c.Type, err)
	}
	a.chunks++
	switch c.Type {
	case ChunkText, ChunkReasoning:
		if c.Signature != "" {
			// A signed reasoning chunk ends its block: it continues the open
			// reasoning block, or is a block of its own, and closes it.
			if a.open < 0 || a.blocks[a.open].kind != ChunkReasoning {
				a.closeOpen(timeMs)
				a.openBlock(ChunkReasoning, timeMs)
			}
			a.appendDelta(c.Delta, timeMs)
			a.blocks[a.open].signature = c.Signature
			a.closeOpen(timeMs)
			break
		}
		if a.open >= 0 && a.blocks[a.open].kind == c.Type {
			a.appendDelta(c.Delta, timeMs)
			break
		}
		// A delta of another kind closes the open block; an empty one
		// starts none (a content no-op).
		a.closeOpen(timeMs)
		if c.Delta != "" {
			a.openBlock(c.Type, timeMs)
			a.appendDelta(c.Delta, timeMs)
		}
	case ChunkToolCall:
		a.closeOpen(timeMs)
		if c.Index == len(a.calls) {
			a.blocks = append(a.blocks, asmBlock{kind: ChunkToolCall, call: c.Index})
			a.calls = append(a.calls, asmCall{id: c.ID, name: c.Name, block: len(a.blocks) - 1})
			a.record(recEntry{kind: recBlockStart, block: len(a.blocks) - 1, time: timeMs})
		}
		call := &a.calls[c.Index]
		start := len(call.args)
		call.args = append(call.args, c.Delta...)
		a.record(recEntry{kind: recToolDelta, block: call.block, start: start, end: len(call.args), time: timeMs})
	case ChunkUsage:
		u := *c.Usage
		a.usage, a.usageTime = &u, timeMs
	case ChunkFinish:
		// The stream's end ends every block still open.
		a.closeOpen(timeMs)
		for i := range a.blocks {
			a.endBlock(i, timeMs)
		}
		a.finish, a.finishTime = c.Finish, timeMs
	}
	return nil
}

// openBlock starts a text or reasoning block at the end of its buffer and
// makes it the open block.
func (a *Assembler) openBlock(kind ChunkType, timeMs int64) {
	n := len(a.buffer(kind))
	a.blocks = append(a.blocks, asmBlock{kind: kind, start: n, end: n})
	a.open = len(a.blocks) - 1
	a.record(recEntry{kind: recBlockStart, block: a.open, time: timeMs})
}

// appendDelta appends a delta to the open text or reasoning block.
func (a *Assembler) appendDelta(delta string, timeMs int64) {
	b := &a.blocks[a.open]
	buf := &a.text
	if b.kind == ChunkReasoning {
		buf = &a.reasoning
	}
	*buf = append(*buf, delta...)
	b.end = len(*buf)
	if delta != "" {
		a.record(recEntry{kind: recDelta, block: a.open, start: b.end - len(delta), end: b.end, time: timeMs})
	}
}

// closeOpen ends the open text or reasoning block, if any.
func (a *Assembler) closeOpen(timeMs int64) {
	if a.open >= 0 {
		a.endBlock(a.open, timeMs)
		a.open = -1
	}
}

// endBlock records the end of block i unless it ended already.
func (a *Assembler) endBlock(i int, timeMs int64) {
	if !a.blocks[i].ended {
		a.blocks[i].ended = true
		a.record(recEntry{kind: recBlockEnd, block: i, time: timeMs})
	}
}

// check validates c against the stream so far without changing anything.
func (a *Assembler) check(c Chunk, timeMs int64) error {
	if a.finish != "" {
		return malformed("a chunk after the finish chunk")
	}
	if timeMs < 0 || timeMs > MaxSafeInteger {
		return malformed("time %d is outside 0..%d", timeMs, int64(MaxSafeInteger))
	}
	if !utf8.ValidString(c.Delta) || !utf8.ValidString(c.ID) || !utf8.ValidString(c.Name) {
		return malformed("a delta, id or name that is not valid UTF-8")
	}
	if !utf8.ValidString(c.Signature) {
		return malformed("a signature that is not valid UTF-8")
	}
	switch c.Type {
	case ChunkText, ChunkReasoning:
		if c.Index != 0 || c.ID != "" || c.Name != "" || c.Usage != nil || c.Finish != "" {
			return malformed("a %s chunk may carry only a delta", c.Type)
		}
		if c.Signature != "" && c.Type != ChunkReasoning {
			return malformed("only a reasoning chunk may carry a signature")
		}
	case ChunkToolCall:
		if c.Usage != nil || c.Finish != "" || c.Signature != "" {
			return malformed("a tool-call chunk may carry only index, id, name and delta")
		}
		switch {
		case c.Index < 0:
			return malformed("tool-call index %d is negative", c.Index)
		case c.Index > len(a.calls) || (c.Index == len(a.calls) && c.ID == "" && c.Name == ""):
			return malformed("tool-call delta for index %d, which was never started (next index is %d)", c.Index, len(a.calls))
		case c.Index == len(a.calls):
			if c.ID == "" || c.Name == "" {
				return malformed("the first chunk of tool call %d must carry its id and name", c.Index)
			}
			for i := range a.calls {
				if a.calls[i].id == c.ID {
					return malformed("tool call %d reuses the id %q of tool call %d", c.Index, c.ID, i)
				}
			}
		default:
			call := &a.calls[c.Index]
			if c.ID != "" && c.ID != call.id {
				return malformed("tool call %d has id %q, not %q as on its first chunk", c.Index, c.ID, call.id)
			}
			if c.Name != "" && c.Name != call.name {
				return malformed("tool call %d has name %q, not %q as on its first chunk", c.Index, c.Name, call.name)
			}
		}
	case ChunkUsage:
		if c.Usage == nil {
			return malformed("a usage chunk without usage")
		}
		if c.Index != 0 || c.ID != "" || c.Name != "" || c.Delta != "" || c.Signature != "" || c.Finish != "" {
			return malformed("a usage chunk may carry only usage")
		}
		u := c.Usage
		for _, v := range [...]int64{u.InputTokens, u.OutputTokens, u.ReasoningTokens, u.CacheReadTokens} {
			if v < 0 || v > MaxSafeInteger {
				return malformed("token count %d is outside 0..%d", v, int64(MaxSafeInteger))
			}
		}
	case ChunkFinish:
		switch c.Finish {
		case FinishStop, FinishToolCalls, FinishMaxTokens:
		default:
			return malformed("unknown finish reason %q", c.Finish)
		}
		if c.Index != 0 || c.ID != "" || c.Name != "" || c.Delta != "" || c.Signature != "" || c.Usage != nil {
			return malformed("a finish chunk may carry only the finish reason")
		}
	default:
		return malformed("unknown chunk type %q", c.Type)
	}
	return nil
}

// buffer returns the buffer of the text or reasoning blocks.
func (a *Assembler) buffer(kind ChunkType) []byte {
	if kind == ChunkReasoning {
		return a.reasoning
	}
	return a.text
}

// Chunks returns the number of chunks pushed.
func (a *Assembler) Chunks() int { return a.chunks }

// Content returns the assembled content blocks in model order: text,
// reasoning and tool-call blocks where their first chunk arrived.
func (a *Assembler) Content() []Block {
	out := make([]Block, 0, len(a.blocks))
	for _, b := range a.blocks {
		out = append(out, a.block(b))
	}
	return out
}

// block builds the Block of b.
func (a *Assembler) block(b asmBlock) Block {
	switch b.kind {
	case ChunkText:
		return Block{Type: BlockText, Text: string(a.text[b.start:b.end])}
	case ChunkReasoning:
		return Block{Type: BlockReasoning, Text: string(a.reasoning[b.start:b.end]), Signature: b.signature}
	}
	c := &a.calls[b.call]
	return Block{Type: BlockToolCall, ID: c.id, Name: c.name, Arguments: string(c.args)}
}

// Interrupted returns the text and reasoning blocks in model order: what
// the user saw of a stream that was cut off. Tool calls are left out, since
// none of them may run.
func (a *Assembler) Interrupted() []Block {
	var out []Block
	for _, b := range a.blocks {
		if b.kind != ChunkToolCall {
			out = append(out, a.block(b))
		}
	}
	return out
}

// ToolCalls returns the tool-call blocks in model order (by index).
func (a *Assembler) ToolCalls() []Block {
	var out []Block
	for _, c := range a.calls {
		out = append(out, a.block(a.blocks[c.block]))
	}
	return out
}

// Usage returns a copy of the last usage chunk's usage, nil when none came.
func (a *Assembler) Usage() *Usage {
	if a.usage == nil {
		return nil
	}
	u := *a.usage
	return &u
}

// Finish returns the finish reason, "" while the stream has not finished.
func (a *Assembler) Finish() FinishReason { return a.finish }

// ShownText returns the text shown so far: every text delta, in order.
func (a *Assembler) ShownText() string { return string(a.text) }

// ShownLen returns the length in bytes of ShownText.
func (a *Assembler) ShownLen() int { return len(a.text) }

// ShownTail returns at most maxBytes of the end of the shown text, cut at a
// character boundary, and the byte offset in ShownText at which it starts.
func (a *Assembler) ShownTail(maxBytes int) (offset int, tail string) {
	off := max(len(a.text)-max(maxBytes, 0), 0)
	for off < len(a.text) && !utf8.RuneStart(a.text[off]) {
		off++
	}
	return off, string(a.text[off:])
}
