package bench

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
)

// ModelCall is one model call of the compaction measurement, as the
// scripted provider received it.
type ModelCall struct {
	// Turn is the turn the harness was driving (1-based).
	Turn int `json:"turn"`
	// Compaction marks a summarisation call (Purpose
	// provider.PurposeCompaction).
	Compaction bool `json:"compaction,omitempty"`
	// Tokens is provider.EstimateRequest of the request.
	Tokens int `json:"tokens"`
	// Refused marks a call the scripted provider refused as exceeding its
	// context window (provider.CodeContextWindowExceeded).
	Refused bool `json:"refused,omitempty"`
}

// callRecorder is the provider of the compaction measurement: it passes
// every call to a scripted provider and records it (ModelCall), tagged with
// the turn set by setTurn. The turns run one at a time, so the tag is the
// turn the call belongs to. It reports the scripted provider's context
// window, so that the worker resolves the window as it would for the
// scripted provider itself.
type callRecorder struct {
	p    *scripted.Provider
	turn atomic.Int64

	mu    sync.Mutex
	calls []ModelCall
}

var (
	_ provider.Provider       = (*callRecorder)(nil)
	_ provider.WindowReporter = (*callRecorder)(nil)
)

// setTurn tags the calls that follow with turn.
func (r *callRecorder) setTurn(turn int) { r.turn.Store(int64(turn)) }

// ContextWindow implements provider.WindowReporter with the scripted
// provider's window.
func (r *callRecorder) ContextWindow() int64 { return r.p.ContextWindow() }

// Stream implements provider.Provider: the scripted provider's stream,
// recorded once it ends or its consumer stops.
func (r *callRecorder) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		c := ModelCall{Turn: int(r.turn.Load()), Compaction: req.Purpose == provider.PurposeCompaction, Tokens: provider.EstimateRequest(req)}
		defer r.add(&c)
		for ch, err := range r.p.Stream(ctx, req) {
			var pe *provider.Error
			if errors.As(err, &pe) && pe.Code == provider.CodeContextWindowExceeded {
				c.Refused = true
			}
			if !yield(ch, err) {
				return
			}
		}
	}
}

func (r *callRecorder) add(c *ModelCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, *c)
}

// recorded returns the calls recorded so far, in order.
func (r *callRecorder) recorded() []ModelCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ModelCall(nil), r.calls...)
}
