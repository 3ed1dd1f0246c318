package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ErrMalformedStream is matched (errors.Is) by every refusal of
// Assembler.Push and ReplayStream: a chunk that cannot follow the chunks
// before it, or a stream record that does not decode.
var ErrMalformedStream = errors.New("malformed model stream")

// MaxSafeInteger is the largest integer a JSON reader that uses float64
// numbers (JavaScript's Number) represents exactly: 2^53-1. Times and token
// counts in a stream record stay within it.
const MaxSafeInteger = 1<<53 - 1

// Stream record types stored in assistant/message.stream (FORMAT.md §1.2).
const (
	// RecordChunk is one chunk: {"type":"chunk","time":T,"chunk":{...}}.
	RecordChunk = "chunk"
	// RecordTextChunks is a packed run of consecutive text deltas of one
	// text block: {"type":"text-chunks","time0":T0,"index":I,"dt":[...],"texts":[...]}.
	RecordTextChunks = "text-chunks"
	// RecordReasoningChunks is a packed run of consecutive reasoning deltas
	// of one reasoning block, shaped as RecordTextChunks.
	RecordReasoningChunks = "reasoning-chunks"
)

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
}

// asmCall is one tool call under assembly.
type asmCall struct {
	id, name string
	block    int // position in Assembler.blocks
	args     []byte
}

// asmRun is the open packed run of consecutive text or reasoning deltas.
type asmRun struct {
	kind   ChunkType // "" when no run is open
	block  int
	time0  int64
	last   int64
	dt     []int64
	bounds []int // end offset in the kind's buffer of each member
	start  int   // start offset of the first member
}

// Assembler folds a chunk stream into the content of an assistant message
// and the compact stream record stored beside it. Push refuses a malformed
// stream, so what it has accepted always assembles. The zero value is not
// usable; call NewAssembler. An Assembler is not safe for concurrent use.
//
// Content blocks come in model order: a block starts where its first chunk
// arrived; consecutive text (or reasoning) deltas join one block, and a chunk
// of another kind in between (a reasoning or tool-call chunk) closes it.
// Usage chunks do not close a block. An empty text or reasoning delta that
// does not continue an open block of its kind closes the open block and
// starts none (it is kept in the stream record). A reasoning chunk with a
// signature ends the open reasoning block (or is a block of its own, possibly
// with empty text): the block gets the signature, and the next reasoning
// delta starts a new block, so separately signed blocks never merge.
type Assembler struct {
	text, reasoning []byte
	blocks          []asmBlock
	calls           []asmCall
	open            int // position of the open text/reasoning block, -1 for none
	usage           *Usage
	finish          FinishReason
	chunks          int
	records         []asmRecord // closed stream records
	run             asmRun
	// textLimit is the most text the stream record repeats (-1: no
	// limit); textBytes is the text of the chunks pushed; elided is set
	// once textBytes passed textLimit (LimitStreamText).
	textLimit, textBytes int
	elided               bool
}

// asmRecord is one closed stream record; text tells whether it repeats
// text of the content (any record but a usage or finish chunk).
type asmRecord struct {
	raw  []byte
	text bool
}

// NewAssembler returns an empty Assembler.
func NewAssembler() *Assembler {
	return &Assembler{open: -1, textLimit: -1}
}

// LimitStreamText bounds the text the stream record repeats beside the
// content (FORMAT.md §1.2 "The stream record", DECISIONS.md D72). While the
// chunks pushed carry at most maxBytes of text (the bytes of their deltas,
// signatures, tool-call ids and names), Stream is the whole compact stream,
// as without a limit. Once they carry more, the stream is elided: Stream
// holds only the records of the usage and finish chunks, with their times,
// and the Assembler stops keeping the others, so the text is held and
// stored once, in Content. An elided stream is still one ReplayStream
// accepts. A negative maxBytes removes the limit (the default) unless the
// stream was already elided. Content, Usage, Finish and the shown text do
// not depend on the limit.
func (a *Assembler) LimitStreamText(maxBytes int) {
	a.textLimit = max(maxBytes, -1)
	a.checkTextLimit()
}

// StreamElided reports whether the stream record was elided
// (LimitStreamText).
func (a *Assembler) StreamElided() bool { return a.elided }

// checkTextLimit elides the stream once its text passed the limit: the
// records that repeat text and the open run are dropped.
func (a *Assembler) checkTextLimit() {
	if a.elided || a.textLimit < 0 || a.textBytes <= a.textLimit {
		return
	}
	a.elided = true
	a.run.kind = ""
	kept := a.records[:0]
	for _, r := range a.records {
		if !r.text {
			kept = append(kept, r)
		}
	}
	clear(a.records[len(kept):])
	a.records = kept
}

