package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// streamRecord is the union of the stream record shapes, decoded strictly.
type streamRecord struct {
	Type  string          `json:"type"`
	Time  *int64          `json:"time"`
	Chunk json.RawMessage `json:"chunk"`
	Time0 *int64          `json:"time0"`
	Index *int            `json:"index"`
	DT    []int64         `json:"dt"`
	Texts []string        `json:"texts"`
}

// ReplayStream returns the chunks a stream record (Assembler.Stream)
// holds, in the order they were pushed. See ReplayStreamTimed.
func ReplayStream(records []json.RawMessage) ([]Chunk, error) {
	timed, err := ReplayStreamTimed(records)
	if err != nil {
		return nil, err
	}
	out := make([]Chunk, len(timed))
	for i, t := range timed {
		out[i] = t.Chunk
	}
	return out, nil
}

// ReplayStreamTimed returns the chunks a stream record (Assembler.Stream)
// holds with their times, in the order they were pushed: the inverse of
// Stream. It refuses, with an error wrapping ErrMalformedStream and naming
// the record, a record that does not decode strictly (unknown or missing
// fields, a field of another record type, dt not one shorter than texts,
// an index that is not the position of the block the run's deltas fold
// into) and a chunk sequence Assembler.Push refuses. A stream that ends
// without a finish chunk (an interrupted call) is accepted.
func ReplayStreamTimed(records []json.RawMessage) ([]TimedChunk, error) {
	var out []TimedChunk
	a := NewAssembler()
	for i, raw := range records {
		var r streamRecord
		if err := decodeStrict(raw, &r); err != nil {
			return nil, malformed("stream record %d: %v", i, err)
		}
		push := func(c Chunk, t int64) error {
			if err := a.Push(c, t); err != nil {
				return fmt.Errorf("stream record %d: %w", i, err)
			}
			out = append(out, TimedChunk{Chunk: c, Time: t})
			return nil
		}
		switch r.Type {
		case RecordChunk:
			if r.Time == nil || r.Chunk == nil || r.Time0 != nil || r.Index != nil || r.DT != nil || r.Texts != nil {
				return nil, malformed("stream record %d: a chunk record must be exactly {type, time, chunk}", i)
			}
			var c Chunk
			if err := decodeStrict(r.Chunk, &c); err != nil {
				return nil, malformed("stream record %d: chunk: %v", i, err)
			}
			if err := push(c, *r.Time); err != nil {
				return nil, err
			}
		case RecordTextChunks, RecordReasoningChunks:
			if r.Time0 == nil || r.Index == nil || r.DT == nil || r.Texts == nil || r.Time != nil || r.Chunk != nil {
				return nil, malformed("stream record %d: a %s record must be exactly {type, time0, index, dt, texts}", i, r.Type)
			}
			if len(r.Texts) == 0 || len(r.DT) != len(r.Texts)-1 {
				return nil, malformed("stream record %d: %d texts need %d dt gaps, not %d", i, len(r.Texts), max(len(r.Texts)-1, 0), len(r.DT))
			}
			kind := ChunkText
			if r.Type == RecordReasoningChunks {
				kind = ChunkReasoning
			}
			t := *r.Time0
			for k, text := range r.Texts {
				if k > 0 {
					t += r.DT[k-1]
				}
				if err := push(Chunk{Type: kind, Delta: text}, t); err != nil {
					return nil, err
				}
				if a.open < 0 || a.open != *r.Index || a.blocks[a.open].kind != kind {
					return nil, malformed("stream record %d: text %d folds into block %d, not the record's index %d", i, k, a.open, *r.Index)
				}
			}
		default:
			return nil, malformed("stream record %d: unknown record type %q", i, r.Type)
		}
	}
	return out, nil
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
