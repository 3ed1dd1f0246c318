package provider

import (
	"encoding/json"
	"strconv"
)

// Chunk types of the published harness's stream vocabulary
// (@deepseek-ai/dsh-llm StreamChunk), the data.chunk of an assistant/chunk
// event (docs/FORMAT.md §1.2).
const (
	RecordBlockStart     = "block-start"
	RecordTextDelta      = "text-delta"
	RecordReasoningDelta = "reasoning-delta"
	RecordToolCallDelta  = "tool-call-delta"
	RecordBlockEnd       = "block-end"
	RecordUsage          = "usage"
	RecordFinish         = "finish"
)

// RecordedChunk is one chunk of a model call as the published harness
// records it in an assistant/chunk event, with the time it arrived.
type RecordedChunk struct {
	// Time is the arrival time in Unix milliseconds.
	Time int64
	// Chunk is the chunk in canonical lossless JSON (FORMAT.md §1.4), one
	// of:
	//   {"type":"block-start","index":I,"blockType":"text"|"reasoning"|"tool-call"}
	//   {"type":"text-delta","index":I,"text":T}, and "reasoning-delta" alike
	//   {"type":"tool-call-delta","index":I,"id":ID,"name":N,"argumentsDelta":A}
	//   {"type":"block-end","index":I,"block":B}
	//   {"type":"usage","usage":U}
	//   {"type":"finish","reason":{"kind":"stop"|"tool-calls"|"max-tokens"}}
	// where I is the block's position in the content (Assembler.Content)
	// and B the block as assembled.
	Chunk json.RawMessage
}

// recKind is the kind of a recorded chunk held by the Assembler.
type recKind uint8

const (
	recBlockStart recKind = iota
	recDelta              // text or reasoning delta: [start, end) of the block's buffer
	recToolDelta          // tool-call delta: [start, end) of the call's arguments
	recBlockEnd
)

// recEntry is one recorded chunk but usage and finish, which the Assembler
// keeps once (Record adds them). Deltas are ranges of the content buffers,
// so the record holds no copy of the text until Record renders it.
type recEntry struct {
	kind       recKind
	block      int
	start, end int
	time       int64
}

// record adds e to the record, unless the record is elided, and counts the
// text it holds.
func (a *Assembler) record(e recEntry) {
	if a.elided {
		return
	}
	b := &a.blocks[e.block]
	switch e.kind {
	case recDelta:
		a.recBytes += e.end - e.start
	case recToolDelta:
		c := &a.calls[b.call]
		a.recBytes += e.end - e.start + len(c.id) + len(c.name)
	case recBlockEnd:
		if b.kind == ChunkToolCall {
			c := &a.calls[b.call]
			a.recBytes += len(c.id) + len(c.name) + len(c.args)
		} else {
			a.recBytes += b.end - b.start + len(b.signature)
		}
	}
	a.rec = append(a.rec, e)
	a.checkTextLimit()
}

// LimitRecordText bounds the text the record repeats beside the content
// (FORMAT.md §1.2 "The stream record"). While the record holds at most
// maxBytes of text (the deltas, the blocks of its block-end chunks, and
// the id and name each tool-call delta repeats), Record is the whole
// record, as without a limit. Once it would hold more, the record is
// elided: Record holds only the usage and finish chunks, with their times,
// and the Assembler stops keeping the others, so the text is held and
// stored once, in Content. A negative maxBytes removes the limit (the
// default) unless the record was already elided. Content, Usage, Finish and
// the shown text do not depend on the limit.
func (a *Assembler) LimitRecordText(maxBytes int) {
	a.textLimit = max(maxBytes, -1)
	a.checkTextLimit()
}

// RecordElided reports whether the record was elided (LimitRecordText).
func (a *Assembler) RecordElided() bool { return a.elided }

// checkTextLimit elides the record once its text passed the limit.
func (a *Assembler) checkTextLimit() {
	if a.elided || a.textLimit < 0 || a.recBytes <= a.textLimit {
		return
	}
	a.elided = true
	a.rec = nil
}

