package workflows_test

// A turn over the real agent activities whose tools come from an MCP
// server: this test binary, re-run as a stdio MCP server.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/tool/mcptool"
	"github.com/sessionflow/sessionflow/wire"
)

// envMCPServer makes the test binary serve MCP on stdio instead of testing.
const envMCPServer = "SESSIONFLOW_TESTSUITE_MCP_SERVER"

func init() {
	if os.Getenv(envMCPServer) != "1" {
		return
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "note", Description: "Take a note.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted: " + args.Text}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "crash", Description: "Exit mid-call.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestRealTurnMCPTools: a turn calls a tool of a stdio MCP server, then one
// that makes the server exit mid-call (an isError TOOL_FAILED result, the
// turn goes on), then the first again, answered by the restarted server.
func TestRealTurnMCPTools(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"notes": {Command: exe, Env: map[string]string{envMCPServer: "1"}},
	}}, mcptool.Options{RestartBackoff: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })

	h := sessiontest.NewHarness(t).WithID("rmcp")
	acts := sessiontest.AgentActivities(h, provider.Set{"scripted": sessiontest.ScriptedProvider(t,
		scripted.Response{ToolCalls: []scripted.Call{
			{ID: "c1", Name: "notes__note", Arguments: `{"text":"a"}`},
			{ID: "c2", Name: "notes__crash", Arguments: `{}`},
		}},
		scripted.Response{ToolCalls: []scripted.Call{{ID: "c3", Name: "notes__note", Arguments: `{"text":"b"}`}}},
		scripted.Text("done"),
	)})
	require.NoError(t, b.Register(acts.Tools.(*tool.Registry)))
	h.Env.RegisterActivity(acts)

	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "rmcp", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: t.TempDir()}}, sessiontest.Prompt("take notes"))
	sessiontest.RequireBalanced(t, evs)
	type res struct {
		id, text, code string
		isError        bool
	}
	var got []res
	for _, e := range evs {
		if e.Type != wire.TypeToolResult {
			continue
		}
		r, err := e.ToolResult()
		require.NoError(t, err)
		c := r.Message.Content[0]
		x := res{id: r.Message.Source.CallID, text: c.Content[0].Text, isError: c.IsError}
		if r.Error != nil {
			x.code = r.Error.Code
		}
		got = append(got, x)
	}
	require.Equal(t, []res{
		{id: "c1", text: "noted: a"},
		{id: "c2", isError: true, code: "TOOL_FAILED", text: `Error: tool "notes__crash" failed: MCP server "notes" exited (exit status 3) during the call; ` +
			`the call's effects are unknown; the server is restarted for the next call`},
		{id: "c3", text: "noted: b"},
	}, got)
	require.Equal(t, "done", assistantOf(t, evs[len(evs)-3]).Message.Content[0].Text)
	require.Equal(t, []string{"completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}
