package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Compaction defaults (docs/API.md "Compaction"), the harness's.
const (
	// DefaultCompactThreshold is the share of the context window above
	// which a step's request is compacted first.
	DefaultCompactThreshold = 0.8
	// DefaultCompactRetain is the share of the context window kept verbatim
	// at the tail of the conversation by a compaction under pressure.
	DefaultCompactRetain = 0.16
	// DefaultSummaryMaxTokens caps the output of a summarisation call.
	DefaultSummaryMaxTokens = 8192
	// DefaultPruneChars, DefaultPruneHeadChars and DefaultPruneTailChars
	// are the tool-result pruning budgets, in Unicode code points.
	DefaultPruneChars     = 8192
	DefaultPruneHeadChars = 4096
	DefaultPruneTailChars = 1024
)

// CompactionSettings tune compaction; zero fields take the defaults.
type CompactionSettings struct {
	// ContextWindow, when positive, is the context window of every route
	// of the worker, in tokens, in place of the table's.
	ContextWindow int64
	// Windows returns the context window of a route (0: unknown): the
	// table of the providers' models. nil knows none.
	Windows func(providerName, model string) int64
	// Threshold is the share of the window above which a step compacts
	// first (DefaultCompactThreshold).
	Threshold float64
	// Retain is the share of the window a compaction under pressure keeps
	// verbatim (DefaultCompactRetain); less than Threshold.
	Retain float64
	// SummaryMaxTokens caps a summarisation call's output
	// (DefaultSummaryMaxTokens).
	SummaryMaxTokens int64
	// PruneChars, PruneHeadChars and PruneTailChars are the tool-result
	// pruning budgets (DefaultPruneChars, ...).
	PruneChars, PruneHeadChars, PruneTailChars int
}

func (s CompactionSettings) threshold() float64 {
	if s.Threshold > 0 {
		return s.Threshold
	}
	return DefaultCompactThreshold
}

func (s CompactionSettings) retain() float64 {
	if s.Retain > 0 {
		return s.Retain
	}
	return DefaultCompactRetain
}

func (s CompactionSettings) summaryMaxTokens() int64 {
	if s.SummaryMaxTokens > 0 {
		return s.SummaryMaxTokens
	}
	return DefaultSummaryMaxTokens
}

func (s CompactionSettings) prune() pruneSettings {
	p := pruneSettings{threshold: DefaultPruneChars, head: DefaultPruneHeadChars, tail: DefaultPruneTailChars}
	if s.PruneChars > 0 {
		p.threshold = s.PruneChars
	}
	if s.PruneHeadChars > 0 {
		p.head = s.PruneHeadChars
	}
	if s.PruneTailChars > 0 {
		p.tail = s.PruneTailChars
	}
	return p
}

// contextWindow resolves the context window of a route: the session's
// (override), the worker's, the provider's own, the table's; 0 when none
// is known.
func (a *Activities) contextWindow(override int64, providerName, model string, p provider.Provider) int64 {
	switch {
	case override > 0:
		return override
	case a.Compaction.ContextWindow > 0:
		return a.Compaction.ContextWindow
	}
	if w, ok := p.(provider.WindowReporter); ok && w.ContextWindow() > 0 {
		return w.ContextWindow()
	}
	if a.Compaction.Windows != nil {
		return a.Compaction.Windows(providerName, model)
	}
	return 0
}

// CompactInput is the input of Compact: one compaction of the session's
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

// bracket is the state of the call's own compaction in the log.
type bracket struct {
	start      int64 // seq of compaction/start, -1 for none
	id         string
	summarySeq int64 // -1 for none
	summary    compactionSummary
	replaced   bool  // the replacing user/message is stored
	endSeq     int64 // -1 for none
	err        string
	pruned     int
}

