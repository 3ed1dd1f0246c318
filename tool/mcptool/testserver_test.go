package mcptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary runs itself as a stdio MCP server when this variable is
// set; testServerDir names a directory through which a test steers it.
const (
	envServer = "MCPTOOL_TEST_SERVER"
	envDir    = "MCPTOOL_TEST_DIR"
)

func TestMain(m *testing.M) {
	if os.Getenv(envServer) == "1" {
		dir := os.Getenv(envDir)
		if _, err := os.Stat(filepath.Join(dir, "refuse")); err == nil {
			fmt.Fprintln(os.Stderr, "test server: refusing to start")
			os.Exit(4)
		}
		fmt.Fprintln(os.Stderr, "test server: started")
		if err := newTestServer(dir).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func boolPtr(b bool) *bool { return &b }

// textArg returns the string argument name of a call.
func textArg(req *mcp.CallToolRequest, name string) string {
	var args map[string]any
	_ = json.Unmarshal(req.Params.Arguments, &args)
	s, _ := args[name].(string)
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

// newTestServer returns the test MCP server: a page holds two tools, so
// listing them takes several pages. dir receives the marker files of
// cancelled calls.
func newTestServer(dir string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-server", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "Echo a text.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("echo: " + textArg(req, "text")), nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "whoami",
		Description: "Say which process serves and what the call's _meta holds.",
		InputSchema: objectSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		m := req.Params.GetMeta()
		return text(fmt.Sprintf("pid=%d session=%v call=%v", os.Getpid(), m["sessionflow/sessionId"], m["sessionflow/callId"])), nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "put",
		Title:       "Store a value",
		InputSchema: objectSchema,
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: boolPtr(false)},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("stored"), nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "delete",
		Description: "Delete everything.",
		InputSchema: objectSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), IdempotentHint: false},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("deleted"), nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "fail",
		Description: "Fail as a tool.",
		InputSchema: objectSchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such thing"}}}, nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "crash",
		Description: "Make the server exit in the middle of the call.",
		InputSchema: objectSchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "test server: crashing")
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "sleep",
		Description: "Block until cancelled.",
		InputSchema: objectSchema,
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if tag := textArg(req, "child"); tag != "" {
			// A process of the server's own, as a server run by npx has.
			child := exec.Command("sleep", "120")
			if err := child.Start(); err != nil {
				return nil, err
			}
			_ = os.WriteFile(filepath.Join(dir, "child-"+tag), []byte(strconv.Itoa(child.Process.Pid)), 0o644)
		}
		_ = os.WriteFile(filepath.Join(dir, "started-"+textArg(req, "tag")), nil, 0o644)
		select {
		case <-ctx.Done():
			_ = os.WriteFile(filepath.Join(dir, "cancelled-"+textArg(req, "tag")), nil, 0o644)
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return text("slept"), nil
		}
	})
	s.AddTool(&mcp.Tool{
		Name:        "media",
		Description: "Return one content item of every kind.",
		InputSchema: objectSchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "here:"},
			&mcp.ImageContent{MIMEType: "image/png", Data: []byte("12345")},
			&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("123")},
			&mcp.ResourceLink{URI: "file:///a.txt", Name: "a.txt", MIMEType: "text/plain", Description: "the a file"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b.txt", MIMEType: "text/plain", Text: "bee"}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///c.bin", Blob: []byte("1234567")}},
		}}, nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "structured",
		Description: "Return structured content only.",
		InputSchema: objectSchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]any{"n": 7}}, nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "big",
		Description: "Return a long text.",
		InputSchema: objectSchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: strings.Repeat("a", 290)},
			&mcp.TextContent{Text: strings.Repeat("é", 20)},
		}}, nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "dotted.name",
		Description: "A name with a dot.",
		InputSchema: objectSchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("dotted"), nil
	})
	return s
}
