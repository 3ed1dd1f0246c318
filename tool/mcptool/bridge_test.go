package mcptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/tool/mcptool"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stdioServer returns the configuration of the test binary as a stdio
// server steered through dir.
func stdioServer(t *testing.T, dir string) mcptool.ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return mcptool.ServerConfig{Command: exe, Env: map[string]string{"MCPTOOL_TEST_SERVER": "1", "MCPTOOL_TEST_DIR": dir}}
}

// testOptions are quick restart settings logging into log.
func testOptions(log *syncBuffer) mcptool.Options {
	return mcptool.Options{
		Logger:            slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ConnectTimeout:    20 * time.Second,
		RestartBackoff:    10 * time.Millisecond,
		MaxRestartBackoff: 50 * time.Millisecond,
		TerminateTimeout:  2 * time.Second,
	}
}

// startBridge starts cfg and returns the bridge and a registry holding the
// built-in tools and the bridge's; both are closed with the test.
func startBridge(t *testing.T, cfg mcptool.Config, opts mcptool.Options) (*mcptool.Bridge, *tool.Registry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := mcptool.Start(ctx, cfg, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	r, err := tool.NewRegistry(tool.Builtins(tool.BuiltinOptions{})...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Register(r); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return b, r
}

func execute(t *testing.T, r *tool.Registry, name, args string) tool.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.Execute(ctx, name, tool.Call{SessionID: "sess-1", CallID: "call-1", Arguments: json.RawMessage(args)})
}

// resultText joins the text blocks of res.
func resultText(res tool.Result) string {
	var texts []string
	for _, b := range res.Content {
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "|")
}

func wantOK(t *testing.T, res tool.Result, text string) {
	t.Helper()
	if res.IsError || res.Error != nil {
		t.Fatalf("result is an error: %+v (%q)", res.Error, resultText(res))
	}
	if got := resultText(res); got != text {
		t.Fatalf("text = %q, want %q", got, text)
	}
}

func wantError(t *testing.T, res tool.Result, code, text string) {
	t.Helper()
	if !res.IsError || res.Error == nil {
		t.Fatalf("result is not an error: %q", resultText(res))
	}
	if res.Error.Code != code {
		t.Fatalf("code = %q, want %q (text %q)", res.Error.Code, code, resultText(res))
	}
	if got := resultText(res); got != text {
		t.Fatalf("text =\n  %q\nwant\n  %q", got, text)
	}
}

var pidPattern = regexp.MustCompile(`^pid=(\d+) `)

// servingPid calls whoami and returns the serving process's pid.
func servingPid(t *testing.T, r *tool.Registry) string {
	t.Helper()
	res := execute(t, r, "srv__whoami", `{}`)
	m := pidPattern.FindStringSubmatch(resultText(res))
	if res.IsError || m == nil {
		t.Fatalf("whoami: %q (%+v)", resultText(res), res.Error)
	}
	return m[1]
}

func TestStdioToolsAreListedAcrossPagesWithTheirClasses(t *testing.T) {
	var log syncBuffer
	b, r := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": stdioServer(t, t.TempDir())}}, testOptions(&log))

	type class struct {
		desc                 string
		parallel, idempotent bool
	}
	want := map[string]class{
		"srv__big":         {"Return a long text.", false, false},
		"srv__crash":       {"Make the server exit in the middle of the call.", false, false},
		"srv__delete":      {"Delete everything.", false, false},
		"srv__dotted_name": {"A name with a dot.", false, false},
		"srv__echo":        {"Echo a text.", true, true},
		"srv__fail":        {"Fail as a tool.", false, false},
		"srv__media":       {"Return one content item of every kind.", false, false},
		"srv__put":         {"Store a value", false, true},
		"srv__sleep":       {"Block until cancelled.", false, false},
		"srv__structured":  {"Return structured content only.", false, false},
		"srv__whoami":      {"Say which process serves and what the call's _meta holds.", true, true},
	}
	tools := b.Tools()
	if len(tools) != len(want) {
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		t.Fatalf("tools = %v, want the %d of the server (all pages)", names, len(want))
	}
	for i, tl := range tools {
		w, ok := want[tl.Name]
		if !ok {
			t.Fatalf("unexpected tool %q", tl.Name)
		}
		if i > 0 && tools[i-1].Name >= tl.Name {
			t.Fatalf("tools not sorted: %q before %q", tools[i-1].Name, tl.Name)
		}
		if tl.Description != w.desc || tl.Parallel != w.parallel || tl.Idempotent != w.idempotent {
			t.Errorf("%s: description %q parallel %v idempotent %v; want %q %v %v",
				tl.Name, tl.Description, tl.Parallel, tl.Idempotent, w.desc, w.parallel, w.idempotent)
		}
		if _, ok := r.Lookup(tl.Name); !ok {
			t.Errorf("%s is not in the registry", tl.Name)
		}
	}
	echo, _ := r.Lookup("srv__echo")
	var schema map[string]any
	if err := json.Unmarshal(echo.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["type"] != "object" || schema["required"].([]any)[0] != "text" {
		t.Errorf("echo schema = %s", echo.Schema)
	}
	if _, ok := r.Lookup(tool.ReadFileName); !ok {
		t.Errorf("the built-in tools are gone from the registry")
	}
}

func TestStdioCallsMapContentAndErrors(t *testing.T) {
	var log syncBuffer
	opts := testOptions(&log)
	opts.MaxResultBytes = 300
	_, r := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": stdioServer(t, t.TempDir())}}, opts)

	res := execute(t, r, "srv__echo", `{"text":"hi"}`)
	wantOK(t, res, "echo: hi")
	if string(res.Meta) != `{"mcpServer":"srv","mcpTool":"echo"}` {
		t.Errorf("meta = %s", res.Meta)
	}
	if got := resultText(execute(t, r, "srv__whoami", `{}`)); !strings.HasSuffix(got, " session=sess-1 call=call-1") {
		t.Errorf("whoami = %q: the call's _meta did not carry the session and call ids", got)
	}
	wantOK(t, execute(t, r, "srv__dotted_name", ``), "dotted")
	wantError(t, execute(t, r, "srv__fail", `{}`), "TOOL_FAILED", "no such thing")
	if res := execute(t, r, "srv__fail", `{}`); res.Error.Name != "ToolFailedError" {
		t.Errorf("error name = %q", res.Error.Name)
	}
	wantError(t, execute(t, r, "srv__echo", `{}`), "INVALID_ARGUMENTS",
		"Error: invalid arguments for tool \"srv__echo\":\narguments: missing property 'text'")
	wantOK(t, execute(t, r, "srv__media", `{}`),
		"here:|[image: image/png, 5 bytes]|[audio: audio/wav, 3 bytes]|[resource link: file:///a.txt, a.txt, text/plain: the a file]"+
			"|[resource: file:///b.txt, text/plain]\nbee|[resource: file:///c.bin, unknown type, 7 bytes]")
	wantOK(t, execute(t, r, "srv__structured", `{}`), `{"n":7}`)

	// 290 a's and 20 é's (40 bytes): cut at 300 bytes, on a character boundary.
	res = execute(t, r, "srv__big", `{}`)
	wantOK(t, res, strings.Repeat("a", 290)+"|"+strings.Repeat("é", 5)+"|[output truncated: 330 bytes in all, the first 300 shown]")
	if string(res.Meta) != `{"mcpServer":"srv","mcpTool":"big","truncated":true}` {
		t.Errorf("meta = %s", res.Meta)
	}
}

func TestStdioServerThatCrashesMidCallIsRestarted(t *testing.T) {
	var log syncBuffer
	_, r := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": stdioServer(t, t.TempDir())}}, testOptions(&log))
	first := servingPid(t, r)

	wantError(t, execute(t, r, "srv__crash", `{}`), "TOOL_FAILED",
		`Error: tool "srv__crash" failed: MCP server "srv" exited (exit status 3) during the call; `+
			`the call's effects are unknown; the server is restarted for the next call`)

	second := servingPid(t, r)
	if second == first {
		t.Fatalf("whoami answered from pid %s before and after the crash", first)
	}
	wantOK(t, execute(t, r, "srv__echo", `{"text":"again"}`), "echo: again")
	for _, line := range []string{"test server: crashing", "MCP server exited (exit status 3); restarting it", "MCP server restarted"} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, log.String())
		}
	}
}

