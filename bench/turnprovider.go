package bench

import (
	"context"
	"iter"
	"strings"

	"github.com/sessionflow/sessionflow/provider"
)

// fixedProvider answers every call at once with the same text, streamed in
// chunks of chunkBytes bytes: a model without latency.
type fixedProvider struct {
	chunks, chunkBytes int
}

func (p fixedProvider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	delta := strings.Repeat("x", max(1, p.chunkBytes))
	return func(yield func(provider.Chunk, error) bool) {
		for i := 0; i < p.chunks; i++ {
			if !yield(provider.Chunk{Type: provider.ChunkText, Delta: delta}, nil) {
				return
			}
		}
		if !yield(provider.Chunk{Type: provider.ChunkUsage, Usage: &provider.Usage{InputTokens: int64(len(req.Messages)), OutputTokens: int64(p.chunks)}}, nil) {
			return
		}
		yield(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishStop}, nil)
	}
}

// providerName is the provider that answers with responses of chunks
// chunks.
func providerName(chunks int) string { return "bench-" + itoa(chunks) }

// turnProviders returns the providers of the turn measurements: one per
// response length.
func turnProviders(cfg TurnsConfig) provider.Set {
	set := provider.Set{}
	for _, c := range append([]int{cfg.ResponseChunks}, cfg.Chunks...) {
		set[providerName(c)] = fixedProvider{chunks: c, chunkBytes: cfg.ChunkBytes}
	}
	return set
}
