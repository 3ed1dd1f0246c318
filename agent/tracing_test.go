package agent_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
)

// tracedFixture is a fixture whose activities record spans into an
// in-memory exporter; the model calls echo (c1) and a tool the registry
// does not know (c2), then answers.
func tracedFixture(t *testing.T, content bool) (*fixture, *tracetest.InMemoryExporter) {
	var runs atomic.Int64
	f := newFixture(t, newTools(t, echoTool("echo", true, true, &runs)),
		withUsage(toolCalls([3]string{"c1", "echo", `{"text":"secret-arg"}`}, [3]string{"c2", "nope", `{}`}), 7, 3),
		answer("the secret answer"))
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f.acts.TracerProvider = tp
	f.acts.TraceContent = content
	return f, exp
}

func withUsage(r response, in, out int64) response {
	last := len(r.chunks) - 1
	r.chunks = append(r.chunks[:last:last], usage(in, out), r.chunks[last])
	return r
}

// runTracedStep runs the model call of step 1 and its two tool calls.
func runTracedStep(t *testing.T, f *fixture) {
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.Len(t, res.ToolCalls, 2)
	for i, c := range res.ToolCalls {
		_, err := f.runTool(f.acts, agent.ToolInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq, CallID: c.ID, Name: c.Name, Index: i})
		require.NoError(t, err)
	}
}

func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name
	}
	t.Fatalf("no span %q among %q", name, names)
	return tracetest.SpanStub{}
}

func attrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// TestModelAndToolSpans: a model call is a "chat <model>" client span with
// the GenAI attributes (provider, request model, finish reasons, token
// usage); each tool call is an "execute_tool <name>" span with the tool's
// name and call id, in error status (error.type its code) when its result
// is an error. No prompt, response, argument or result text is recorded by
// default.
func TestModelAndToolSpans(t *testing.T) {
	f, exp := tracedFixture(t, false)
	runTracedStep(t, f)
	spans := exp.GetSpans()
	require.Len(t, spans, 3)

	chat := spanNamed(t, spans, "chat m1")
	require.Equal(t, trace.SpanKindClient, chat.SpanKind)
	a := attrs(chat)
	require.Equal(t, "chat", a["gen_ai.operation.name"].AsString())
	require.Equal(t, "fake", a["gen_ai.provider.name"].AsString())
	require.Equal(t, "fake", a["gen_ai.system"].AsString())
	require.Equal(t, "m1", a["gen_ai.request.model"].AsString())
	require.Equal(t, []string{"tool-calls"}, a["gen_ai.response.finish_reasons"].AsStringSlice())
	require.Equal(t, int64(7), a["gen_ai.usage.input_tokens"].AsInt64())
	require.Equal(t, int64(3), a["gen_ai.usage.output_tokens"].AsInt64())
	require.Equal(t, f.hd.Ref().SessionID, a["gen_ai.conversation.id"].AsString())
	require.Equal(t, codes.Unset, chat.Status.Code)

	echo := spanNamed(t, spans, "execute_tool echo")
	a = attrs(echo)
	require.Equal(t, "execute_tool", a["gen_ai.operation.name"].AsString())
	require.Equal(t, "echo", a["gen_ai.tool.name"].AsString())
	require.Equal(t, "c1", a["gen_ai.tool.call.id"].AsString())
	require.Equal(t, codes.Unset, echo.Status.Code)

	nope := spanNamed(t, spans, "execute_tool nope")
	require.Equal(t, codes.Error, nope.Status.Code)
	require.Equal(t, "TOOL_NOT_FOUND", attrs(nope)["error.type"].AsString())

	for _, s := range spans {
		for k, v := range attrs(s) {
			require.NotContains(t, v.String(), "secret", "span %q attribute %s", s.Name, k)
			require.NotContains(t, v.String(), "hello", "span %q attribute %s", s.Name, k)
			require.NotContains(t, v.String(), "be brief", "span %q attribute %s", s.Name, k)
		}
		require.Empty(t, s.Events, s.Name)
	}
}

// TestSpanContentOptIn: with TraceContent the chat span carries the system
// instructions, the input messages and the output message, and the tool
// span the call's arguments and result, in the GenAI conventions' shapes.
func TestSpanContentOptIn(t *testing.T) {
	f, exp := tracedFixture(t, true)
	runTracedStep(t, f)
	in := f.modelInput(1, 2)
	f.append(ev(t, "step/end", int64(len(f.log())), `{"turn":1,"step":1}`), ev(t, "step/start", int64(len(f.log())+1), `{"turn":1,"step":2}`))
	_, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	spans := exp.GetSpans()

	a := attrs(spanNamed(t, spans, "chat m1"))
	require.JSONEq(t, `[{"type":"text","content":"be brief"}]`, a["gen_ai.system_instructions"].AsString())
	require.JSONEq(t, `[{"role":"user","parts":[{"type":"text","content":"hello"}]}]`, a["gen_ai.input.messages"].AsString())
	require.JSONEq(t, `[{"role":"assistant","finish_reason":"tool-calls","parts":[{"type":"text","content":"Let me look."},
		{"type":"tool_call","id":"c1","name":"echo","arguments":{"text":"secret-arg"}},{"type":"tool_call","id":"c2","name":"nope","arguments":{}}]}]`,
		a["gen_ai.output.messages"].AsString())

	a = attrs(spanNamed(t, spans, "execute_tool echo"))
	require.JSONEq(t, `{"text":"secret-arg"}`, a["gen_ai.tool.call.arguments"].AsString())
	require.Contains(t, a["gen_ai.tool.call.result"].AsString(), "echo:secret-arg@")

	// The second call's input holds the tool results.
	var second tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "chat m1" && attrs(s)["sessionflow.step"].AsInt64() == 2 {
			second = s
		}
	}
	require.Contains(t, attrs(second)["gen_ai.input.messages"].AsString(), `{"parts":[{"id":"c1","response":[{"type":"text","text":"echo:secret-arg@`)
	require.Contains(t, attrs(second)["gen_ai.input.messages"].AsString(), `"type":"tool_call_response"}],"role":"tool"}`)
	require.Contains(t, attrs(second)["gen_ai.output.messages"].AsString(), "the secret answer")
}

// TestModelSpanOfRefusedCall: a refused call's span is in error status with
// error.type ProviderRefused.
func TestModelSpanOfRefusedCall(t *testing.T) {
	f := newFixture(t, nil, response{fail: &provider.Error{Status: 400, Message: "bad request"}})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	f.acts.TracerProvider = tp
	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.Error(t, err)
	s := spanNamed(t, exp.GetSpans(), "chat m1")
	require.Equal(t, codes.Error, s.Status.Code)
	require.Equal(t, "ProviderRefused", attrs(s)["error.type"].AsString())
}
