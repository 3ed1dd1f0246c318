package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
)

// recordedChunk is the union of the recorded chunk shapes, decoded
// strictly.
type recordedChunk struct {
	Type           string          `json:"type"`
	Index          *int            `json:"index"`
	BlockType      *string         `json:"blockType"`
	Text           *string         `json:"text"`
	ID             *string         `json:"id"`
	Name           *string         `json:"name"`
	ArgumentsDelta *string         `json:"argumentsDelta"`
	Block          json.RawMessage `json:"block"`
	Usage          *Usage          `json:"usage"`
	Reason         *struct {
		Kind FinishReason `json:"kind"`
	} `json:"reason"`
}

// fields reports which fields of the union are present, in a fixed order.
func (r *recordedChunk) fields() [8]bool {
	return [8]bool{r.Index != nil, r.BlockType != nil, r.Text != nil, r.ID != nil, r.Name != nil,
		r.ArgumentsDelta != nil, r.Block != nil, r.Usage != nil || r.Reason != nil}
}

// recordShapes are the fields each recorded chunk type carries (the order
// of recordedChunk.fields); name is optional on a tool-call delta after the
// call's first.
var recordShapes = map[string][8]bool{
	RecordBlockStart:     {true, true},
	RecordTextDelta:      {true, false, true},
	RecordReasoningDelta: {true, false, true},
	RecordToolCallDelta:  {true, false, false, true, true, true},
	RecordBlockEnd:       {true, false, false, false, false, false, true},
	RecordUsage:          {7: true},
	RecordFinish:         {7: true},
}

// replayBlock is a block of a record under replay.
type replayBlock struct {
	kind  ChunkType
	call  int    // tool-call: its position among the calls
	id    string // tool-call: the id of its first delta, "" before it
	ended bool
}