// ownBracket reads the call's own compaction from tail (the log from seq
// 0): the first compaction/start at or after after.
func ownBracket(tail []session.Event, after int64) (bracket, error) {
	b := bracket{start: -1, summarySeq: -1, endSeq: -1}
	for _, e := range tail {
		if e.Seq < after {
			continue
		}
		switch e.Type {
		case wire.TypeCompactionPrune:
			if b.start < 0 {
				b.pruned++
			}
		case wire.TypeCompactionStart:
			if b.start >= 0 {
				continue
			}
			var d compactionStart
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return b, fmt.Errorf("compaction/start (seq %d): %w", e.Seq, err)
			}
			b.start, b.id = e.Seq, d.CompactionID
		case wire.TypeCompactionSummary:
			if b.start < 0 || b.summarySeq >= 0 {
				continue
			}
			if err := json.Unmarshal(e.Data, &b.summary); err != nil {
				return b, fmt.Errorf("compaction/summary (seq %d): %w", e.Seq, err)
			}
			if b.summary.CompactionID == b.id {
				b.summarySeq = e.Seq
			}
		case wire.TypeUserMessage:
			if b.summarySeq >= 0 && e.Seq == b.summarySeq+1 {
				b.replaced = true
			}
		case wire.TypeCompactionEnd:
			if b.start < 0 || b.endSeq >= 0 {
				continue
			}
			var d compactionStart
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return b, fmt.Errorf("compaction/end (seq %d): %w", e.Seq, err)
			}
			if d.CompactionID == b.id {
				b.endSeq, b.err = e.Seq, d.Error
			}
		}
	}
	return b, nil
}

// result reports a finished bracket.
func (b bracket) result(next int64) CompactResult {
	r := CompactResult{NextSeq: next, CompactionID: b.id, SummarySeq: -1, Error: b.err, Pruned: b.pruned}
	if b.summarySeq >= 0 && b.err == "" {
		r.SummarySeq = b.summarySeq
		r.Shadowed, r.ShadowedTokens = len(b.summary.ShadowedSeqs), b.summary.ShadowedTokenCount
		r.CheckpointTokens = provider.EstimateMessage(provider.Message{Role: provider.RoleUser, Content: frameSummary(b.summary.Summary)})
	}
	return r
}

// endEvent is the compaction/end of the call's bracket id at seq.
func (c *compaction) endEvent(seq int64, id, errText string) (session.Event, error) {
	return session.NewEvent(wire.TypeCompactionEnd, seq, c.a.nowMs(),
		compactionStart{CompactionID: id, SourceCommandID: c.in.CommandID, Turn: turnOwner(c.in.Turn), Error: errText})
}

// close stores compaction/end with errText for the call's open bracket.
func (c *compaction) close(ctx context.Context, errText string) (CompactResult, error) {
	var res CompactResult
	next, err := c.h.Update(ctx, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
		b, err := ownBracket(tail, c.in.After)
		if err != nil {
			return nil, err
		}
		if b.start < 0 || b.endSeq >= 0 {
			res = b.result(next)
			return nil, nil
		}
		var batch []session.Event
		if b.summarySeq >= 0 && !b.replaced {
			// The summary is stored: the compaction completes.
			e, err := checkpointEvent(next, c.a.nowMs(), b.start, b.summarySeq, b.summary, uuid.NewString())
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
			b.replaced = true
		}
		if b.summarySeq < 0 {
			b.err = errText
		} else {
			errText = ""
		}
		e, err := c.endEvent(next+int64(len(batch)), b.id, errText)
		if err != nil {
			return nil, err
		}
		b.endSeq = e.Seq
		res = b.result(next + int64(len(batch)) + 1)
		return append(batch, e), nil
	})
	if err != nil {
		return CompactResult{}, activities.MapError(err)
	}
	res.NextSeq = next
	return res, nil
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
		return CompactResult{}, temporal.NewNonRetryableApplicationError(err.Error(), wire.ErrTypeUnknownProvider, err)
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

// summaryRequest is the summarisation request of the nodes: the
// conversation's own system prompt and tools (the provider's cache of the
// conversation's prefix serves it), the nodes' messages, then the
// instruction.
func (c *compaction) summaryRequest(nodes []pricedNode) provider.Request {
	req := provider.Request{
		Provider: c.in.Provider, Model: c.in.Model, System: c.a.System,
		MaxTokens: c.summaryCap(), SessionID: c.in.Ref.SessionID,
		Purpose: provider.PurposeCompaction,
	}
	if c.a.Tools != nil {
		req.Tools = c.a.Tools.Specs()
	}
	for _, n := range nodes {
		if n.ok {
			req.Messages = append(req.Messages, n.msg)
		}
	}
	req.Messages = append(req.Messages, provider.Message{Role: provider.RoleUser,
		Content: []provider.Block{{Type: provider.BlockText, Text: compactionInstruction}}})
	return req
}

