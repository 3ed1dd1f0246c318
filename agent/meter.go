package agent

import (
	"encoding/json"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The compaction meter (docs/FORMAT.md §9): the conversation's surface as
// priced nodes, and the pressure of the next request, measured as the
// harness's token meter measures it: the provider's reported usage of the
// last call whose route is still the route, plus the estimate of what the
// surface gained or lost since; the estimate of the whole request when no
// such call exists.

// pricedNode is one node of the surface: the event at seq, its message and
// its estimated tokens, and the tool calls it opens (an assistant message's
// tool-call blocks) or closes (a tool result: 1).
type pricedNode struct {
	seq    int64
	typ    string
	msg    provider.Message
	ok     bool // msg is sendable (a message event with content)
	tokens int
	opens  int
	closes int
}

// surfaceNodes returns the surface of a whole log (events from seq 0) as
// priced nodes, in surface order, and the index in events of each.
func surfaceNodes(events []session.Event) ([]pricedNode, error) {
	order, err := surfaceOrder(events)
	if err != nil {
		return nil, err
	}
	var out []pricedNode
	for _, i := range order {
		e := events[i]
		if !isMessageEvent(e.Type) {
			continue
		}
		msg, ok, err := messageOf(e)
		if err != nil {
			return nil, err
		}
		n := pricedNode{seq: e.Seq, typ: e.Type, msg: msg, ok: ok}
		if ok {
			n.tokens = provider.EstimateMessage(msg)
		} else {
			n.tokens = provider.EstimateMessage(provider.Message{})
		}
		switch e.Type {
		case wire.TypeAssistantMessage:
			for _, b := range msg.Content {
				if b.Type == provider.BlockToolCall {
					n.opens++
				}
			}
		case wire.TypeToolResult:
			n.closes = 1
		}
		out = append(out, n)
	}
	return out, nil
}

// balancedCuts returns, for a surface of n nodes, the n+1 cuts between
// them: cut i (before node i; n is after the last) is balanced when every
// tool call opened before it has its result before it (the harness's
// toolPairingBalancedBefore).
func balancedCuts(nodes []pricedNode) []bool {
	cuts := make([]bool, len(nodes)+1)
	cuts[0] = true
	open := 0
	for i, n := range nodes {
		open += n.opens - n.closes
		cuts[i+1] = open <= 0
	}
	return cuts
}

// selectRange is the harness's head-anchored range to compact: from the
// first node through the last node before a retained tail of at least
// retain tokens, moved back until the cut before the tail is balanced. ok
// is false when nothing can be compacted. The range is [0, end) in node
// indexes.
func selectRange(nodes []pricedNode, retain int) (end int, ok bool) {
	if len(nodes) == 0 {
		return 0, false
	}
	acc, keep := 0, len(nodes)
	for i := len(nodes) - 1; i >= 0; i-- {
		acc += nodes[i].tokens
		keep = i
		if acc >= retain {
			break
		}
	}
	cuts := balancedCuts(nodes)
	for keep > 0 && !cuts[keep] {
		keep--
	}
	return keep, keep > 0
}

// usageAnchor is the last assistant/message of a log with provider usage:
// its seq, its tokens (input, cache reads and output), and the route of the
// request/context in force when it was stored.
type usageAnchor struct {
	seq    int64
	tokens int64
	route  routeData
}

// lastUsage finds the usage anchor of events (a whole log): ok is false
// when no message reports usage, or when the surface was replaced since
// the anchor (a compaction or a pruning): the anchor's usage then counts
// what the model no longer gets, and the request is estimated instead until
// a call reports usage again.
func lastUsage(events []session.Event) (usageAnchor, bool) {
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.SurfaceOp != nil && e.SurfaceOp.Op == session.SurfaceReplace {
			return usageAnchor{}, false
		}
		if e.Type != wire.TypeAssistantMessage {
			continue
		}
		var d struct {
			Usage *provider.Usage `json:"usage"`
		}
		if json.Unmarshal(e.Data, &d) != nil || d.Usage == nil {
			continue
		}
		u := d.Usage
		return usageAnchor{seq: e.Seq, tokens: u.InputTokens + u.CacheReadTokens + u.OutputTokens, route: lastRoute(events[:i])}, true
	}
	return usageAnchor{}, false
}

// pressure is the measured size of the next request: envelope is the
// estimate of its system prompt and tools, nodes the surface. The provider's
// usage of the anchor call counts for the nodes up to the anchor when the
// route is unchanged since and the usage is at least their estimate; the
// nodes after the anchor (or all of them, without one) are estimated.
func pressure(envelope int, nodes []pricedNode, anchor usageAnchor, anchored bool, route routeData) int {
	total := envelope
	for _, n := range nodes {
		total += n.tokens
	}
	if !anchored || anchor.route != route {
		return total
	}
	before := envelope
	at := -1
	for i, n := range nodes {
		before += n.tokens
		if n.seq == anchor.seq {
			at = i
			break
		}
	}
	if at < 0 || anchor.tokens < int64(before) {
		return total // shadowed by a compaction since, or usage below the estimate
	}
	return int(anchor.tokens) + total - before
}
