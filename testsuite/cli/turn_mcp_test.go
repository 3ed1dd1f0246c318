package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// envMCPServer makes the test binary serve MCP on stdio instead of testing.
const envMCPServer = "SESSIONFLOW_CLI_MCP_SERVER"

func init() {
	if os.Getenv(envMCPServer) != "1" {
		return
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "note", Description: "Take a note.", Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted: " + args.Text}}}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// A person gives the worker an MCP server (this test binary, on stdio) with
// --mcp-config: the model's call of its tool runs on the server, and
// `starter turn` shows it and the answer.
func TestStarterTurnWithMCPServer(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	exe, err := os.Executable()
	require.NoError(t, err)
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"notes": map[string]any{"command": exe, "env": map[string]string{envMCPServer: "1"}},
	}})
	require.NoError(t, err)
	mcpConfig := filepath.Join(dir, "mcp.json")
	require.NoError(t, os.WriteFile(mcpConfig, cfg, 0o644))
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[
		{"toolCalls":[{"id":"c1","name":"notes__note","arguments":{"text":"milk"}}]},
		{"text":"Noted."}
	]}`), 0o644))
	e.workerArgs = []string{"--provider-script", script, "--mcp-config", mcpConfig}
	e.startWorker(true)
	e.mustStarter("", "create", "--id", "m1", "--cwd", dir, "--provider", "scripted", "--model", "m1")

	out := e.mustStarter("", "turn", "--id", "m1", "--prompt", "remember milk", "--root", e.root, "--compression", "none")
	require.Contains(t, out, "→ notes__note (c1)\n")
	require.Contains(t, out, "✓ notes__note (c1)\n")
	require.True(t, strings.HasSuffix(out, "Noted.\nturn 1 completed\n"), "output:\n%s", out)

	e.mustStarter("", "dispose", "--id", "m1")
	var texts []string
	for _, ev := range e.stored("m1") {
		if ev.Type == wire.TypeToolResult {
			r, err := ev.ToolResult()
			require.NoError(t, err)
			texts = append(texts, r.Message.Content[0].Content[0].Text)
		}
	}
	require.Equal(t, []string{"noted: milk"}, texts)
}