func TestStdioServerIsDownAfterBoundedRestartsAndComesBackOnDemand(t *testing.T) {
	var log syncBuffer
	opts := testOptions(&log)
	opts.MaxRestarts = 2
	dir := t.TempDir()
	_, r := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": stdioServer(t, dir)}}, opts)
	servingPid(t, r)

	refuse := filepath.Join(dir, "refuse")
	if err := os.WriteFile(refuse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantError(t, execute(t, r, "srv__crash", `{}`), "TOOL_FAILED",
		`Error: tool "srv__crash" failed: MCP server "srv" exited (exit status 3) during the call; `+
			`the call's effects are unknown; the server is restarted for the next call`)

	// Both restarts fail (the server refuses to start); the call made after
	// that gets one more attempt, which fails too.
	res := execute(t, r, "srv__whoami", `{}`)
	const prefix = `Error: tool "srv__whoami" failed: mcptool: server down: MCP server "srv" could not be started (`
	const suffix = `) after 2 restarts in a row`
	if got := resultText(res); res.Error == nil || res.Error.Code != "TOOL_FAILED" || !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, suffix) {
		t.Fatalf("whoami on a down server = %q (%+v)", got, res.Error)
	}
	if n := strings.Count(log.String(), "MCP server restart failed"); n != 3 {
		t.Errorf("%d failed restarts logged, want 2 automatic and 1 on demand:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "test server: refusing to start") {
		t.Errorf("the server's standard error was not logged")
	}

	if err := os.Remove(refuse); err != nil {
		t.Fatal(err)
	}
	servingPid(t, r)
	wantOK(t, execute(t, r, "srv__echo", `{"text":"back"}`), "echo: back")
}

func TestCancellingACallCancelsItOnTheServer(t *testing.T) {
	var log syncBuffer
	dir := t.TempDir()
	_, r := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": stdioServer(t, dir)}}, testOptions(&log))
	pid := servingPid(t, r)

	// The call is cancelled once the server's handler runs (its started
	// marker), not after a guessed time: on a loaded machine the call may
	// not have reached the server by then.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan tool.Result, 1)
	go func() { done <- r.Execute(ctx, "srv__sleep", tool.Call{Arguments: json.RawMessage(`{"tag":"x"}`)}) }()
	awaitFile := func(marker, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(marker); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no %s after 30 s", what, marker)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	awaitFile(filepath.Join(dir, "started-x"), "the server's handler never started")
	cancel()
	wantError(t, <-done, "ABORTED", `Error: tool call "srv__sleep" aborted: context canceled`)
	awaitFile(filepath.Join(dir, "cancelled-x"), "the server's handler was not cancelled")
	if again := servingPid(t, r); again != pid {
		t.Errorf("a cancelled call restarted the server (pid %s, then %s)", pid, again)
	}
}

func TestCloseStopsTheServersAndLaterCallsFail(t *testing.T) {
	var log syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	b, err := mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": stdioServer(t, dir)}}, testOptions(&log))
	if err != nil {
		t.Fatal(err)
	}
	r, err := tool.NewRegistry(b.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	pid := servingPid(t, r)

	// A call still running when the bridge closes must not hold Close.
	inFlight := make(chan tool.Result, 1)
	go func() {
		inFlight <- r.Execute(context.Background(), "srv__sleep", tool.Call{Arguments: json.RawMessage(`{"child":"close"}`)})
	}()
	childFile := filepath.Join(dir, "child-close")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(childFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sleep call did not start its child process")
		}
	}

	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	select {
	case res := <-inFlight:
		if !res.IsError || res.Error.Code != "TOOL_FAILED" {
			t.Errorf("the call in flight at Close = %+v %q", res.Error, resultText(res))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight at Close did not end")
	}
	requireGone(t, "the server", pid)
	child, err := os.ReadFile(childFile)
	if err != nil {
		t.Fatal(err)
	}
	requireGone(t, "the server's child", string(child))
	wantError(t, execute(t, r, "srv__echo", `{"text":"x"}`), "TOOL_FAILED",
		`Error: tool "srv__echo" failed: mcptool: bridge closed: MCP server "srv" is stopped`)
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStartRefusesServersThatFailOrNamesThatDoNotFit(t *testing.T) {
	var log syncBuffer
	opts := testOptions(&log)
	ctx := context.Background()

	_, err := mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{
		"missing": {Command: filepath.Join(t.TempDir(), "no-such-program")},
	}}, opts)
	if !errors.Is(err, mcptool.ErrStart) || !strings.HasPrefix(err.Error(), `mcptool: starting server "missing": `) {
		t.Errorf("missing command: %v", err)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "refuse"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": stdioServer(t, dir)}}, opts)
	if !errors.Is(err, mcptool.ErrStart) {
		t.Errorf("a server that exits at once: %v", err)
	}

	_, err = mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"bad name": stdioServer(t, t.TempDir())}}, opts)
	if !errors.Is(err, mcptool.ErrInvalidConfig) {
		t.Errorf("an invalid configuration: %v", err)
	}
}