// keep adds a closed record unless the stream is elided and it repeats
// text.
func (a *Assembler) keep(raw []byte, text bool) {
	if a.elided && text {
		return
	}
	a.records = append(a.records, asmRecord{raw: raw, text: text})
}

// keepChunk adds the chunk record of c, which arrived at timeMs.
func (a *Assembler) keepChunk(c Chunk, timeMs int64) {
	text := c.Type != ChunkUsage && c.Type != ChunkFinish
	if a.elided && text {
		return
	}
	a.keep(appendChunkRecord(nil, c, timeMs), text)
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
	a.textBytes += len(c.Delta) + len(c.Signature) + len(c.ID) + len(c.Name)
	a.checkTextLimit()
	switch c.Type {
	case ChunkText, ChunkReasoning:
		buf := &a.text
		if c.Type == ChunkReasoning {
			buf = &a.reasoning
		}
		if c.Signature != "" {
			// A signed reasoning chunk ends its block: it continues the open
			// reasoning block, or is a block of its own, and closes it.
			if a.open < 0 || a.blocks[a.open].kind != ChunkReasoning {
				a.blocks = append(a.blocks, asmBlock{kind: ChunkReasoning, start: len(*buf), end: len(*buf)})
				a.open = len(a.blocks) - 1
			}
			*buf = append(*buf, c.Delta...)
			a.blocks[a.open].end = len(*buf)
			a.blocks[a.open].signature = c.Signature
			a.open = -1
			break
		}
		if a.open >= 0 && a.blocks[a.open].kind == c.Type {
			start := len(*buf)
			*buf = append(*buf, c.Delta...)
			a.blocks[a.open].end = len(*buf)
			a.packDelta(c.Type, timeMs, start, len(*buf))
			return nil
		}
		if c.Delta == "" {
			// Nothing to show and no block to continue: a content no-op.
			a.closeRun()
			a.open = -1
			a.keepChunk(c, timeMs)
			return nil
		}
		start := len(*buf)
		*buf = append(*buf, c.Delta...)
		a.blocks = append(a.blocks, asmBlock{kind: c.Type, start: start, end: len(*buf)})
		a.open = len(a.blocks) - 1
		a.closeRun()
		a.startRun(c.Type, timeMs, start, len(*buf))
		return nil
	case ChunkToolCall:
		a.open = -1
		if c.Index == len(a.calls) {
			a.blocks = append(a.blocks, asmBlock{kind: ChunkToolCall, call: c.Index})
			a.calls = append(a.calls, asmCall{id: c.ID, name: c.Name, block: len(a.blocks) - 1})
		}
		call := &a.calls[c.Index]
		call.args = append(call.args, c.Delta...)
	case ChunkUsage:
		u := *c.Usage
		a.usage = &u
	case ChunkFinish:
		a.open = -1
		a.finish = c.Finish
	}
	a.closeRun()
	a.keepChunk(c, timeMs)
	return nil
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

// packDelta adds to the open run a delta that continued the open block,
// occupying [start, end) of the kind's buffer.
func (a *Assembler) packDelta(kind ChunkType, timeMs int64, start, end int) {
	if a.elided {
		return
	}
	r := &a.run
	if r.kind != kind || r.block != a.open {
		// The block continues after a usage chunk: a new run of the same block.
		a.closeRun()
		a.startRun(kind, timeMs, start, end)
		return
	}
	r.dt = append(r.dt, timeMs-r.last)
	r.last = timeMs
	r.bounds = append(r.bounds, end)
}

// startRun opens a run of the open block whose first member occupies
// [start, end) of the kind's buffer.
func (a *Assembler) startRun(kind ChunkType, timeMs int64, start, end int) {
	if a.elided {
		return
	}
	r := &a.run
	r.kind, r.block, r.time0, r.last, r.start = kind, a.open, timeMs, timeMs, start
	r.dt = r.dt[:0]
	r.bounds = append(r.bounds[:0], end)
}

// buffer returns the buffer of the text or reasoning blocks.
func (a *Assembler) buffer(kind ChunkType) []byte {
	if kind == ChunkReasoning {
		return a.reasoning
	}
	return a.text
}

// closeRun moves the open run, if any, to the closed records.
func (a *Assembler) closeRun() {
	if a.run.kind == "" {
		return
	}
	a.keep(a.appendRun(nil), true)
	a.run.kind = ""
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

// Stream returns the compact stream record of the chunks pushed so far, as
// stored in assistant/message.stream (FORMAT.md §1.2): each record is
// canonical lossless JSON (FORMAT.md §1.4). A run of two or more consecutive
// text deltas of one text block is packed as
// {"type":"text-chunks","time0":T0,"index":I,"dt":[...],"texts":[...]}, where
// I is the block's position in Content, texts are the deltas in order and
// dt[k] is the time of delta k+1 minus the time of delta k (len(texts)-1
// gaps, possibly negative if the clock stepped back); runs of reasoning
// deltas are packed the same way as "reasoning-chunks". Every other chunk is
// {"type":"chunk","time":T,"chunk":{...}} with the chunk's JSON fields.
// ReplayStream is the inverse, unless LimitStreamText elided the text.
// Stream may be called mid-stream (an
// interrupted call): the open run is included and stays open. The records
// share memory with the Assembler and must not be modified.
func (a *Assembler) Stream() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(a.records)+1)
	for _, r := range a.records {
		out = append(out, json.RawMessage(r.raw))
	}
	if a.run.kind != "" {
		out = append(out, a.appendRun(nil))
	}
	return out
}

