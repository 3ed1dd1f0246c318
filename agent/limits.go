package agent

import (
	"fmt"
	"time"
)

// Defaults of ModelLimits (docs/API.md "Model call limits").
const (
	// DefaultModelIdleTimeout is how long a model stream may go without a
	// chunk before the attempt fails (retryable).
	DefaultModelIdleTimeout = 90 * time.Second
	// DefaultModelCallTimeout is how long one attempt may stream in all
	// before it fails (not retried: a trickle would only trickle again).
	DefaultModelCallTimeout = 8 * time.Minute
	// DefaultMaxModelOutput is how many bytes of text, reasoning and tool
	// arguments one model call may produce.
	DefaultMaxModelOutput = 4 << 20
)

// StreamTextLimit is the most text, in bytes, the record of a model call's
// stream (the assistant/chunk events its assistant/message cites) repeats
// beside the message's content: a call whose record would hold more (the
// deltas, the blocks of the block-end chunks, the id and name each
// tool-call delta repeats) stores its text once, in the content, and of
// its chunks only the usage and finish (docs/FORMAT.md §1.2 "The stream
// record", docs/DECISIONS.md D72 and its successor).
const StreamTextLimit = 64 << 10

// Codes of the provider errors a model call's limits produce; the turn
// ends "error" with one of them (docs/API.md "Model call limits").
const (
	// CodeModelIdle: no chunk arrived for ModelLimits.IdleTimeout. The
	// attempt is retried.
	CodeModelIdle = "MODEL_STREAM_IDLE"
	// CodeModelCallTimeout: the attempt streamed for ModelLimits.CallTimeout
	// without finishing. Not retried.
	CodeModelCallTimeout = "MODEL_CALL_TIMEOUT"
	// CodeModelOutputTooLarge: the call produced more than
	// ModelLimits.MaxOutputBytes. Not retried; nothing is stored.
	CodeModelOutputTooLarge = "MODEL_OUTPUT_TOO_LARGE"
)

// ModelLimits bound one model call (one attempt of CallModel). Zero fields
// take the defaults above.
type ModelLimits struct {
	// IdleTimeout is the longest gap before the first chunk or between two
	// chunks.
	IdleTimeout time.Duration
	// CallTimeout is the longest an attempt may stream in all.
	CallTimeout time.Duration
	// MaxOutputBytes bounds the text, reasoning and tool-call arguments of
	// one call, in bytes.
	MaxOutputBytes int
}

// Validate refuses negative limits.
func (l ModelLimits) Validate() error {
	switch {
	case l.IdleTimeout < 0:
		return fmt.Errorf("the model idle timeout %s is negative", l.IdleTimeout)
	case l.CallTimeout < 0:
		return fmt.Errorf("the model call timeout %s is negative", l.CallTimeout)
	case l.MaxOutputBytes < 0:
		return fmt.Errorf("the model output limit %d is negative", l.MaxOutputBytes)
	}
	return nil
}

// resolved returns l with every zero field set to its default.
func (l ModelLimits) resolved() ModelLimits {
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultModelIdleTimeout
	}
	if l.CallTimeout <= 0 {
		l.CallTimeout = DefaultModelCallTimeout
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = DefaultMaxModelOutput
	}
	return l
}

// DefaultModelLimits returns the default limits.
func DefaultModelLimits() ModelLimits { return ModelLimits{}.resolved() }
