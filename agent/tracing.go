package agent

import (
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/tool"
)

// The spans of the agent activities follow the OpenTelemetry GenAI
// semantic conventions: a "chat <model>" span per model call and an
// "execute_tool <name>" span per tool call, children of the activity's
// span when the worker runs the Temporal tracing interceptor. Prompts,
// responses, tool arguments and results are recorded only when
// Activities.TraceContent is set.

// TracerScope is the instrumentation scope of the agent's spans.
const TracerScope = "github.com/sessionflow/sessionflow/agent"

// GenAI semantic convention attribute names the agent's spans carry.
const (
	AttrOperationName      = "gen_ai.operation.name"
	AttrProviderName       = "gen_ai.provider.name"
	AttrSystem             = "gen_ai.system"
	AttrRequestModel       = "gen_ai.request.model"
	AttrRequestMaxTokens   = "gen_ai.request.max_tokens"
	AttrResponseFinish     = "gen_ai.response.finish_reasons"
	AttrUsageInputTokens   = "gen_ai.usage.input_tokens"
	AttrUsageOutputTokens  = "gen_ai.usage.output_tokens"
	AttrConversationID     = "gen_ai.conversation.id"
	AttrSystemInstructions = "gen_ai.system_instructions"
	AttrInputMessages      = "gen_ai.input.messages"
	AttrOutputMessages     = "gen_ai.output.messages"
	AttrToolName           = "gen_ai.tool.name"
	AttrToolCallID         = "gen_ai.tool.call.id"
	AttrToolType           = "gen_ai.tool.type"
	AttrToolCallArguments  = "gen_ai.tool.call.arguments"
	AttrToolCallResult     = "gen_ai.tool.call.result"
	AttrErrorType          = "error.type"
)

// sessionflow's own attributes on the agent's spans.
const (
	attrTurn   = "sessionflow.turn"
	attrStep   = "sessionflow.step"
	attrReused = "sessionflow.reused"
	attrReran  = "sessionflow.tool.reran"
)

func (a *Activities) tracer() trace.Tracer {
	tp := a.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(TracerScope)
}

// startChat starts the span of a model call.
func (a *Activities) startChat(ctx context.Context, in ModelInput) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		attribute.String(AttrOperationName, "chat"),
		attribute.String(AttrProviderName, in.Provider),
		attribute.String(AttrSystem, in.Provider),
		attribute.String(AttrRequestModel, in.Model),
		attribute.String(AttrConversationID, in.Ref.SessionID),
		attribute.Int64(attrTurn, in.Turn),
		attribute.Int64(attrStep, in.Step),
	}
	if in.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int64(AttrRequestMaxTokens, in.MaxTokens))
	}
	return a.tracer().Start(ctx, "chat "+in.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// attrPurpose names why a model call is made: "compaction" for a
// summarisation.
const attrPurpose = "sessionflow.purpose"

// startSummary starts the span of a compaction's summarisation call.
func (a *Activities) startSummary(ctx context.Context, req provider.Request) (context.Context, trace.Span) {
	return a.tracer().Start(ctx, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(AttrOperationName, "chat"),
		attribute.String(AttrProviderName, req.Provider),
		attribute.String(AttrSystem, req.Provider),
		attribute.String(AttrRequestModel, req.Model),
		attribute.String(AttrConversationID, req.SessionID),
		attribute.Int64(AttrRequestMaxTokens, req.MaxTokens),
		attribute.String(attrPurpose, req.Purpose),
	))
}

// endSummary ends a summarisation call's span.
func endSummary(span trace.Span, err error) {
	if err != nil {
		setError(span, err)
	}
	span.End()
}

// endChat ends a model call's span with its outcome.
func endChat(span trace.Span, res ModelResult, err error) {
	if err == nil {
		if res.Finish != "" {
			span.SetAttributes(attribute.StringSlice(AttrResponseFinish, []string{string(res.Finish)}))
		}
		if u := res.Usage; u != nil {
			span.SetAttributes(attribute.Int64(AttrUsageInputTokens, u.InputTokens), attribute.Int64(AttrUsageOutputTokens, u.OutputTokens))
		}
		if res.Reused {
			span.SetAttributes(attribute.Bool(attrReused, true))
		}
	} else {
		setError(span, err)
	}
	span.End()
}

