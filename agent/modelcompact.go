package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// route is the route of the call as request/context records it: the
// provider, the model and, when known, the context window.
func (c *modelCall) route() routeData {
	return routeData{Provider: c.in.Provider, Model: c.in.Model, ContextWindow: c.window}
}

// pressure measures req, the request about to be sent (docs/FORMAT.md §9
// "Tokens"): the messages are priced from the conversation already
// decoded, anchored on the provider's usage of the last call.
func (c *modelCall) pressure(req provider.Request) int {
	nodes := make([]pricedNode, len(req.Messages))
	for i, m := range req.Messages {
		nodes[i] = pricedNode{seq: c.seqs[i], msg: m, ok: true, tokens: provider.EstimateMessage(m)}
	}
	anchor, ok := lastUsage(c.read)
	return pressure(provider.EstimateEnvelope(req.System, req.Tools), nodes, anchor, ok, c.route())
}

// overflowChunk is the data of the assistant/chunk that records a
// provider's refusal as the finish of a call, the harness's shape.
type overflowChunk struct {
	Turn  int64 `json:"turn"`
	Step  int64 `json:"step"`
	Chunk struct {
		Type   string `json:"type"`
		Reason struct {
			Kind    string `json:"kind"`
			Failure struct {
				Message string `json:"message"`
				Code    string `json:"code"`
			} `json:"failure"`
		} `json:"reason"`
	} `json:"chunk"`
}

// overflows returns the context-exceeded refusals tail records for the
// call's step (after its last step/start), oldest first.
func (c *modelCall) overflows(tail []session.Event) []provider.Error {
	start := -1
	for i := len(tail) - 1; i >= 0; i-- {
		if tail[i].Type != wire.TypeStepStart {
			continue
		}
		if ss, err := tail[i].StepStart(); err == nil && ss.Turn == c.in.Turn && ss.Step == c.in.Step {
			start = i
			break
		}
	}
	if start < 0 {
		return nil
	}
	var out []provider.Error
	for _, e := range tail[start+1:] {
		if e.Type != wire.TypeAssistantChunk {
			continue
		}
		var d overflowChunk
		if json.Unmarshal(e.Data, &d) != nil || d.Turn != c.in.Turn || d.Step != c.in.Step {
			continue
		}
		if d.Chunk.Type == string(provider.ChunkFinish) && d.Chunk.Reason.Kind == "error" && d.Chunk.Reason.Failure.Code == provider.CodeContextWindowExceeded {
			out = append(out, provider.Error{Code: d.Chunk.Reason.Failure.Code, Message: d.Chunk.Reason.Failure.Message})
		}
	}
	return out
}

// overflowed returns the refusal an earlier attempt of the call stored
// (the step holds more refusals than the workflow compacted for), nil when
// there is none.
func (c *modelCall) overflowed() *provider.Error {
	if got := c.overflows(c.read); len(got) > c.in.Overflows {
		pe := got[len(got)-1]
		return &pe
	}
	return nil
}

// storeOverflow stores the provider's context-exceeded refusal pe as the
// finish chunk of the step's call (preceded by request/context when the
// route changed), as the harness records a failed call, and asks the
// workflow to compact.
func (c *modelCall) storeOverflow(ctx context.Context, pe provider.Error) (ModelResult, error) {
	in := c.in
	var d overflowChunk
	d.Turn, d.Step = in.Turn, in.Step
	d.Chunk.Type = string(provider.ChunkFinish)
	d.Chunk.Reason.Kind = "error"
	d.Chunk.Reason.Failure.Message, d.Chunk.Reason.Failure.Code = pe.Message, provider.CodeContextWindowExceeded
	var stored *storedModelCall
	next, err := c.h.Update(ctx, in.From, func(tail []session.Event, next int64) ([]session.Event, error) {
		var err error
		if stored, err = c.find(tail); err != nil || stored != nil {
			return nil, err
		}
		if len(c.overflows(tail)) > in.Overflows {
			return nil, nil // a concurrent attempt stored it
		}
		if !c.continues(tail) {
			return nil, temporal.NewApplicationError(fmt.Sprintf(
				"model call of turn %d step %d: the log changed since its conversation was read", in.Turn, in.Step), wire.ErrTypeIO)
		}
		now := c.a.nowMs()
		var batch []session.Event
		if route := c.route(); lastRoute(tail) != route {
			e, err := session.NewEvent(wire.TypeRequestContext, next, now, route)
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
		}
		e, err := session.NewEvent(wire.TypeAssistantChunk, next+int64(len(batch)), now, d)
		if err != nil {
			return nil, err
		}
		return append(batch, e), nil
	})
	if err != nil {
		return ModelResult{}, activities.MapError(err)
	}
	if stored != nil {
		return stored.result(next, true), nil
	}
	return ModelResult{MessageSeq: -1, NextSeq: next, Compact: TriggerOverflow, Failure: &pe, Window: c.window}, nil
}
