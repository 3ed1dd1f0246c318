package workerapp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/tool"
)

func writeMCPConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.json")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func TestParseArgsMCPConfig(t *testing.T) {
	good := writeMCPConfig(t, `{"mcpServers":{"kb":{"url":"http://127.0.0.1:1/mcp"}}}`)
	cfg, err := ParseArgs([]string{"--mcp-config", good}, nil)
	require.NoError(t, err)
	require.Equal(t, good, cfg.Agent.MCPConfig)

	cfg, err = ParseArgs(nil, []string{EnvMCPConfig + "=" + good})
	require.NoError(t, err)
	require.Equal(t, good, cfg.Agent.MCPConfig)

	bad := writeMCPConfig(t, `{"mcpServers":{"kb":{"type":"sse","url":"http://127.0.0.1:1/sse"}}}`)
	_, err = ParseArgs(nil, []string{EnvMCPConfig + "=" + bad})
	require.EqualError(t, err, EnvMCPConfig+": "+bad+`: mcptool: invalid configuration: server "kb": the legacy "sse" transport is not supported; use a streamable HTTP endpoint ("type": "http")`)
	_, err = ParseArgs([]string{"--mcp-config", filepath.Join(t.TempDir(), "absent.json")}, nil)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestStartMCPOffersTheServersTools: the worker's agent activities get the
// tools of the configured MCP server beside the built-in ones, and calls
// reach the server until the servers are stopped.
func TestStartMCPOffersTheServersTools(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	path := writeMCPConfig(t, `{"mcpServers":{"kb":{"url":"`+ts.URL+`"}}}`)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg, stop, err := StartMCP(ctx, AgentConfig{MCPConfig: path}, nil)
	require.NoError(t, err)
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	rt := &activities.Runtime{Store: st}
	acts, err := AgentActivities(rt, cfg)
	require.NoError(t, err)
	lookup, ok := acts.Tools.Lookup("kb__lookup")
	require.True(t, ok)
	require.True(t, lookup.Parallel)
	_, ok = acts.Tools.Lookup(tool.ReadFileName)
	require.True(t, ok, "the built-in tools stay")
	res := acts.Tools.Execute(ctx, "kb__lookup", tool.Call{})
	require.False(t, res.IsError)
	require.Equal(t, "found", res.Content[0].Text)

	stop()
	res = acts.Tools.Execute(ctx, "kb__lookup", tool.Call{})
	require.True(t, res.IsError)
	require.Equal(t, `Error: tool "kb__lookup" failed: mcptool: bridge closed: MCP server "kb" is stopped`, res.Content[0].Text)

	unchanged, stop, err := StartMCP(ctx, AgentConfig{SystemPrompt: "x"}, nil)
	require.NoError(t, err)
	stop()
	require.Equal(t, AgentConfig{SystemPrompt: "x"}, unchanged)

	_, _, err = StartMCP(ctx, AgentConfig{MCPConfig: writeMCPConfig(t, `{"mcpServers":{"kb":{"url":"http://127.0.0.1:1/mcp"}}}`)}, nil)
	require.ErrorContains(t, err, `mcptool: starting server "kb": `)
}