func TestRegisterRefusesANameTheRegistryHoldsAndAddsNothing(t *testing.T) {
	var log syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := mcptool.Start(ctx, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": stdioServer(t, t.TempDir())}}, testOptions(&log))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	taken := tool.Tool{Name: "srv__echo", Schema: json.RawMessage(`{"type":"object"}`),
		Run: func(context.Context, tool.Call) (tool.Result, error) { return tool.TextResult("mine"), nil }}
	r, err := tool.NewRegistry(taken)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Register(r)
	if !errors.Is(err, mcptool.ErrNameCollision) || err.Error() != "mcptool: tool name collision: the registry already holds srv__echo" {
		t.Fatalf("Register = %v", err)
	}
	if names := r.Names(); len(names) != 1 {
		t.Errorf("registry = %v after a refused Register", names)
	}
}

func TestStdioServerKilledBetweenCallsIsRestartedBeforeTheNextCall(t *testing.T) {
	var log syncBuffer
	_, r := startBridge(t, mcptool.Config{Servers: map[string]mcptool.ServerConfig{"srv": stdioServer(t, t.TempDir())}}, testOptions(&log))
	first := servingPid(t, r)
	var pid int
	for _, c := range first {
		pid = pid*10 + int(c-'0')
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), "MCP server exited (signal: killed); restarting it") {
		if time.Now().After(deadline) {
			t.Fatalf("the killed server's exit was not noticed:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if second := servingPid(t, r); second == first {
		t.Fatalf("whoami answered from the killed pid %s", first)
	}
}

// requireGone fails unless process pid is gone (or a zombie waiting for
// its new parent to reap it) within a few seconds.
func requireGone(t *testing.T, what, pid string) {
	t.Helper()
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Kill(n, 0)
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if errors.Is(err, syscall.ESRCH) || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs after Close: %s", what, n, stat)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
