package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionflow/sessionflow/tool/mcptool"
)

// httpServer serves srv over streamable HTTP, refusing requests without the
// bearer token. reset replaces the handler by a fresh one, as a restarted
// server would be: the client's session is gone.
func httpServer(t *testing.T, srv *mcp.Server, token string) (url string, reset func()) {
	t.Helper()
	var mu sync.Mutex
	newHandler := func() http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	h := newHandler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		cur := h
		mu.Unlock()
		cur.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() {
		mu.Lock()
		h = newHandler()
		mu.Unlock()
	}
}

func TestHTTPServerToolsAndCalls(t *testing.T) {
	var log syncBuffer
	url, _ := httpServer(t, newTestServer(t.TempDir()), "secret")
	b, r := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"srv": {URL: url, Headers: map[string]string{"Authorization": "Bearer secret"}},
	}}, testOptions(&log))
	if n := len(b.Tools()); n != 11 {
		t.Fatalf("%d tools listed over HTTP, want 11", n)
	}
	echo, _ := r.Lookup("srv__echo")
	if !echo.Parallel || !echo.Idempotent {
		t.Errorf("echo over HTTP: parallel %v idempotent %v", echo.Parallel, echo.Idempotent)
	}
	wantOK(t, execute(t, r, "srv__echo", `{"text":"over http"}`), "echo: over http")
	wantError(t, execute(t, r, "srv__fail", `{}`), "TOOL_FAILED", "no such thing")
	if got := resultText(execute(t, r, "srv__whoami", `{}`)); !strings.HasSuffix(got, " session=sess-1 call=call-1") {
		t.Errorf("whoami over HTTP = %q", got)
	}
}

func TestHTTPServerRefusingTheHeadersFailsStart(t *testing.T) {
	var log syncBuffer
	url, _ := httpServer(t, newTestServer(t.TempDir()), "secret")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"srv": {URL: url, Headers: map[string]string{"Authorization": "Bearer wrong"}},
	}}, testOptions(&log))
	if !errors.Is(err, mcptool.ErrStart) || !strings.HasPrefix(err.Error(), `mcptool: starting server "srv": `) {
		t.Fatalf("Start with a refused token = %v", err)
	}
}

func TestHTTPServerThatLosesTheSessionIsReconnected(t *testing.T) {
	var log syncBuffer
	url, reset := httpServer(t, newTestServer(t.TempDir()), "secret")
	_, r := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"srv": {URL: url, Headers: map[string]string{"Authorization": "Bearer secret"}},
	}}, testOptions(&log))
	wantOK(t, execute(t, r, "srv__echo", `{"text":"one"}`), "echo: one")

	reset()
	res := execute(t, r, "srv__echo", `{"text":"two"}`)
	if !res.IsError || res.Error.Code != "TOOL_FAILED" ||
		!strings.HasPrefix(resultText(res), `Error: tool "srv__echo" failed: MCP server "srv" dropped the connection (`) ||
		!strings.HasSuffix(resultText(res), `session not found) during the call; the call's effects are unknown; the server is restarted for the next call`) {
		t.Fatalf("the call after the session was lost = %+v %q", res.Error, resultText(res))
	}
	wantOK(t, execute(t, r, "srv__echo", `{"text":"three"}`), "echo: three")
}

// oneToolServer is an MCP server offering one tool called name.
func oneToolServer(name string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "one", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text(name), nil })
	return s
}

func TestStartRefusesNamesThatCollideOrDoNotFit(t *testing.T) {
	var log syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	serve := func(name string) mcptool.ServerConfig {
		url, _ := httpServer(t, oneToolServer(name), "t")
		return mcptool.ServerConfig{URL: url, Headers: map[string]string{"Authorization": "Bearer t"}}
	}

	_, err := mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"a": serve("b__c"), "a__b": serve("c"),
	}}, testOptions(&log))
	if !errors.Is(err, mcptool.ErrNameCollision) || err.Error() !=
		`mcptool: tool name collision: "a__b__c" is the name of tool "b__c" of server "a" and of tool "c" of server "a__b"` {
		t.Errorf("colliding names: %v", err)
	}

	b, err := mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"a": serve("x.y"), "b": serve("x_y"),
	}}, testOptions(&log))
	if err != nil {
		t.Errorf("the same tool name on two servers: %v", err)
	} else {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}

	long := strings.Repeat("t", 60)
	_, err = mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": serve(long)}}, testOptions(&log))
	if !errors.Is(err, mcptool.ErrInvalidName) || err.Error() !=
		`mcptool: invalid tool name: tool "`+long+`" of server "srv" would be registered as "srv__`+long+
			`"; a name has 1 to 64 letters, digits, '_' or '-' (shorten the server's name)` {
		t.Errorf("an overlong name: %v", err)
	}
}

func TestAJSONRPCErrorFailsTheCallAndKeepsTheConnection(t *testing.T) {
	var log syncBuffer
	srv := newTestServer(t.TempDir())
	url, _ := httpServer(t, srv, "secret")
	_, r := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"srv": {URL: url, Headers: map[string]string{"Authorization": "Bearer secret"}},
	}}, testOptions(&log))
	srv.RemoveTools("put")
	wantError(t, execute(t, r, "srv__put", `{}`), "TOOL_FAILED",
		`Error: tool "srv__put" failed: MCP server "srv" answered the call with an error: unknown tool "put"`)
	wantOK(t, execute(t, r, "srv__echo", `{"text":"still here"}`), "echo: still here")
	if strings.Contains(log.String(), "restarting it") {
		t.Errorf("a JSON-RPC error restarted the server:\n%s", log.String())
	}
}
