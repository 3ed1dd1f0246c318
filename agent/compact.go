package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// conversation (one bracket, after pruning), or the closing of an open one.
type CompactInput struct {
	// Ref is the session's write handle.
	Ref wire.HandleRef `json:"ref"`
	// Turn owns the compaction; 0 for a standalone one between turns.
	Turn int64 `json:"turn,omitempty"`
	// Trigger is TriggerPressure, TriggerOverflow or TriggerManual.
	Trigger string `json:"trigger"`
	// CommandID is the command/run of a manual compaction.
	CommandID string `json:"commandId,omitempty"`
	// Provider and Model are the route of the conversation and of the
	// summarisation call.
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// ContextWindow is the session's context window, 0 for the worker's.
	ContextWindow int64 `json:"contextWindow,omitempty"`
	// After is the log's next seq when the workflow asked: a compaction
	// that started at or after it is this call's own, continued or
	// reported by a retry.
	After int64 `json:"after"`
	// Close, when set, closes this call's open compaction (from After)
	// with Close as its error, and does nothing else.
	Close string `json:"close,omitempty"`
}

// CompactResult is what Compact returns: seqs and counts, never the
// summary.
type CompactResult struct {
	// NextSeq is the log's next seq after the call.
	NextSeq int64 `json:"nextSeq"`
	// Done reports that the trigger wants no further compaction: the
	// request is below the threshold, or nothing (more) can be compacted.
	Done bool `json:"done,omitempty"`
	// CompactionID is the compaction this call ran, "" for none.
	CompactionID string `json:"compactionId,omitempty"`
	// SummarySeq is the seq of its compaction/summary, -1 for none.
	SummarySeq int64 `json:"summarySeq"`
	// Shadowed and ShadowedTokens count the surface nodes it replaced and
	// their estimated tokens.
	Shadowed       int `json:"shadowed,omitempty"`
	ShadowedTokens int `json:"shadowedTokens,omitempty"`
	// Pruned counts the tool results pruned before it.
	Pruned int `json:"pruned,omitempty"`
	// CheckpointTokens is the estimated tokens of its checkpoint (the
	// replacing user/message).
	CheckpointTokens int `json:"checkpointTokens,omitempty"`
	// Error is the error its compaction/end recorded (a failed attempt).
	Error string `json:"error,omitempty"`
	// Tokens is the request's measured size after the call; Window the
	// context window (0: unknown).
	Tokens int   `json:"tokens"`
	Window int64 `json:"window,omitempty"`
}

// Progressed reports whether the call changed the conversation: a summary
// replaced a span, or a tool result was pruned.
func (r CompactResult) Progressed() bool { return r.SummarySeq >= 0 || r.Pruned > 0 }

// compactTimeout bounds the closing of a cancelled compaction.
const compactTimeout = 30 * time.Second

// Compact runs one compaction of the session's conversation
// (docs/FORMAT.md §9, docs/LIFECYCLE.md "Compaction"): it prunes the
// oversized tool results of the surface, then, when the trigger still
// asks for it, summarises the oldest span (keeping a tail under pressure,
// never splitting a tool call from its result) with one model call and
// stores compaction/start, then compaction/summary, the replacing
// user/message and compaction/end in one batch; a summary that fails
// stores compaction/end with the error. A span whose summarisation request
// would not fit the context window is cut to the longest prefix that does
// (Done is then false: the workflow calls again for the rest).
//
// It is idempotent against the log: a compaction started from in.After is
// this call's own; a retry continues it from what the log holds (an open
// start summarises again; a stored summary is completed) or reports it.
func (a *Activities) Compact(ctx context.Context, in CompactInput) (res CompactResult, err error) {
	h, err := a.Runtime.Attach(in.Ref)
	if err != nil {
		return CompactResult{}, err
	}
	switch in.Trigger {
	case TriggerPressure, TriggerOverflow, TriggerManual:
	default:
		return CompactResult{}, invalidLog("compaction trigger %q is not one of %q, %q, %q", in.Trigger, TriggerPressure, TriggerOverflow, TriggerManual)
	}
	c := &compaction{a: a, h: h, in: in}
	if in.Close != "" {
		return c.close(ctx, in.Close)
	}
	return c.run(ctx)
}

// compaction is one attempt of Compact.
type compaction struct {
	a  *Activities
	h  *jsonl.Handle
	in CompactInput
	p  provider.Provider
	// window is the resolved context window (0: unknown).
	window int64
}

