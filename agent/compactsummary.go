package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The summarisation of a span: its request, the span that fits the
// window, the model call, and the batch that commits its summary.

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
