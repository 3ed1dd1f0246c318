package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/tool/mcptool"
	"github.com/sessionflow/sessionflow/wire"
)

// TestTurnCallsMCPTools: a step whose model calls two tools of an MCP
// server (streamable HTTP, in process): the read-only one is offered as
// parallel-safe, RunTool stores each server's answer as the call's
// tool/result (the failing one as an isError TOOL_FAILED result), and the
// next model call sees both.
func TestTurnCallsMCPTools(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{
		Name: "lookup", Description: "Look a key up.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Key string }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found: " + args.Key}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "remove", Description: "Remove a key.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such key"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"kb": {URL: ts.URL}}}, mcptool.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })

	f := newFixture(t, newTools(t, b.Tools()...),
		toolCalls([3]string{"call-1", "kb__lookup", `{"key":"x"}`}, [3]string{"call-2", "kb__remove", `{}`}),
		answer("x is there"))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.Equal(t, []agent.CallRef{{ID: "call-1", Name: "kb__lookup", Parallel: true}, {ID: "call-2", Name: "kb__remove"}}, res.ToolCalls)

	out1, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 0, "call-1", "kb__lookup"))
	require.NoError(t, err)
	require.False(t, out1.IsError)
	out2, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 1, "call-2", "kb__remove"))
	require.NoError(t, err)
	require.True(t, out2.IsError)
	require.Equal(t, "TOOL_FAILED", out2.Code)

	log := f.log()
	var results []map[string]any
	for _, e := range log {
		if e.Type == wire.TypeToolResult {
			results = append(results, dataOf(t, e))
		}
	}
	require.Len(t, results, 2)
	first := results[0]["message"].(map[string]any)["content"].([]any)[0].(map[string]any)
	require.Equal(t, "call-1", first["toolCallId"])
	require.Equal(t, "found: x", first["content"].([]any)[0].(map[string]any)["text"])
	require.Equal(t, map[string]any{"mcpServer": "kb", "mcpTool": "lookup"}, results[0]["meta"])
	second := results[1]["message"].(map[string]any)["content"].([]any)[0].(map[string]any)
	require.Equal(t, true, second["isError"])
	require.Equal(t, "no such key", second["content"].([]any)[0].(map[string]any)["text"])
	require.Equal(t, map[string]any{"name": "ToolFailedError", "code": "TOOL_FAILED"}, results[1]["error"])

	f.append(ev(t, wire.TypeStepEnd, out2.NextSeq, `{"turn":1,"step":1}`), ev(t, wire.TypeStepStart, out2.NextSeq+1, `{"turn":1,"step":2}`))
	in := f.modelInput(1, 2)
	res2, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, provider.FinishStop, res2.Finish)
	msgs, err := agent.Conversation(f.log())
	require.NoError(t, err)
	require.Equal(t, "found: x", msgs[2].Content[0].Content[0].Text)
	require.Equal(t, "no such key", msgs[3].Content[0].Content[0].Text)
}