// run is one compaction (see Compact).
func (c *compaction) run(ctx context.Context) (CompactResult, error) {
	tail, next, err := c.h.Tail(ctx, 0)
	if err != nil {
		return CompactResult{}, activities.MapError(err)
	}
	b, err := ownBracket(tail, c.in.After)
	if err != nil {
		return CompactResult{}, invalidLog("%v", err)
	}
	if b.endSeq >= 0 {
		return c.measured(tail, b.result(next))
	}
	p, err := c.a.Providers.Get(c.in.Provider)
	if err != nil {
		return CompactResult{}, temporal.NewNonRetryableApplicationError(err.Error(), wire.ErrTypeUnknownProvider, nil)
	}
	c.p = p
	c.window = c.a.contextWindow(c.in.ContextWindow, c.in.Provider, c.in.Model, p)
	if b.summarySeq >= 0 {
		// A crash between the summary and the end: complete it.
		return c.close(ctx, "")
	}
	nodes, err := surfaceNodes(tail)
	if err != nil {
		return CompactResult{}, invalidLog("%v", err)
	}
	if b.start < 0 {
		if c.in.Trigger == TriggerPressure && !c.above(tail, nodes) {
			return c.measured(tail, CompactResult{NextSeq: next, Done: true, SummarySeq: -1, Pruned: b.pruned})
		}
		if b.pruned == 0 {
			n, err := c.prune(ctx, tail, nodes)
			if err != nil {
				return CompactResult{}, err
			}
			if n > 0 {
				if tail, next, err = c.h.Tail(ctx, 0); err != nil {
					return CompactResult{}, activities.MapError(err)
				}
				if nodes, err = surfaceNodes(tail); err != nil {
					return CompactResult{}, invalidLog("%v", err)
				}
				b.pruned = n
				if c.in.Trigger == TriggerPressure && !c.above(tail, nodes) {
					return c.measured(tail, CompactResult{NextSeq: next, Done: true, SummarySeq: -1, Pruned: n})
				}
			}
		}
	}
	retain := 0
	if c.in.Trigger == TriggerPressure && c.window > 0 {
		retain = int(float64(c.window) * c.a.Compaction.retain())
	}
	end, ok := selectRange(nodes, retain)
	if !ok {
		if b.start >= 0 {
			return c.close(ctx, "no span of the conversation can be compacted")
		}
		return c.measured(tail, CompactResult{NextSeq: next, Done: true, SummarySeq: -1, Pruned: b.pruned})
	}
	return c.summarise(ctx, b, nodes, end)
}

// above reports whether the request the log's conversation makes is at or
// above the threshold of the window.
func (c *compaction) above(tail []session.Event, nodes []pricedNode) bool {
	if c.window <= 0 {
		return false
	}
	return c.tokens(tail, nodes) >= int(float64(c.window)*c.a.Compaction.threshold())
}

// tokens measures the request of the conversation nodes of tail.
func (c *compaction) tokens(tail []session.Event, nodes []pricedNode) int {
	anchor, ok := lastUsage(tail)
	return pressure(c.envelope(), nodes, anchor, ok, c.route())
}

// route is the route of the conversation's requests, as request/context
// records it.
func (c *compaction) route() routeData {
	return routeData{Provider: c.in.Provider, Model: c.in.Model, ContextWindow: c.window}
}

// envelope is the estimate of the system prompt and tools of a request.
func (c *compaction) envelope() int {
	var tools []provider.Tool
	if c.a.Tools != nil {
		tools = c.a.Tools.Specs()
	}
	return provider.EstimateEnvelope(c.a.System, tools)
}

// measured completes res with the measure of the log's conversation.
func (c *compaction) measured(tail []session.Event, res CompactResult) (CompactResult, error) {
	nodes, err := surfaceNodes(tail)
	if err != nil {
		return CompactResult{}, invalidLog("%v", err)
	}
	if c.window == 0 && c.p == nil {
		if p, err := c.a.Providers.Get(c.in.Provider); err == nil {
			c.window = c.a.contextWindow(c.in.ContextWindow, c.in.Provider, c.in.Model, p)
		}
	}
	res.Tokens, res.Window = c.tokens(tail, nodes), c.window
	if c.in.Trigger == TriggerPressure && !res.Done && res.Error == "" {
		res.Done = !c.above(tail, nodes)
	}
	return res, nil
}

// prune stores, for every tool result of the surface over the pruning
// budget, compaction/prune and the pruned tool/result replacing it, in one
// batch. It returns how many it pruned.
func (c *compaction) prune(ctx context.Context, tail []session.Event, nodes []pricedNode) (int, error) {
	ps := c.a.Compaction.prune()
	type cut struct {
		seq    int64
		data   json.RawMessage
		tokens int
	}
	var cuts []cut
	for _, n := range nodes {
		if n.typ != wire.TypeToolResult {
			continue
		}
		e := tail[n.seq]
		raw, err := messageContent(e)
		if err != nil {
			return 0, invalidLog("%v", err)
		}
		data, ok, err := ps.prunedResult(e, provider.Message{Content: raw})
		if err != nil {
			return 0, invalidLog("%v", err)
		}
		if ok {
			cuts = append(cuts, cut{seq: n.seq, data: data, tokens: n.tokens})
		}
	}
	if len(cuts) == 0 {
		return 0, nil
	}
	read := len(tail)
	_, err := c.h.Update(ctx, 0, func(now []session.Event, next int64) ([]session.Event, error) {
		if len(now) != read {
			return nil, temporal.NewApplicationError("compaction: the log changed while pruning", wire.ErrTypeIO)
		}
		t := c.a.nowMs()
		batch := make([]session.Event, 0, 2*len(cuts))
		for _, k := range cuts {
			pe, err := session.NewEvent(wire.TypeCompactionPrune, next+int64(len(batch)), t,
				compactionPrune{ShadowedRange: shadowedRange{Start: k.seq, End: k.seq}, ShadowedSeqs: []int64{k.seq}, ShadowedTokenCount: k.tokens})
			if err != nil {
				return nil, err
			}
			re := session.Event{Type: wire.TypeToolResult, Seq: next + int64(len(batch)) + 1, Time: t, Data: k.data,
				SurfaceOp: &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: k.seq, EndSeq: k.seq}, SourceEventSeqs: []int64{k.seq}}
			if err := re.Validate(); err != nil {
				return nil, fmt.Errorf("%w: %w", session.ErrInvalidEvent, err)
			}
			batch = append(batch, pe, re)
		}
		return batch, nil
	})
	if err != nil {
		return 0, activities.MapError(err)
	}
	return len(cuts), nil
}