// Record returns the chunks pushed so far as the published harness records
// them (RecordedChunk), in order: a block-start before a block's first
// delta, its deltas (a delta that adds nothing is not recorded), a
// block-end where the block closed (a text or reasoning block when a chunk
// of another block or the finish arrived, or with its signature; a
// tool-call block at the finish), then the usage chunk (the last one
// pushed, at its time) and the finish chunk. Usage comes after the
// block-ends and just before the finish, where the harness's adapters send
// it; the providers of this module send it there too. Each chunk carries the
// time of the pushed chunk it comes from; the block-ends at the finish carry
// the finish's. Record may be called mid-stream (an interrupted call): the
// open blocks have no block-end then. ReplayRecord is the inverse, unless
// LimitRecordText elided the record.
func (a *Assembler) Record() []RecordedChunk {
	n := len(a.rec) + 2
	ends := make([]int, 0, n)
	buf := make([]byte, 0, 64*n)
	times := make([]int64, 0, n)
	for _, e := range a.rec {
		buf = a.appendEntry(buf, e)
		ends, times = append(ends, len(buf)), append(times, e.time)
	}
	if a.usage != nil {
		buf = append(buf, `{"type":"usage","usage":`...)
		buf = append(appendUsage(buf, a.usage), '}')
		ends, times = append(ends, len(buf)), append(times, a.usageTime)
	}
	if a.finish != "" {
		buf = append(buf, `{"type":"finish","reason":{"kind":`...)
		buf = append(appendJSONString(buf, []byte(a.finish)), "}}"...)
		ends, times = append(ends, len(buf)), append(times, a.finishTime)
	}
	out := make([]RecordedChunk, len(ends))
	start := 0
	for i, end := range ends {
		out[i] = RecordedChunk{Time: times[i], Chunk: json.RawMessage(buf[start:end:end])}
		start = end
	}
	return out
}

// appendEntry appends the JSON of e to dst.
func (a *Assembler) appendEntry(dst []byte, e recEntry) []byte {
	b := &a.blocks[e.block]
	switch e.kind {
	case recBlockStart:
		dst = append(dst, `{"type":"block-start","index":`...)
		dst = strconv.AppendInt(dst, int64(e.block), 10)
		dst = append(dst, `,"blockType":`...)
		dst = appendJSONString(dst, []byte(blockType(b.kind)))
	case recDelta:
		typ := RecordTextDelta
		if b.kind == ChunkReasoning {
			typ = RecordReasoningDelta
		}
		dst = append(dst, `{"type":"`+typ+`","index":`...)
		dst = strconv.AppendInt(dst, int64(e.block), 10)
		dst = append(dst, `,"text":`...)
		dst = appendJSONString(dst, a.buffer(b.kind)[e.start:e.end])
	case recToolDelta:
		c := &a.calls[b.call]
		dst = append(dst, `{"type":"tool-call-delta","index":`...)
		dst = strconv.AppendInt(dst, int64(e.block), 10)
		dst = append(dst, `,"id":`...)
		dst = appendJSONString(dst, []byte(c.id))
		dst = append(dst, `,"name":`...)
		dst = appendJSONString(dst, []byte(c.name))
		dst = append(dst, `,"argumentsDelta":`...)
		dst = appendJSONString(dst, c.args[e.start:e.end])
	case recBlockEnd:
		dst = append(dst, `{"type":"block-end","index":`...)
		dst = strconv.AppendInt(dst, int64(e.block), 10)
		dst = append(dst, `,"block":`...)
		dst = appendBlock(dst, a.block(*b))
	}
	return append(dst, '}')
}

// blockType is the harness's block type of a chunk type's blocks.
func blockType(kind ChunkType) string {
	switch kind {
	case ChunkReasoning:
		return BlockReasoning
	case ChunkToolCall:
		return BlockToolCall
	}
	return BlockText
}

// appendBlock appends an assembled block as the harness's content block:
// {"type":"text","text":T}, {"type":"reasoning","text":T[,"signature":S]},
// {"type":"tool-call","id":ID,"name":N,"arguments":A}.
func appendBlock(dst []byte, b Block) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendJSONString(dst, []byte(b.Type))
	if b.Type == BlockToolCall {
		dst = append(dst, `,"id":`...)
		dst = appendJSONString(dst, []byte(b.ID))
		dst = append(dst, `,"name":`...)
		dst = appendJSONString(dst, []byte(b.Name))
		dst = append(dst, `,"arguments":`...)
		dst = appendJSONString(dst, []byte(b.Arguments))
		return append(dst, '}')
	}
	dst = append(dst, `,"text":`...)
	dst = appendJSONString(dst, []byte(b.Text))
	if b.Signature != "" {
		dst = append(dst, `,"signature":`...)
		dst = appendJSONString(dst, []byte(b.Signature))
	}
	return append(dst, '}')
}

// appendUsage appends u as the harness's TokenUsage, in the order its
// adapters write it: inputTokens, outputTokens, then cacheReadTokens and
// reasoningTokens when not zero.
func appendUsage(dst []byte, u *Usage) []byte {
	dst = append(dst, `{"inputTokens":`...)
	dst = strconv.AppendInt(dst, u.InputTokens, 10)
	dst = append(dst, `,"outputTokens":`...)
	dst = strconv.AppendInt(dst, u.OutputTokens, 10)
	if u.CacheReadTokens != 0 {
		dst = append(dst, `,"cacheReadTokens":`...)
		dst = strconv.AppendInt(dst, u.CacheReadTokens, 10)
	}
	if u.ReasoningTokens != 0 {
		dst = append(dst, `,"reasoningTokens":`...)
		dst = strconv.AppendInt(dst, u.ReasoningTokens, 10)
	}
	return append(dst, '}')
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
