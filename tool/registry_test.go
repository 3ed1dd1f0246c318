package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/tool"
)

const pathSchema = `{"type":"object","properties":{"path":{"type":"string","minLength":1},"n":{"type":"integer","minimum":0,"maximum":10000000000},"f":{"type":"number","exclusiveMaximum":2.5},"opts":{"type":"object","properties":{"mode":{"enum":["a","b"]}}}},"required":["path"],"additionalProperties":false}`

// echoTool returns its arguments as its text.
func echoTool(name string) tool.Tool {
	return tool.Tool{
		Name:        name,
		Description: "echo " + name,
		Schema:      json.RawMessage(`{"type":"object"}`),
		Run: func(_ context.Context, call tool.Call) (tool.Result, error) {
			return tool.TextResult(string(call.Arguments)), nil
		},
	}
}

func resultText(t *testing.T, r tool.Result) string {
	t.Helper()
	var parts []string
	for _, b := range r.Content {
		if b.Type != provider.BlockText {
			t.Fatalf("content block of type %q, want text", b.Type)
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "")
}

// wantError checks r is an IsError result with the given name and code and
// returns its text.
func wantError(t *testing.T, r tool.Result, name, code string) string {
	t.Helper()
	if !r.IsError {
		t.Fatalf("result is not an error: %+v", r)
	}
	if r.Error == nil || r.Error.Name != name || r.Error.Code != code {
		t.Fatalf("error info = %+v, want {%s %s}; text %q", r.Error, name, code, resultText(t, r))
	}
	return resultText(t, r)
}

func TestRegisterRefusesInvalidNames(t *testing.T) {
	r, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "has space", "dot.name", "slash/name", "ünï", strings.Repeat("a", 65)} {
		err := r.Register(echoTool(name))
		if !errors.Is(err, tool.ErrInvalidName) {
			t.Errorf("Register(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"a", "read_file", "A-b_9", strings.Repeat("z", 64)} {
		if err := r.Register(echoTool(name)); err != nil {
			t.Errorf("Register(%q) = %v, want nil", name, err)
		}
	}
	if got := len(r.Specs()); got != 4 {
		t.Errorf("%d specs, want 4", got)
	}
}

func TestRegisterRefusesDuplicateAndNilRun(t *testing.T) {
	r, err := tool.NewRegistry(echoTool("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(echoTool("a")); !errors.Is(err, tool.ErrDuplicate) {
		t.Errorf("duplicate: %v, want ErrDuplicate", err)
	}
	noRun := echoTool("b")
	noRun.Run = nil
	if err := r.Register(noRun); !errors.Is(err, tool.ErrNoRun) {
		t.Errorf("nil Run: %v, want ErrNoRun", err)
	}
	if _, ok := r.Lookup("b"); ok {
		t.Error("a refused tool was registered")
	}
	if _, err := tool.NewRegistry(echoTool("x"), echoTool("y"), echoTool("x")); !errors.Is(err, tool.ErrDuplicate) {
		t.Errorf("NewRegistry with a duplicate: %v, want ErrDuplicate", err)
	}
}

func TestRegisterRefusesBadSchemas(t *testing.T) {
	cases := []struct {
		name, schema, want string
	}{
		{"missing", ``, "no schema"},
		{"not JSON", `{"type":`, "not JSON"},
		{"array root", `[]`, "the schema must be a JSON object, got an array"},
		{"boolean root", `true`, "the schema must be a JSON object, got a boolean"},
		{"no type", `{"properties":{}}`, `the root must have "type": "object" (the arguments are an object), got nothing`},
		{"array type", `{"type":"array"}`, `got "array"`},
		{"unknown type name", `{"type":"object","properties":{"a":{"type":"strin"}}}`, `value must be one of 'array', 'boolean'`},
		{"bad keyword value", `{"type":"object","minProperties":"x"}`, `got string, want integer`},
		{"bad regex", `{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`, `is not valid regex`},
		{"dangling ref", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`, `not found`},
		{"external ref", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, `must be self-contained`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := tool.NewRegistry()
			tl := echoTool("t")
			tl.Schema = json.RawMessage(c.schema)
			err := r.Register(tl)
			if !errors.Is(err, tool.ErrInvalidSchema) {
				t.Fatalf("Register = %v, want ErrInvalidSchema", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `tool "t"`) {
				t.Errorf("error %q does not contain %q and the tool name", err, c.want)
			}
		})
	}
}

func TestSpecsSortedAndLookup(t *testing.T) {
	r, err := tool.NewRegistry(echoTool("zeta"), echoTool("alpha"), echoTool("mid"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range r.Specs() {
		names = append(names, s.Name)
		if s.Description != "echo "+s.Name || string(s.Schema) != `{"type":"object"}` {
			t.Errorf("spec %+v lost its description or schema", s)
		}
	}
	if got := strings.Join(names, ","); got != "alpha,mid,zeta" {
		t.Errorf("specs order %s, want alpha,mid,zeta", got)
	}
	if tl, ok := r.Lookup("mid"); !ok || tl.Name != "mid" {
		t.Errorf("Lookup(mid) = %v %v", tl.Name, ok)
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Error("Lookup(nope) found a tool")
	}
}

func TestExecuteToolNotFound(t *testing.T) {
	r, _ := tool.NewRegistry(echoTool("beta"), echoTool("alpha"))
	res := r.Execute(context.Background(), "nope", tool.Call{})
	text := wantError(t, res, "ToolNotFoundError", "TOOL_NOT_FOUND")
	if text != `Error: tool "nope" not found; available tools: alpha, beta` {
		t.Errorf("text %q", text)
	}
	empty, _ := tool.NewRegistry()
	text = wantError(t, empty.Execute(context.Background(), "x", tool.Call{}), "ToolNotFoundError", "TOOL_NOT_FOUND")
	if text != `Error: tool "x" not found; available tools: none` {
		t.Errorf("text %q", text)
	}
}

func TestExecuteInvalidArguments(t *testing.T) {
	var ran atomic.Int32
	tl := tool.Tool{Name: "p", Schema: json.RawMessage(pathSchema), Run: func(context.Context, tool.Call) (tool.Result, error) {
		ran.Add(1)
		return tool.TextResult("ran"), nil
	}}
	r, err := tool.NewRegistry(tl)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, args, want string }{
		{"not JSON", `{"path":`, "Error: invalid arguments for tool \"p\": not valid JSON: "},
		{"trailing garbage", `{"path":"a"} x`, "Error: invalid arguments for tool \"p\": not valid JSON: "},
		{"array", `["a"]`, "Error: invalid arguments for tool \"p\": the arguments must be a JSON object, got an array"},
		{"string", `"a"`, "Error: invalid arguments for tool \"p\": the arguments must be a JSON object, got a string"},
		{"null", `null`, "Error: invalid arguments for tool \"p\": the arguments must be a JSON object, got null"},
		{"wrong type", `{"path":3}`, "Error: invalid arguments for tool \"p\":\nproperty \"path\": got number, want string"},
		{"missing", `{"n":1}`, "Error: invalid arguments for tool \"p\":\narguments: missing property 'path'"},
		{"empty means {}", ``, "Error: invalid arguments for tool \"p\":\narguments: missing property 'path'"},
		{"extra", `{"path":"a","x":1}`, "Error: invalid arguments for tool \"p\":\narguments: additional properties 'x' not allowed"},
		{"minimum", `{"path":"a","n":-1}`, "Error: invalid arguments for tool \"p\":\nproperty \"n\": minimum: got -1, want 0"},
		{"exclusiveMaximum", `{"path":"a","f":2.75}`, "Error: invalid arguments for tool \"p\":\nproperty \"f\": exclusiveMaximum: got 2.75, want 2.5"},
		{"big maximum", `{"path":"a","n":12345678901}`, "Error: invalid arguments for tool \"p\":\nproperty \"n\": maximum: got 12345678901, want 10000000000"},
		{"several, sorted", `{"path":"","n":1.5,"opts":{"mode":"c"}}`, "Error: invalid arguments for tool \"p\":\n" +
			"property \"n\": got number, want integer\n" +
			"property \"opts/mode\": value must be one of 'a', 'b'\n" +
			"property \"path\": minLength: got 0, want 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := r.Execute(context.Background(), "p", tool.Call{Arguments: json.RawMessage(c.args)})
			text := wantError(t, res, "InvalidArgumentsError", "INVALID_ARGUMENTS")
			if strings.HasSuffix(c.want, ": ") {
				if !strings.HasPrefix(text, c.want) {
					t.Errorf("text %q, want prefix %q", text, c.want)
				}
			} else if text != c.want {
				t.Errorf("text\n%q\nwant\n%q", text, c.want)
			}
		})
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("Run called %d times for invalid arguments", n)
	}
}

func TestExecuteEmptyArgumentsMeanEmptyObject(t *testing.T) {
	r, _ := tool.NewRegistry(echoTool("e"))
	for _, args := range []string{"", "  \n", "{ }", " {\n \"a\" : [1, 2] } "} {
		res := r.Execute(context.Background(), "e", tool.Call{Arguments: json.RawMessage(args)})
		if res.IsError {
			t.Fatalf("args %q: %s", args, resultText(t, res))
		}
		want := "{}"
		if strings.Contains(args, "a") {
			want = `{"a":[1,2]}`
		}
		if got := resultText(t, res); got != want {
			t.Errorf("args %q: Run saw %q, want %q", args, got, want)
		}
	}
}

func failing(name string, run func(ctx context.Context, call tool.Call) (tool.Result, error)) *tool.Registry {
	r, err := tool.NewRegistry(tool.Tool{Name: name, Schema: json.RawMessage(`{"type":"object"}`), Run: run})
	if err != nil {
		panic(err)
	}
	return r
}

func TestExecuteRunErrorIsToolFailed(t *testing.T) {
	r := failing("f", func(context.Context, tool.Call) (tool.Result, error) {
		return tool.Result{}, fmt.Errorf("disk on fire: %w", errors.New("EIO"))
	})
	text := wantError(t, r.Execute(context.Background(), "f", tool.Call{}), "ToolFailedError", "TOOL_FAILED")
	if text != `Error: tool "f" failed: disk on fire: EIO` {
		t.Errorf("text %q", text)
	}
}

func TestExecuteRecoversPanic(t *testing.T) {
	r := failing("boom", func(context.Context, tool.Call) (tool.Result, error) {
		var items []string
		return tool.TextResult(items[len(items)]), nil // index out of range
	})
	text := wantError(t, r.Execute(context.Background(), "boom", tool.Call{}), "ToolFailedError", "TOOL_FAILED")
	if text != `Error: tool "boom" failed: panic: runtime error: index out of range [0] with length 0` {
		t.Errorf("text %q", text)
	}
}

func TestExecuteOutsideCwdError(t *testing.T) {
	r := failing("o", func(context.Context, tool.Call) (tool.Result, error) {
		return tool.Result{}, fmt.Errorf("%w: path %q", tool.ErrOutsideCwd, "/etc")
	})
	text := wantError(t, r.Execute(context.Background(), "o", tool.Call{}), "OutsideCwdError", "OUTSIDE_CWD")
	if text != `Error: outside the working directory: path "/etc"` {
		t.Errorf("text %q", text)
	}
}

func TestExecuteAborted(t *testing.T) {
	started := make(chan struct{})
	r := failing("slow", func(ctx context.Context, _ tool.Call) (tool.Result, error) {
		close(started)
		<-ctx.Done()
		return tool.Result{}, fmt.Errorf("waiting: %w", ctx.Err())
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	text := wantError(t, r.Execute(ctx, "slow", tool.Call{}), "AbortError", "ABORTED")
	if text != `Error: tool call "slow" aborted: context canceled` {
		t.Errorf("text %q", text)
	}

	// A context done before the call: the tool does not run.
	var ran atomic.Bool
	r2 := failing("never", func(context.Context, tool.Call) (tool.Result, error) {
		ran.Store(true)
		return tool.TextResult("ran"), nil
	})
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	text = wantError(t, r2.Execute(done, "never", tool.Call{}), "AbortError", "ABORTED")
	if text != `Error: tool call "never" aborted before it ran: context canceled` || ran.Load() {
		t.Errorf("text %q, ran %v", text, ran.Load())
	}

}

func TestExecuteUnrelatedErrorAfterCancelIsToolFailed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := failing("other", func(context.Context, tool.Call) (tool.Result, error) {
		cancel()
		return tool.Result{}, errors.New("unrelated")
	})
	text := wantError(t, r.Execute(ctx, "other", tool.Call{}), "ToolFailedError", "TOOL_FAILED")
	if text != `Error: tool "other" failed: unrelated` {
		t.Errorf("text %q", text)
	}
}

func TestExecuteFillsMissingErrorInfo(t *testing.T) {
	r := failing("e", func(context.Context, tool.Call) (tool.Result, error) {
		return tool.Result{Content: []provider.Block{{Type: "text", Text: "bad"}}, IsError: true}, nil
	})
	text := wantError(t, r.Execute(context.Background(), "e", tool.Call{}), "ToolFailedError", "TOOL_FAILED")
	if text != "bad" {
		t.Errorf("text %q", text)
	}
	ok := failing("nil", func(context.Context, tool.Call) (tool.Result, error) { return tool.Result{}, nil })
	res := ok.Execute(context.Background(), "nil", tool.Call{})
	b, _ := json.Marshal(res)
	if string(b) != `{"content":[]}` {
		t.Errorf("empty result marshals as %s", b)
	}
}

func TestExecutePassesCallThrough(t *testing.T) {
	var got tool.Call
	r := failing("c", func(_ context.Context, call tool.Call) (tool.Result, error) {
		got = call
		return tool.TextResult("ok"), nil
	})
	r.Execute(context.Background(), "c", tool.Call{SessionID: "s1", CallID: "call-1", Cwd: "/w", Arguments: json.RawMessage(`{"a": 1}`)})
	if got.SessionID != "s1" || got.CallID != "call-1" || got.Cwd != "/w" || string(got.Arguments) != `{"a":1}` {
		t.Errorf("Run saw %+v", got)
	}
}

func TestRegistryConcurrentUse(t *testing.T) {
	r, _ := tool.NewRegistry(echoTool("base"))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(3)
		go func() {
			defer wg.Done()
			if err := r.Register(echoTool(fmt.Sprintf("t%d", i))); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			for range 50 {
				res := r.Execute(context.Background(), "base", tool.Call{Arguments: json.RawMessage(`{"i":1}`)})
				if res.IsError || resultText(t, res) != `{"i":1}` {
					t.Errorf("execute: %+v", res)
					return
				}
				r.Execute(context.Background(), "missing", tool.Call{})
			}
		}()
		go func() {
			defer wg.Done()
			for range 50 {
				r.Specs()
				r.Lookup("t1")
			}
		}()
	}
	wg.Wait()
	if n := len(r.Specs()); n != 9 {
		t.Errorf("%d tools, want 9", n)
	}
}
