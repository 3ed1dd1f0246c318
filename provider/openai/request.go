package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/sessionflow/sessionflow/provider"
)

// params maps a provider request to Chat Completions parameters. The SDK
// adds "stream": true itself.
func (p *Provider) params(req provider.Request) (sdk.ChatCompletionNewParams, *provider.Error) {
	var params sdk.ChatCompletionNewParams
	model := req.Model
	if model == "" {
		model = p.model
	}
	if model == "" {
		return params, &provider.Error{Code: CodeInvalidRequest, Message: "the request names no model and the provider has no default model"}
	}
	params.Model = shared.ChatModel(model)
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		msgs, err := p.messages(m)
		if err != nil {
			return params, &provider.Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("message %d: %v", i, err)}
		}
		params.Messages = append(params.Messages, msgs...)
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		schema := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		if len(t.Schema) > 0 {
			schema = nil
			if err := json.Unmarshal(t.Schema, &schema); err != nil || schema == nil {
				return params, &provider.Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("tool %q: its schema is not a JSON object", t.Name)}
			}
		}
		fn.Parameters = schema
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	if req.MaxTokens > 0 {
		if p.maxField == MaxCompletionTokens {
			params.MaxCompletionTokens = sdk.Int(req.MaxTokens)
		} else {
			params.MaxTokens = sdk.Int(req.MaxTokens)
		}
	}
	if req.ReasoningEffort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	params.StreamOptions.IncludeUsage = sdk.Bool(true)
	return params, nil
}

// messages maps one provider message to chat messages. A user message's
// tool results become "tool" messages, in order, followed by one "user"
// message with its text (text blocks joined by newlines). An assistant
// message becomes one "assistant" message with its text and tool calls (and
// its reasoning when SendReasoning is set); one that carries none of these
// (an interrupted anchor that only reasoned) is left out.
func (p *Provider) messages(m provider.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case provider.RoleUser:
		var out []sdk.ChatCompletionMessageParamUnion
		var text []string
		for _, b := range m.Content {
			switch b.Type {
			case provider.BlockText:
				text = append(text, b.Text)
			case provider.BlockToolResult:
				out = append(out, sdk.ToolMessage(joinText(b.Content), b.ToolCallID))
			default:
				return nil, fmt.Errorf("a user message cannot carry a %q block", b.Type)
			}
		}
		if len(text) > 0 {
			out = append(out, sdk.UserMessage(strings.Join(text, "\n")))
		}
		return out, nil
	case provider.RoleAssistant:
		var a sdk.ChatCompletionAssistantMessageParam
		var text, reasoning []string
		for _, b := range m.Content {
			switch b.Type {
			case provider.BlockText:
				text = append(text, b.Text)
			case provider.BlockReasoning:
				reasoning = append(reasoning, b.Text)
			case provider.BlockToolCall:
				args := b.Arguments
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       b.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
					},
				})
			default:
				return nil, fmt.Errorf("an assistant message cannot carry a %q block", b.Type)
			}
		}
		if len(text) > 0 {
			a.Content.OfString = sdk.String(strings.Join(text, ""))
		}
		sendReasoning := p.reasoning && len(reasoning) > 0
		if sendReasoning {
			a.SetExtraFields(map[string]any{"reasoning_content": strings.Join(reasoning, "")})
		}
		if len(text) == 0 && len(a.ToolCalls) == 0 && !sendReasoning {
			return nil, nil
		}
		return []sdk.ChatCompletionMessageParamUnion{{OfAssistant: &a}}, nil
	}
	return nil, fmt.Errorf("unknown role %q", m.Role)
}

// joinText joins the text blocks of a tool result.
func joinText(blocks []provider.Block) string {
	var parts []string
	for _, b := range blocks {
		if b.Type == provider.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
