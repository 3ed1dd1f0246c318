package anthropic

import (
	"bytes"
	"encoding/json"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/sessionflow/sessionflow/provider"
)

// MinThinkingBudget is the smallest extended-thinking budget the API
// accepts.
const MinThinkingBudget = 1024

// ThinkingBudget returns the extended-thinking budget (budget_tokens) of a
// reasoning effort: "" and "none" turn thinking off (0); "minimal" and "low"
// give 1024, "medium" 4096, "high" 16384, "xhigh" and "max" 32768. ok is
// false for any other effort.
func ThinkingBudget(effort string) (budget int64, ok bool) {
	switch effort {
	case "", "none":
		return 0, true
	case "minimal", "low":
		return MinThinkingBudget, true
	case "medium":
		return 4096, true
	case "high":
		return 16384, true
	case "xhigh", "max":
		return 32768, true
	}
	return 0, false
}

// params builds the Messages request of req.
//
// max_tokens is req.MaxTokens, or the provider's default when it is 0. With
// thinking on, the budget must stay below max_tokens: a request without
// MaxTokens gets the default plus the budget (the answer keeps the default's
// room); a request with MaxTokens gets the budget capped at MaxTokens-1, and
// is refused when that leaves less than MinThinkingBudget.
func (p *Provider) params(req provider.Request) (sdk.MessageNewParams, error) {
	var out sdk.MessageNewParams
	if req.Model == "" {
		return out, invalidRequest("no model")
	}
	budget, ok := ThinkingBudget(req.ReasoningEffort)
	if !ok {
		return out, invalidRequest("unknown reasoning effort %q (want none, minimal, low, medium, high, xhigh or max)", req.ReasoningEffort)
	}
	maxTokens := req.MaxTokens
	switch {
	case maxTokens < 0:
		return out, invalidRequest("maxTokens %d is negative", maxTokens)
	case maxTokens == 0:
		maxTokens = p.maxTokens + budget
	case budget > 0 && budget >= maxTokens:
		budget = maxTokens - 1
		if budget < MinThinkingBudget {
			return out, invalidRequest("maxTokens %d leaves no room for reasoning effort %q: thinking needs at least %d tokens below maxTokens",
				req.MaxTokens, req.ReasoningEffort, MinThinkingBudget)
		}
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return out, err
	}
	tools, err := tools(req.Tools)
	if err != nil {
		return out, err
	}
	out.Model = sdk.Model(req.Model)
	out.MaxTokens = maxTokens
	out.Messages = msgs
	out.Tools = tools
	if req.System != "" {
		out.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	if budget > 0 {
		out.Thinking = sdk.ThinkingConfigParamOfEnabled(budget)
	}
	return out, nil
}

// messages maps the conversation. A reasoning block goes back as a thinking
// block only with its signature (the API refuses an unsigned one; a block
// without one came from another provider or an interrupted call and is left
// out); an empty text block is left out (the API refuses it); a message left
// empty is left out.
func messages(in []provider.Message) ([]sdk.MessageParam, error) {
	out := make([]sdk.MessageParam, 0, len(in))
	for i, m := range in {
		var blocks []sdk.ContentBlockParamUnion
		for j, b := range m.Content {
			bad := func() error {
				return invalidRequest("message %d (%s) block %d: a %q block has no place in a %s message", i, m.Role, j, b.Type, m.Role)
			}
			switch {
			case b.Type == provider.BlockText:
				if b.Text != "" {
					blocks = append(blocks, sdk.NewTextBlock(b.Text))
				}
			case b.Type == provider.BlockReasoning && m.Role == provider.RoleAssistant:
				if b.Signature != "" {
					blocks = append(blocks, sdk.NewThinkingBlock(b.Signature, b.Text))
				}
			case b.Type == provider.BlockToolCall && m.Role == provider.RoleAssistant:
				blocks = append(blocks, sdk.NewToolUseBlock(b.ID, toolInput(b.Arguments), b.Name))
			case b.Type == provider.BlockToolResult && m.Role == provider.RoleUser:
				r := sdk.ToolResultBlockParam{ToolUseID: b.ToolCallID}
				if b.IsError {
					r.IsError = param.NewOpt(true)
				}
				for k, c := range b.Content {
					if c.Type != provider.BlockText {
						return nil, invalidRequest("message %d block %d: tool result content %d is a %q block, not text", i, j, k, c.Type)
					}
					if c.Text != "" {
						r.Content = append(r.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: c.Text}})
					}
				}
				blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: &r})
			default:
				return nil, bad()
			}
		}
		if len(blocks) == 0 {
			continue
		}
		switch m.Role {
		case provider.RoleUser:
			out = append(out, sdk.NewUserMessage(blocks...))
		case provider.RoleAssistant:
			out = append(out, sdk.NewAssistantMessage(blocks...))
		default:
			return nil, invalidRequest("message %d has role %q (want user or assistant)", i, m.Role)
		}
	}
	return out, nil
}

// toolInput is the input object of a tool_use block: the call's arguments
// when they are a JSON object, else {} (the API accepts only an object; the
// arguments of a call the model made through this API always are one, and
// a call whose arguments were not got an INVALID_ARGUMENTS result the model
// reads).
func toolInput(args string) json.RawMessage {
	raw := bytes.TrimSpace([]byte(args))
	if len(raw) > 0 && raw[0] == '{' && json.Valid(raw) {
		return raw
	}
	return json.RawMessage(`{}`)
}

// tools maps the offered tools; a tool's schema is sent verbatim as its
// input_schema ({"type":"object"} when empty).
func tools(in []provider.Tool) ([]sdk.ToolUnionParam, error) {
	var out []sdk.ToolUnionParam
	for _, t := range in {
		schema := bytes.TrimSpace(t.Schema)
		if len(schema) == 0 {
			schema = []byte(`{"type":"object"}`)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(schema, &obj); err != nil || obj == nil {
			return nil, invalidRequest("tool %q: the schema is not a JSON object", t.Name)
		}
		tp := sdk.ToolParam{
			Name:        t.Name,
			InputSchema: param.Override[sdk.ToolInputSchemaParam](json.RawMessage(schema)),
		}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		out = append(out, sdk.ToolUnionParam{OfTool: &tp})
	}
	return out, nil
}