// traceRequest records the request's content on the model call's span
// when content is traced.
func (a *Activities) traceRequest(ctx context.Context, req provider.Request) {
	if !a.TraceContent {
		return
	}
	span := trace.SpanFromContext(ctx)
	if req.System != "" {
		span.SetAttributes(attribute.String(AttrSystemInstructions, jsonText([]map[string]string{{"type": "text", "content": req.System}})))
	}
	span.SetAttributes(attribute.String(AttrInputMessages, jsonText(conventionMessages(req.Messages))))
}

// traceResponse records the response's content on the model call's span
// when content is traced.
func (a *Activities) traceResponse(ctx context.Context, content []provider.Block, finish provider.FinishReason) {
	if !a.TraceContent {
		return
	}
	m := conventionMessages([]provider.Message{{Role: provider.RoleAssistant, Content: content}})
	if len(m) == 1 {
		m[0]["finish_reason"] = string(finish)
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String(AttrOutputMessages, jsonText(m)))
}

// startTool starts the span of a tool call.
func (a *Activities) startTool(ctx context.Context, in ToolInput) (context.Context, trace.Span) {
	name := "execute_tool"
	if in.Name != "" {
		name += " " + in.Name
	}
	return a.tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String(AttrOperationName, "execute_tool"),
		attribute.String(AttrToolName, in.Name),
		attribute.String(AttrToolCallID, in.CallID),
		attribute.String(AttrToolType, "function"),
		attribute.String(AttrConversationID, in.Ref.SessionID),
		attribute.Int64(attrTurn, in.Turn),
		attribute.Int64(attrStep, in.Step),
	))
}

// endTool ends a tool call's span: an error status for an isError result
// (error.type its code) or a failed activity.
func endTool(span trace.Span, out ToolOutcome, err error) {
	switch {
	case err != nil:
		setError(span, err)
	case out.IsError:
		code := out.Code
		if code == "" {
			code = "TOOL_ERROR"
		}
		span.SetAttributes(attribute.String(AttrErrorType, code))
		span.SetStatus(codes.Error, "tool result is an error: "+code)
	}
	if out.Reran {
		span.SetAttributes(attribute.Bool(attrReran, true))
	}
	span.End()
}

// traceToolRun records a tool run's arguments and result on the tool
// call's span when content is traced.
func (a *Activities) traceToolRun(ctx context.Context, args string, res tool.Result) {
	if !a.TraceContent {
		return
	}
	trace.SpanFromContext(ctx).SetAttributes(
		attribute.String(AttrToolCallArguments, args),
		attribute.String(AttrToolCallResult, jsonText(res.Content)),
	)
}

// setError marks span failed by err; a cancellation is recorded as such.
func setError(span trace.Span, err error) {
	typ := "_OTHER"
	var app *temporal.ApplicationError
	switch {
	case errors.As(err, &app) && app.Type() != "":
		typ = app.Type()
	case errors.Is(err, context.Canceled):
		typ = "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		typ = "timeout"
	}
	span.SetAttributes(attribute.String(AttrErrorType, typ))
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// conventionMessages renders messages in the GenAI conventions' message
// shape: {role, parts: [{type: text|reasoning|tool_call|tool_call_response, ...}]}.
func conventionMessages(msgs []provider.Message) []map[string]any {
	out := make([]map[string]any, 0, len(msgs))
	for _, m := range msgs {
		parts := make([]map[string]any, 0, len(m.Content))
		for _, b := range m.Content {
			switch b.Type {
			case provider.BlockText:
				parts = append(parts, map[string]any{"type": "text", "content": b.Text})
			case provider.BlockReasoning:
				parts = append(parts, map[string]any{"type": "reasoning", "content": b.Text})
			case provider.BlockToolCall:
				parts = append(parts, map[string]any{"type": "tool_call", "id": b.ID, "name": b.Name, "arguments": json.RawMessage(validJSON(b.Arguments))})
			case provider.BlockToolResult:
				parts = append(parts, map[string]any{"type": "tool_call_response", "id": b.ToolCallID, "response": b.Content})
			}
		}
		role := m.Role
		if len(m.Content) > 0 && allToolResults(m.Content) {
			role = "tool"
		}
		out = append(out, map[string]any{"role": role, "parts": parts})
	}
	return out
}

func allToolResults(blocks []provider.Block) bool {
	for _, b := range blocks {
		if b.Type != provider.BlockToolResult {
			return false
		}
	}
	return true
}

// validJSON returns s when it is JSON, else s as a JSON string.
func validJSON(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
