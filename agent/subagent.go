package agent

// The activity side of a subagent call (docs/API.md "Subagents"): the plan
// of the child, and the child's answer as the call's result.

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// Codes of a subagent call's IsError results.
const (
	CodeSubagentCancelled = "SUBAGENT_CANCELLED"
	CodeSubagentFailed    = "SUBAGENT_FAILED"
	CodeSubagentMaxTokens = "SUBAGENT_MAX_TOKENS"
	CodeSubagentRefused   = "SUBAGENT_REFUSED"
)

// subagentNamespace names the child session ids derived from a parent
// session and a call.
var subagentNamespace = uuid.MustParse("6f3c1b1e-2a54-5d0e-9c55-7b6f2f7c9a10")

// ChildSessionID is the id of the child a subagent call of session parent
// starts, the call's tool/call being at seq callSeq: a UUID derived from
// both, so every attempt of the step plans the same child and no two
// calls of a log share one.
func ChildSessionID(parent string, callSeq int64) string {
	return uuid.NewSHA1(subagentNamespace, []byte(parent+"\x00"+strconv.FormatInt(callSeq, 10))).String()
}

// subagentStep is RunTool's work for a subagent call once its tool/call is
// stored: the result an earlier attempt staged; else, with Finish, the
// child's answer; else the plan of the child (start) or the refusal of the
// call (res).
func (c *toolCall) subagentStep(ctx context.Context, block wire.ContentBlock, key string, callSeq int64, created bool) (res stagedResult, staged bool, start *SubagentStart, err error) {
	if !created {
		if r, ok, err := readStaged(ctx, c.h, key); err != nil || ok {
			return r, ok, nil, err
		}
	}
	if f := c.in.Subagent.Finish; f != nil {
		r, err := c.a.subagentAnswer(ctx, *f)
		if err != nil {
			return stagedResult{}, false, nil, err
		}
		return stagedResult{Result: &r}, false, nil, nil
	}
	d := &tool.Delegation{Depth: c.h.Header().DelegationDepth}
	r := c.run1(ctx, block, "", d)
	if d.Plan == nil || r.IsError {
		return stagedResult{Result: &r}, false, nil, nil
	}
	return stagedResult{}, false, &SubagentStart{
		ChildSessionID: ChildSessionID(c.in.Ref.SessionID, callSeq),
		Prompt:         d.Plan.Prompt,
		Label:          d.Plan.Label,
		Depth:          d.Plan.Depth,
	}, nil
}

// subagentAnswer is the result of a subagent call whose child ended as f
// says: the child's final answer (the text of its last non-empty
// assistant message), or, when the child did not complete, the harness's
// failure text with the answer so far.
func (a *Activities) subagentAnswer(ctx context.Context, f SubagentFinish) (tool.Result, error) {
	if f.Reason == nil {
		return tool.ErrorResult(tool.NameFailed, CodeSubagentFailed, "Error: subagent run failed: "+f.Failure), nil
	}
	store, err := a.Runtime.Sessions()
	if err != nil {
		return tool.Result{}, err
	}
	events, err := store.ReadEvents(ctx, f.ChildSessionID, 0, -1)
	if err != nil {
		return tool.Result{}, activities.MapError(err)
	}
	text := finalAnswer(events)
	var headline, code string
	switch f.Reason.Kind {
	case wire.TurnEndCompleted:
		return tool.TextResult(text), nil
	case wire.TurnEndAborted:
		headline, code = "subagent run was cancelled", CodeSubagentCancelled
	case wire.TurnEndMaxTokens:
		headline, code = "subagent run hit its token limit before finishing", CodeSubagentMaxTokens
	case wire.TurnEndBlocked:
		headline, code = "subagent declined the task", CodeSubagentRefused
	default:
		headline, code = "subagent run failed", CodeSubagentFailed
	}
	out := "Error: " + headline
	if text != "" {
		out += "\nPartial output before the run ended:\n" + text
	}
	return tool.ErrorResult(tool.NameFailed, code, out), nil
}

// finalAnswer applies the harness's selection rule to a child's events:
// the text blocks of the last assistant/message with content, joined; else
// the streamed text deltas of recorded assistant/chunk events.
func finalAnswer(events []wire.Event) string {
	var (
		last    []wire.ContentBlock
		partial strings.Builder
	)
	for _, e := range events {
		switch e.Type {
		case wire.TypeAssistantMessage:
			var d struct {
				Message struct {
					Content []wire.ContentBlock `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal(e.Data, &d) == nil && len(d.Message.Content) > 0 {
				last = d.Message.Content
			}
		case wire.TypeAssistantChunk:
			var d struct {
				Chunk struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"chunk"`
			}
			if json.Unmarshal(e.Data, &d) == nil && d.Chunk.Type == "text-delta" {
				partial.WriteString(d.Chunk.Text)
			}
		}
	}
	if last == nil {
		return partial.String()
	}
	var b strings.Builder
	for _, blk := range last {
		if blk.Type == "text" {
			b.WriteString(blk.Text)
		}
	}
	return b.String()
}
