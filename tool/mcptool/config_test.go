package mcptool_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionflow/sessionflow/tool/mcptool"
)

func TestParseConfigAcceptsBothShapes(t *testing.T) {
	want := mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"files": {Command: "npx", Args: []string{"-y", "server-files", "/tmp"}, Env: map[string]string{"A": "1"}},
		"web":   {Type: "http", URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
	}}
	for _, key := range []string{"servers", "mcpServers"} {
		cfg, err := mcptool.ParseConfig([]byte(`{"` + key + `": {
			"files": {"command": "npx", "args": ["-y", "server-files", "/tmp"], "env": {"A": "1"}},
			"web": {"type": "http", "url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer x"}}
		}}`))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !reflect.DeepEqual(cfg, want) {
			t.Errorf("%s: got %+v", key, cfg)
		}
	}
}

func TestParseConfigRefusesWhatItCannotUse(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"unknown field", `{"servers":{"a":{"command":"x","arg":["y"]}}}`,
			`mcptool: invalid configuration: json: unknown field "arg"`},
		{"both keys", `{"servers":{},"mcpServers":{}}`,
			`mcptool: invalid configuration: both "servers" and "mcpServers" are set; use one`},
		{"trailing data", `{"servers":{}} {}`,
			`mcptool: invalid configuration: data after the configuration object`},
		{"neither", `{"servers":{"a":{}}}`,
			`mcptool: invalid configuration: server "a": a stdio server needs "command"`},
		{"both", `{"servers":{"a":{"command":"x","url":"http://h/"}}}`,
			`mcptool: invalid configuration: server "a": both "command" and "url" are set; a server is one or the other`},
		{"sse", `{"servers":{"a":{"type":"sse","url":"http://h/"}}}`,
			`mcptool: invalid configuration: server "a": the legacy "sse" transport is not supported; use a streamable HTTP endpoint ("type": "http")`},
		{"unknown type", `{"servers":{"a":{"type":"ws","url":"http://h/"}}}`,
			`mcptool: invalid configuration: server "a": unknown type "ws"; want "stdio" or "http"`},
		{"http without url", `{"servers":{"a":{"type":"http"}}}`,
			`mcptool: invalid configuration: server "a": an HTTP server needs "url"`},
		{"stdio fields on http", `{"servers":{"a":{"url":"http://h/","env":{"A":"1"}}}}`,
			`mcptool: invalid configuration: server "a": "args", "env" and "cwd" apply to a stdio server only`},
		{"headers on stdio", `{"servers":{"a":{"command":"x","headers":{"A":"1"}}}}`,
			`mcptool: invalid configuration: server "a": "headers" apply to an HTTP server only`},
		{"relative url", `{"servers":{"a":{"url":"/mcp"}}}`,
			`mcptool: invalid configuration: server "a": url "/mcp": want an absolute http or https URL`},
		{"bad name", `{"servers":{"a.b":{"command":"x"}}}`,
			`mcptool: invalid configuration: server "a.b": the name must be 1 to 40 letters, digits, '_' or '-'`},
		{"disabled but bad", `{"servers":{"a":{"disabled":true}}}`,
			`mcptool: invalid configuration: server "a": a stdio server needs "command"`},
	} {
		_, err := mcptool.ParseConfig([]byte(tc.json))
		if !errors.Is(err, mcptool.ErrInvalidConfig) || err.Error() != tc.want {
			t.Errorf("%s: err = %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

func TestLoadConfigNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers":{"a":{"url":"ftp://h/"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := mcptool.LoadConfig(path)
	if !errors.Is(err, mcptool.ErrInvalidConfig) || err.Error() != path+`: mcptool: invalid configuration: server "a": url "ftp://h/": want an absolute http or https URL` {
		t.Errorf("LoadConfig = %v", err)
	}
	_, err = mcptool.LoadConfig(filepath.Join(t.TempDir(), "none.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadConfig of a missing file = %v", err)
	}
}

func TestDisabledServersAreNotStarted(t *testing.T) {
	var log syncBuffer
	b, _ := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"off": {Command: filepath.Join(t.TempDir(), "no-such-program"), Disabled: true},
		"srv": stdioServer(t, t.TempDir()),
	}}, testOptions(&log))
	for _, tl := range b.Tools() {
		if tl.Name[:5] != "srv__" {
			t.Errorf("tool %q of a disabled server", tl.Name)
		}
	}
}

func TestIgnoreAnnotationsMakesEveryToolExclusiveAndNotIdempotent(t *testing.T) {
	var log syncBuffer
	cfg := stdioServer(t, t.TempDir())
	cfg.IgnoreAnnotations = true
	b, _ := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": cfg}}, testOptions(&log))
	for _, tl := range b.Tools() {
		if tl.Parallel || tl.Idempotent {
			t.Errorf("%s: parallel %v idempotent %v with ignoreAnnotations", tl.Name, tl.Parallel, tl.Idempotent)
		}
	}
}

// requireApproval makes every tool of its server ask; the tools of a
// server without it do not.
func TestRequireApprovalMarksEveryToolOfItsServer(t *testing.T) {
	var log syncBuffer
	asking, plain := stdioServer(t, t.TempDir()), stdioServer(t, t.TempDir())
	asking.RequireApproval = true
	b, _ := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"ask": asking, "free": plain}}, testOptions(&log))
	n := 0
	for _, tl := range b.Tools() {
		n++
		if want := strings.HasPrefix(tl.Name, "ask__"); tl.Approval != want {
			t.Errorf("%s: approval %v, want %v", tl.Name, tl.Approval, want)
		}
	}
	if n == 0 {
		t.Fatal("no tools")
	}
}

func TestClasses(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name                 string
		a                    *mcp.ToolAnnotations
		parallel, idempotent bool
	}{
		{"none", nil, false, false},
		{"empty", &mcp.ToolAnnotations{}, false, false},
		{"read-only", &mcp.ToolAnnotations{ReadOnlyHint: true}, true, true},
		{"read-only, destructive claimed", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, true, true},
		{"idempotent", &mcp.ToolAnnotations{IdempotentHint: true}, false, true},
		{"idempotent, destructive", &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &yes}, false, true},
		{"additive only", &mcp.ToolAnnotations{DestructiveHint: &no}, false, false},
		{"closed world", &mcp.ToolAnnotations{OpenWorldHint: &no}, false, false},
	} {
		p, i := mcptool.Classes(tc.a)
		if p != tc.parallel || i != tc.idempotent {
			t.Errorf("%s: parallel %v idempotent %v, want %v %v", tc.name, p, i, tc.parallel, tc.idempotent)
		}
	}
}

func TestToolName(t *testing.T) {
	for _, tc := range []struct{ server, remote, want string }{
		{"fs", "read_file", "fs__read_file"},
		{"fs", "files.read", "fs__files_read"},
		{"gh", "repo/issue list", "gh__repo_issue_list"},
		{"x", "ünï", "x___n_"},
	} {
		got, err := mcptool.ToolName(tc.server, tc.remote)
		if err != nil || got != tc.want {
			t.Errorf("ToolName(%q, %q) = %q, %v; want %q", tc.server, tc.remote, got, err, tc.want)
		}
	}
	if _, err := mcptool.ToolName("fs", ""); !errors.Is(err, mcptool.ErrInvalidName) {
		t.Errorf("an empty tool name: %v", err)
	}
}