// summaryCap caps a summary's output: SummaryMaxTokens, at most a quarter
// of a known window (a summary must leave room for the span it reads).
func (c *compaction) summaryCap() int64 {
	cap := c.a.Compaction.summaryMaxTokens()
	if c.window > 0 {
		cap = min(cap, max(c.window/4, 1))
	}
	return cap
}

// fit returns the longest balanced prefix [0, end') of nodes[:end] whose
// summarisation request, with room for the summary, fits the window: end
// when the window is unknown or it fits, 0 when no prefix does.
func (c *compaction) fit(nodes []pricedNode, end int) int {
	if c.window <= 0 {
		return end
	}
	budget := int(c.window - c.summaryCap())
	base := provider.EstimateRequest(c.summaryRequest(nil))
	cuts := balancedCuts(nodes)
	best, sum := 0, base
	for i := 0; i < end; i++ {
		if nodes[i].ok {
			sum += nodes[i].tokens
		}
		if sum > budget {
			break
		}
		if cuts[i+1] {
			best = i + 1
		}
	}
	return best
}

// errSummaryTooLong is the failure of a span that does not fit even alone.
var errSummaryTooLong = errors.New("the oldest span of the conversation does not fit the context window even alone")

// summarise runs the compaction of nodes[:end]: it opens the bracket unless
// b is open already, calls the model, and stores the summary, the
// replacement and the end; or the end with the error.
func (c *compaction) summarise(ctx context.Context, b bracket, nodes []pricedNode, end int) (CompactResult, error) {
	want := end
	end = c.fit(nodes, end)
	if b.start < 0 {
		id := uuid.NewString()
		_, err := c.h.Update(ctx, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
			own, err := ownBracket(tail, c.in.After)
			if err != nil {
				return nil, err
			}
			if own.start >= 0 { // a concurrent attempt opened it
				b = own
				return nil, nil
			}
			e, err := session.NewEvent(wire.TypeCompactionStart, next, c.a.nowMs(),
				compactionStart{CompactionID: id, SourceCommandID: c.in.CommandID, Turn: turnOwner(c.in.Turn)})
			if err != nil {
				return nil, err
			}
			b.start, b.id = next, id
			return []session.Event{e}, nil
		})
		if err != nil {
			return CompactResult{}, activities.MapError(err)
		}
	}
	if end == 0 {
		return c.close(ctx, errSummaryTooLong.Error())
	}
	for {
		sum, err := c.call(ctx, nodes[:end])
		if ctx.Err() != nil {
			return CompactResult{}, c.cancelled(ctx)
		}
		var pe *provider.Error
		if errors.As(err, &pe) && pe.Code == provider.CodeContextWindowExceeded {
			// The window is smaller than known: halve the span.
			cuts := balancedCuts(nodes)
			half := end / 2
			for half > 0 && !cuts[half] {
				half--
			}
			if half == 0 {
				return c.close(ctx, "summarization: "+pe.Error())
			}
			end = half
			continue
		}
		if err != nil {
			if pe != nil && pe.Retryable {
				return CompactResult{}, providerError(err)
			}
			var failed *summaryFailure
			if errors.As(err, &failed) || pe != nil {
				return c.close(ctx, err.Error())
			}
			return CompactResult{}, providerError(err)
		}
		res, err := c.commit(ctx, b, nodes[:end], sum)
		if err != nil {
			return CompactResult{}, err
		}
		if c.in.Trigger != TriggerPressure {
			// The span is done when its last piece is; under pressure,
			// when the request is below the threshold (measured).
			res.Done = end == want
		}
		return res, nil
	}
}

// summaryFailure is a summary the compaction cannot use.
type summaryFailure struct{ msg string }

func (f *summaryFailure) Error() string { return f.msg }

