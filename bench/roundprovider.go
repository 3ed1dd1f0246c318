package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/tool"
)

// NoopToolName is the tool of the tool-round measurements: it does nothing
// and answers "ok". The harness's worker offers it beside the built-in
// tools; the agent sample runs the same function in its tool activity.
const NoopToolName = "bench_noop"

// NoopTool returns the tool of the tool-round measurements: parallel-safe
// and idempotent, without approval, its Run returning the text "ok" at
// once.
func NoopTool() tool.Tool {
	return tool.Tool{
		Name:        NoopToolName,
		Description: "Does nothing and answers ok (the performance harness's tool).",
		Schema:      json.RawMessage(`{"type":"object"}`),
		Parallel:    true,
		Idempotent:  true,
		Run: func(context.Context, tool.Call) (tool.Result, error) {
			return tool.Result{Content: []provider.Block{{Type: provider.BlockText, Text: "ok"}}}, nil
		},
	}
}

// roundProviderName is the provider of the tool rounds with calls parallel
// tool calls.
func roundProviderName(calls int) string { return "bench-round-" + strconv.Itoa(calls) }

// roundProvider is the zero-latency model of the tool-round measurements.
// A request whose last message holds no tool result (a turn's prompt) is
// answered with calls calls of NoopToolName and finish tool-calls; a
// request whose last message holds tool results is answered with text
// (chunks deltas of chunkBytes bytes) and finish stop. The clock times the
// round from the provider's side: from the end of the call that asked for
// the tools to the start of the call that gets their results.
type roundProvider struct {
	calls      int
	chunks     int
	chunkBytes int
	clock      *roundClock
}

// Stream implements provider.Provider.
func (p *roundProvider) Stream(_ context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		started := time.Now()
		if ids := toolResults(req.Messages); len(ids) > 0 {
			p.clock.second(ids, started)
			size := max(1, p.chunkBytes)
			for range max(1, p.chunks) {
				if !yield(provider.Chunk{Type: provider.ChunkText, Delta: strings.Repeat("x", size)}, nil) {
					return
				}
			}
			if !yield(provider.Chunk{Type: provider.ChunkUsage, Usage: &provider.Usage{InputTokens: 1, OutputTokens: int64(p.chunks)}}, nil) {
				return
			}
			yield(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishStop}, nil)
			return
		}
		round := p.clock.newRound()
		ids := make([]string, max(1, p.calls))
		for i := range ids {
			id := fmt.Sprintf("round-%d-%d", round, i)
			ids[i] = id
			if !yield(provider.Chunk{Type: provider.ChunkToolCall, Index: i, ID: id, Name: NoopToolName, Delta: "{}"}, nil) {
				return
			}
		}
		if !yield(provider.Chunk{Type: provider.ChunkUsage, Usage: &provider.Usage{InputTokens: 1, OutputTokens: int64(p.calls)}}, nil) {
			return
		}
		yield(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishToolCalls}, nil)
		// The call ends when its consumer has taken the finish chunk.
		p.clock.first(ids, time.Now())
	}
}

// toolResults returns the call ids of the tool results the conversation
// ends with (the messages holding tool results after its last assistant
// message), when it ends with any.
func toolResults(msgs []provider.Message) []string {
	var ids []string
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role != provider.RoleAssistant; i-- {
		for _, b := range msgs[i].Content {
			if b.Type == provider.BlockToolResult {
				ids = append(ids, b.ToolCallID)
			}
		}
	}
	return ids
}

// roundClock collects the rounds the round providers timed.
type roundClock struct {
	mu     sync.Mutex
	rounds int64
	// ended holds the end of each first call by the ids of its tool calls.
	ended map[string]*roundEnd
	// gaps are the rounds timed since the last take; unmatched counts the
	// second calls whose first call the clock did not see.
	gaps      []roundTiming
	unmatched int
	// syncs, when set, counts the store's fsyncs, read at both ends of a
	// round.
	syncs *syncCounter
}

// roundEnd is the end of a first call, the ids of its tool calls and the
// store's fsyncs then.
type roundEnd struct {
	at       time.Time
	ids      []string
	syncs    int
	syncTime time.Duration
}

// roundTiming is one round timed by the clock: its time, and the store's
// fsyncs during it and their time.
type roundTiming struct {
	// end and start are the end of the first call and the start of the
	// second; gap is the time between them.
	end, start time.Time
	gap        time.Duration
	syncs      int
	syncTime   time.Duration
}

func newRoundClock(syncs *syncCounter) *roundClock {
	return &roundClock{ended: map[string]*roundEnd{}, syncs: syncs}
}

// newRound numbers a first call.
func (c *roundClock) newRound() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rounds++
	return c.rounds
}

// first records the end of the first call asking for the tool calls ids.
func (c *roundClock) first(ids []string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &roundEnd{at: at, ids: ids}
	e.syncs, e.syncTime = c.syncs.read()
	for _, id := range ids {
		c.ended[id] = e
	}
}

// second records the start of the call answering the results of the tool
// calls ids: the round of the first call that asked for them ends.
func (c *roundClock) second(ids []string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if e, ok := c.ended[id]; ok {
			for _, id := range e.ids {
				delete(c.ended, id)
			}
			n, d := c.syncs.read()
			c.gaps = append(c.gaps, roundTiming{end: e.at, start: at, gap: at.Sub(e.at), syncs: n - e.syncs, syncTime: d - e.syncTime})
			return
		}
	}
	c.unmatched++
}

// take returns the rounds timed since the last take and the number of
// unmatched second calls, and forgets them.
func (c *roundClock) take() ([]roundTiming, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gaps, unmatched := c.gaps, c.unmatched
	c.gaps, c.unmatched = nil, 0
	return gaps, unmatched
}

// roundProviders returns the providers of the tool-round measurements, one
// per number of parallel calls, timing on clock.
func roundProviders(cfg RoundsConfig, chunks, chunkBytes int, clock *roundClock) provider.Set {
	set := provider.Set{}
	for _, k := range cfg.callCounts() {
		set[roundProviderName(k)] = &roundProvider{calls: k, chunks: chunks, chunkBytes: chunkBytes, clock: clock}
	}
	return set
}
