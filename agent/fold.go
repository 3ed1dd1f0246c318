package agent

import (
	"github.com/sessionflow/sessionflow/provider"
)

// fold is what CallModel needs of a stream assembler (provider.Assembler):
// it folds the chunks of one model call into the message content, the
// interrupted anchor's content, the record of the stream (stored as
// assistant/chunk events) and the shown text.
type fold interface {
	Push(c provider.Chunk, timeMs int64) error
	Content() []provider.Block
	Interrupted() []provider.Block
	Record() []provider.RecordedChunk
	Usage() *provider.Usage
	Finish() provider.FinishReason
	ShownLen() int
	ShownTail(maxBytes int) (offset int, tail string)
}

// newFold returns the assembler of one model call: its record repeats the
// call's text only up to StreamTextLimit.
func newFold() fold {
	a := provider.NewAssembler()
	a.LimitRecordText(StreamTextLimit)
	return a
}