// appendRun appends the record of the open run to dst.
func (a *Assembler) appendRun(dst []byte) []byte {
	r := &a.run
	buf := a.buffer(r.kind)
	if len(r.bounds) == 1 {
		return appendChunkRecord(dst, Chunk{Type: r.kind, Delta: string(buf[r.start:r.bounds[0]])}, r.time0)
	}
	typ := RecordTextChunks
	if r.kind == ChunkReasoning {
		typ = RecordReasoningChunks
	}
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","time0":`...)
	dst = strconv.AppendInt(dst, r.time0, 10)
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(r.block), 10)
	dst = append(dst, `,"dt":[`...)
	for i, d := range r.dt {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, d, 10)
	}
	dst = append(dst, `],"texts":[`...)
	start := r.start
	for i, end := range r.bounds {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, buf[start:end])
		start = end
	}
	return append(dst, "]}"...)
}

// appendChunkRecord appends {"type":"chunk","time":T,"chunk":{...}} to dst,
// the chunk's fields in the order and with the omissions of its JSON tags.
func appendChunkRecord(dst []byte, c Chunk, timeMs int64) []byte {
	dst = append(dst, `{"type":"chunk","time":`...)
	dst = strconv.AppendInt(dst, timeMs, 10)
	dst = append(dst, `,"chunk":{"type":`...)
	dst = appendJSONString(dst, []byte(c.Type))
	if c.Index != 0 {
		dst = append(dst, `,"index":`...)
		dst = strconv.AppendInt(dst, int64(c.Index), 10)
	}
	if c.ID != "" {
		dst = append(dst, `,"id":`...)
		dst = appendJSONString(dst, []byte(c.ID))
	}
	if c.Name != "" {
		dst = append(dst, `,"name":`...)
		dst = appendJSONString(dst, []byte(c.Name))
	}
	if c.Delta != "" {
		dst = append(dst, `,"delta":`...)
		dst = appendJSONString(dst, []byte(c.Delta))
	}
	if c.Signature != "" {
		dst = append(dst, `,"signature":`...)
		dst = appendJSONString(dst, []byte(c.Signature))
	}
	if u := c.Usage; u != nil {
		dst = append(dst, `,"usage":{"inputTokens":`...)
		dst = strconv.AppendInt(dst, u.InputTokens, 10)
		dst = append(dst, `,"outputTokens":`...)
		dst = strconv.AppendInt(dst, u.OutputTokens, 10)
		if u.ReasoningTokens != 0 {
			dst = append(dst, `,"reasoningTokens":`...)
			dst = strconv.AppendInt(dst, u.ReasoningTokens, 10)
		}
		if u.CacheReadTokens != 0 {
			dst = append(dst, `,"cacheReadTokens":`...)
			dst = strconv.AppendInt(dst, u.CacheReadTokens, 10)
		}
		dst = append(dst, '}')
	}
	if c.Finish != "" {
		dst = append(dst, `,"finish":`...)
		dst = appendJSONString(dst, []byte(c.Finish))
	}
	return append(dst, "}}"...)
}

// appendJSONString appends s (valid UTF-8) as a JSON string in the
// canonical form of FORMAT.md §1.4: '"' and '\' escaped, \b \f \n \r \t for
// those controls, \u00xx for the other controls, every other character as
// raw UTF-8.
func appendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
