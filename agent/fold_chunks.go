package agent

import (
	"encoding/json"
	"strings"

	"github.com/sessionflow/sessionflow/provider"
)

// chunkFold is a plain assembler: content blocks in model order and one
// stream record per chunk.
type chunkFold struct {
	blocks   []provider.Block
	calls    map[int]int // tool-call index -> block index
	stream   []json.RawMessage
	usage    *provider.Usage
	finish   provider.FinishReason
	shown    strings.Builder
	lastType string
}

func newChunkFold() *chunkFold { return &chunkFold{calls: map[int]int{}} }

func (f *chunkFold) Push(c provider.Chunk, timeMs int64) {
	rec, _ := json.Marshal(struct {
		Type  string         `json:"type"`
		Time  int64          `json:"time"`
		Chunk provider.Chunk `json:"chunk"`
	}{"chunk", timeMs, c})
	f.stream = append(f.stream, rec)
	switch c.Type {
	case provider.ChunkText, provider.ChunkReasoning:
		typ := string(c.Type)
		if n := len(f.blocks); n > 0 && f.lastType == typ {
			f.blocks[n-1].Text += c.Delta
		} else {
			f.blocks = append(f.blocks, provider.Block{Type: typ, Text: c.Delta})
		}
		f.lastType = typ
		if c.Type == provider.ChunkText {
			f.shown.WriteString(c.Delta)
		}
	case provider.ChunkToolCall:
		i, ok := f.calls[c.Index]
		if !ok {
			i = len(f.blocks)
			f.calls[c.Index] = i
			f.blocks = append(f.blocks, provider.Block{Type: provider.BlockToolCall, ID: c.ID, Name: c.Name})
		}
		f.blocks[i].Arguments += c.Delta
		f.lastType = provider.BlockToolCall
	case provider.ChunkUsage:
		u := *c.Usage
		f.usage = &u
	case provider.ChunkFinish:
		f.finish = c.Finish
	}
}

func (f *chunkFold) Content() []provider.Block { return f.blocks }

func (f *chunkFold) Interrupted() []provider.Block {
	var out []provider.Block
	for _, b := range f.blocks {
		if b.Type == provider.BlockText || b.Type == provider.BlockReasoning {
			out = append(out, b)
		}
	}
	return out
}

func (f *chunkFold) Stream() []json.RawMessage     { return f.stream }
func (f *chunkFold) Usage() *provider.Usage        { return f.usage }
func (f *chunkFold) Finish() provider.FinishReason { return f.finish }
func (f *chunkFold) ShownText() string             { return f.shown.String() }