// call streams the summarisation of nodes and returns the summary record
// (without its compaction id and range).
func (c *compaction) call(ctx context.Context, nodes []pricedNode) (compactionSummary, error) {
	req := c.summaryRequest(nodes)
	mc := &modelCall{a: c.a, in: ModelInput{Ref: c.in.Ref, Provider: c.in.Provider, Model: c.in.Model}}
	ctx, span := c.a.startSummary(ctx, req)
	f := newFold()
	hb := c.a.Runtime.Heartbeat(ctx, func() any { return wire.ModelProgress{} })
	err := mc.stream(ctx, c.p, req, func(ch provider.Chunk) error {
		return hb.Step(func() error { return f.Push(ch, c.a.nowMs()) })
	})
	hb.Stop()
	endSummary(span, err)
	if err != nil {
		return compactionSummary{}, err
	}
	switch f.Finish() {
	case provider.FinishStop, provider.FinishToolCalls:
	case provider.FinishMaxTokens:
		return compactionSummary{}, &summaryFailure{"summarization truncated at the token cap (incomplete checkpoint)"}
	default:
		return compactionSummary{}, &provider.Error{Retryable: true, Message: "the summarization stream ended without a finish"}
	}
	raw := f.Content()
	var text []provider.Block
	for _, blk := range raw {
		if blk.Type == provider.BlockText && blk.Text != "" {
			text = append(text, blk)
		}
	}
	if len(text) == 0 {
		return compactionSummary{}, &summaryFailure{"summarization produced no text summary content"}
	}
	return compactionSummary{Summary: text, RawOutput: raw, LLMStreamCall: true,
		Provider: c.in.Provider, Model: c.in.Model, MaxTokens: req.MaxTokens, Usage: f.Usage()}, nil
}

// commit stores the summary of nodes, its replacement and the end of b in
// one batch, unless the summary is not smaller than what it replaces: then
// the end records that.
func (c *compaction) commit(ctx context.Context, b bracket, nodes []pricedNode, sum compactionSummary) (CompactResult, error) {
	sum.CompactionID, sum.SourceCommandID = b.id, c.in.CommandID
	shadowed := 0
	for _, n := range nodes {
		sum.ShadowedSeqs = append(sum.ShadowedSeqs, n.seq)
		shadowed += n.tokens
	}
	sum.ShadowedRange = shadowedRange{Start: nodes[0].seq, End: nodes[len(nodes)-1].seq}
	sum.ShadowedTokenCount = shadowed
	framed := provider.EstimateMessage(provider.Message{Role: provider.RoleUser, Content: frameSummary(sum.Summary)})
	if framed >= shadowed {
		return c.close(ctx, fmt.Sprintf("summary is not smaller than the shadowed content (%d estimated framed tokens >= %d)", framed, shadowed))
	}
	var res CompactResult
	next, err := c.h.Update(ctx, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
		own, err := ownBracket(tail, c.in.After)
		if err != nil {
			return nil, err
		}
		if own.summarySeq >= 0 || own.endSeq >= 0 || own.start != b.start {
			res = own.result(next) // a concurrent attempt finished it
			return nil, nil
		}
		now := c.a.nowMs()
		se, err := session.NewEvent(wire.TypeCompactionSummary, next, now, sum)
		if err != nil {
			return nil, err
		}
		ue, err := checkpointEvent(next+1, now, b.start, next, sum, uuid.NewString())
		if err != nil {
			return nil, err
		}
		ee, err := c.endEvent(next+2, b.id, "")
		if err != nil {
			return nil, err
		}
		b.summarySeq, b.summary, b.endSeq = next, sum, next+2
		res = b.result(next + 3)
		return []session.Event{se, ue, ee}, nil
	})
	if err != nil {
		return CompactResult{}, activities.MapError(err)
	}
	res.NextSeq = next
	tail, _, err := c.h.Tail(ctx, 0)
	if err != nil {
		return CompactResult{}, activities.MapError(err)
	}
	return c.measured(tail, res)
}

// cancelled closes the bracket of a compaction whose activity was
// cancelled (the turn was), and returns the cancellation.
func (c *compaction) cancelled(ctx context.Context) error {
	var canceled *temporal.CanceledError
	if errors.As(context.Cause(ctx), &canceled) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), compactTimeout)
		defer cancel()
		if _, err := c.close(sctx, "compaction was cancelled"); err != nil {
			slog.Warn("agent: closing a cancelled compaction failed", "session", c.in.Ref.SessionID, "error", err)
		}
	}
	return ctx.Err()
}