// ReplayRecord returns chunks that fold, pushed in order into an Assembler
// with their times, into the content, usage and finish the record
// (Assembler.Record) was made from: the inverse of Record. The chunks need
// not be the ones that were pushed: a text or reasoning block-end becomes
// an empty delta of the other kind, which closes the block, or a reasoning
// chunk carrying the block's signature; a block-start becomes nothing. It
// refuses, with an error wrapping ErrMalformedStream and naming the chunk, a
// chunk that does not decode strictly (unknown or missing fields, a field
// of another type), a block-start out of order, a delta or block-end for a
// block not started, ended, or of another kind, a delta that does not fold
// into the block its index names, a block-end whose block is not the block
// assembled, and a chunk sequence Assembler.Push refuses. A record that
// ends without a finish (an interrupted call) is accepted.
func ReplayRecord(record []RecordedChunk) ([]TimedChunk, error) {
	var (
		out    []TimedChunk
		blocks []replayBlock
		calls  int
	)
	a := NewAssembler()
	for i, rc := range record {
		var r recordedChunk
		if err := decodeStrict(rc.Chunk, &r); err != nil {
			return nil, malformed("recorded chunk %d: %v", i, err)
		}
		shape, ok := recordShapes[r.Type]
		if !ok {
			return nil, malformed("recorded chunk %d: unknown chunk type %q", i, r.Type)
		}
		got := r.fields()
		if r.Type == RecordToolCallDelta && r.Name == nil {
			got[4] = true // name may be left out
		}
		if got != shape || (r.Type == RecordUsage && r.Usage == nil) || (r.Type == RecordFinish && r.Reason == nil) {
			return nil, malformed("recorded chunk %d: the fields of a %s chunk are wrong", i, r.Type)
		}
		push := func(c Chunk) error {
			if err := a.Push(c, rc.Time); err != nil {
				return fmt.Errorf("recorded chunk %d: %w", i, err)
			}
			out = append(out, TimedChunk{Chunk: c, Time: rc.Time})
			return nil
		}
		// b is the started, open block the chunk's index names.
		var b *replayBlock
		if r.Index != nil && r.Type != RecordBlockStart {
			if *r.Index < 0 || *r.Index >= len(blocks) || blocks[*r.Index].ended {
				return nil, malformed("recorded chunk %d: a %s for block %d, which is not started or has ended", i, r.Type, *r.Index)
			}
			b = &blocks[*r.Index]
		}
		var err error
		switch r.Type {
		case RecordBlockStart:
			kind := map[string]ChunkType{BlockText: ChunkText, BlockReasoning: ChunkReasoning, BlockToolCall: ChunkToolCall}[*r.BlockType]
			if kind == "" || *r.Index != len(blocks) {
				return nil, malformed("recorded chunk %d: block-start %d of type %q (the next block is %d)", i, *r.Index, *r.BlockType, len(blocks))
			}
			nb := replayBlock{kind: kind}
			if kind == ChunkToolCall {
				nb.call, calls = calls, calls+1
			}
			blocks = append(blocks, nb)
		case RecordTextDelta, RecordReasoningDelta:
			kind := ChunkText
			if r.Type == RecordReasoningDelta {
				kind = ChunkReasoning
			}
			if b.kind != kind {
				return nil, malformed("recorded chunk %d: a %s for a %s block", i, r.Type, b.kind)
			}
			if err = push(Chunk{Type: kind, Delta: *r.Text}); err == nil && a.open != *r.Index {
				err = malformed("recorded chunk %d: the delta folds into block %d, not %d", i, a.open, *r.Index)
			}
		case RecordToolCallDelta:
			if b.kind != ChunkToolCall || *r.ID == "" || (b.id != "" && *r.ID != b.id) {
				return nil, malformed("recorded chunk %d: a tool-call delta of call %q for block %d", i, *r.ID, *r.Index)
			}
			c := Chunk{Type: ChunkToolCall, Index: b.call, Delta: *r.ArgumentsDelta}
			if b.id == "" {
				c.ID, b.id = *r.ID, *r.ID
				if r.Name != nil {
					c.Name = *r.Name
				}
			} else if r.Name != nil && *r.Name != a.calls[b.call].name {
				return nil, malformed("recorded chunk %d: tool call %q renamed %q", i, b.id, *r.Name)
			}
			if err = push(c); err == nil && a.calls[b.call].block != *r.Index {
				err = malformed("recorded chunk %d: tool call %q is block %d, not %d", i, b.id, a.calls[b.call].block, *r.Index)
			}
		case RecordBlockEnd:
			err = replayBlockEnd(a, b, *r.Index, r.Block, push)
			if err != nil {
				err = fmt.Errorf("recorded chunk %d: %w", i, err)
			}
			b.ended = true
		case RecordUsage:
			err = push(Chunk{Type: ChunkUsage, Usage: r.Usage})
		case RecordFinish:
			err = push(Chunk{Type: ChunkFinish, Finish: r.Reason.Kind})
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replayBlockEnd replays the block-end of block index (b) into a: a
// signed reasoning block pushes its signature, another text or reasoning
// block an empty delta of the other kind, which closes it. The block
// assembled must be the block recorded.
func replayBlockEnd(a *Assembler, b *replayBlock, index int, raw json.RawMessage, push func(Chunk) error) error {
	var want Block
	if err := decodeStrict(raw, &want); err != nil {
		return malformed("block: %v", err)
	}
	switch {
	case b.kind == ChunkReasoning && want.Signature != "":
		if err := push(Chunk{Type: ChunkReasoning, Signature: want.Signature}); err != nil {
			return err
		}
	case b.kind == ChunkText || b.kind == ChunkReasoning:
		if a.open != index {
			return malformed("block-end %d of a block that is not open", index)
		}
		other := ChunkReasoning
		if b.kind == ChunkReasoning {
			other = ChunkText
		}
		if err := push(Chunk{Type: other}); err != nil {
			return err
		}
	}
	if index >= len(a.blocks) {
		return malformed("block-end %d of a block never assembled", index)
	}
	if got := a.block(a.blocks[index]); !reflect.DeepEqual(got, want) {
		return malformed("block-end %d holds %+v, not the block assembled, %+v", index, want, got)
	}
	return nil
}

// decodeStrict decodes exactly one JSON value from raw into v, refusing
// unknown fields and trailing data.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}
