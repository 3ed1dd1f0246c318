package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
)

// providerName is the provider that answers with responses of chunks
// chunks.
func providerName(chunks int) string { return "bench-" + strconv.Itoa(chunks) }

// turnProviders returns the providers of the turn measurements: one
// scripted provider per response length, answering every call at once
// (no delay) with chunks text deltas of cfg.ChunkBytes bytes.
func turnProviders(cfg TurnsConfig) (provider.Set, error) {
	set := provider.Set{}
	for _, c := range append([]int{cfg.ResponseChunks}, cfg.Chunks...) {
		p, err := scripted.New(scripted.Script{Loop: true, Responses: []scripted.Response{{
			Text:      strings.Repeat("x", c*max(1, cfg.ChunkBytes)),
			ChunkSize: max(1, cfg.ChunkBytes),
			Usage:     &provider.Usage{InputTokens: 1, OutputTokens: int64(c)},
		}}})
		if err != nil {
			return nil, fmt.Errorf("the scripted provider of %d chunks: %w", c, err)
		}
		set[providerName(c)] = p
	}
	return set, nil
}
