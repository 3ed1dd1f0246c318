package scripted_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
)

// collect runs one call and returns its chunks and error.
func collect(t *testing.T, ctx context.Context, p provider.Provider, req provider.Request) ([]provider.Chunk, error) {
	t.Helper()
	var out []provider.Chunk
	for c, err := range p.Stream(ctx, req) {
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// conversation returns a request whose conversation holds n assistant
// messages (between user messages).
func conversation(session string, n int) provider.Request {
	req := provider.Request{Provider: "scripted", Model: "m", SessionID: session}
	req.Messages = append(req.Messages, provider.Message{Role: "user", Content: []provider.Block{{Type: "text", Text: "hi"}}})
	for range n {
		req.Messages = append(req.Messages,
			provider.Message{Role: "assistant", Content: []provider.Block{{Type: "text", Text: "x"}}},
			provider.Message{Role: "user", Content: []provider.Block{{Type: "text", Text: "more"}}})
	}
	return req
}

func parse(t *testing.T, script string) *scripted.Provider {
	t.Helper()
	p, err := scripted.Parse([]byte(script))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return p
}

func TestScriptedStreamsTheDesignExample(t *testing.T) {
	p := parse(t, `{"loop": false,
	 "responses": [
	  {"reasoning": "Let me see", "text": "Hello thére", "chunkSize": 4,
	   "toolCalls": [{"id": "call-1", "name": "read_file", "arguments": "{\"path\":\"a.txt\"}"},
	                 {"id": "call-2", "name": "list_dir"}],
	   "usage": {"inputTokens": 10, "outputTokens": 3}}
	 ]}`)
	got, err := collect(t, context.Background(), p, conversation("s", 0))
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.Chunk{
		{Type: "reasoning", Delta: "Let "}, {Type: "reasoning", Delta: "me s"}, {Type: "reasoning", Delta: "ee"},
		{Type: "text", Delta: "Hell"}, {Type: "text", Delta: "o th"}, {Type: "text", Delta: "ére"},
		{Type: "tool-call", Index: 0, ID: "call-1", Name: "read_file", Delta: `{"pa`},
		{Type: "tool-call", Index: 0, Delta: `th":`},
		{Type: "tool-call", Index: 0, Delta: `"a.t`},
		{Type: "tool-call", Index: 0, Delta: `xt"}`},
		{Type: "tool-call", Index: 1, ID: "call-2", Name: "list_dir"},
		{Type: "usage", Usage: &provider.Usage{InputTokens: 10, OutputTokens: 3}},
		{Type: "finish", Finish: "tool-calls"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("chunks:\n got %+v\nwant %+v", got, want)
	}
	// The stream assembles into the scripted content.
	a := provider.NewAssembler()
	for i, c := range got {
		if err := a.Push(c, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	wantContent := []provider.Block{
		{Type: "reasoning", Text: "Let me see"},
		{Type: "text", Text: "Hello thére"},
		{Type: "tool-call", ID: "call-1", Name: "read_file", Arguments: `{"path":"a.txt"}`},
		{Type: "tool-call", ID: "call-2", Name: "list_dir"},
	}
	if !reflect.DeepEqual(a.Content(), wantContent) {
		t.Fatalf("content %+v", a.Content())
	}
}

func TestScriptedChunkSizeCountsCharacters(t *testing.T) {
	p, err := scripted.New(scripted.Responses(scripted.Text("日本語テキスト").WithChunkSize(2)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, context.Background(), p, conversation("s", 0))
	if err != nil {
		t.Fatal(err)
	}
	var deltas []string
	for _, c := range got {
		deltas = append(deltas, c.Delta)
	}
	if want := []string{"日本", "語テ", "キス", "ト", ""}; !reflect.DeepEqual(deltas, want) {
		t.Fatalf("deltas %q, want %q", deltas, want)
	}
}

func TestScriptedSelectsByAssistantCount(t *testing.T) {
	p, err := scripted.New(scripted.Responses(scripted.Text("zero"), scripted.Text("one"), scripted.Text("two")))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 0, 1, 1} {
		got, err := collect(t, context.Background(), p, conversation("s", n))
		if err != nil {
			t.Fatal(err)
		}
		want := []provider.Chunk{{Type: "text", Delta: []string{"zero", "one", "two"}[n]}, {Type: "finish", Finish: "stop"}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%d assistant messages: %+v", n, got)
		}
	}
	if p.Attempts("s", 1) != 2 || p.Attempts("s", 0) != 1 || p.Attempts("other", 1) != 0 {
		t.Fatalf("attempts %d %d %d", p.Attempts("s", 1), p.Attempts("s", 0), p.Attempts("other", 1))
	}
}

func TestScriptedExhaustedAndLoop(t *testing.T) {
	p := parse(t, `{"responses":[{"text":"a"},{"text":"b"}]}`)
	_, err := collect(t, context.Background(), p, conversation("s", 2))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Retryable || !strings.HasPrefix(pe.Message, "script exhausted: ") {
		t.Fatalf("error %v, want a non-retryable *provider.Error \"script exhausted: ...\"", err)
	}
	if pe.Message != "script exhausted: response 2 requested, the script has 2" {
		t.Fatalf("message %q", pe.Message)
	}
	empty := parse(t, `{"responses":[]}`)
	if _, err := collect(t, context.Background(), empty, conversation("s", 0)); !errors.As(err, &pe) || pe.Message != "script exhausted: response 0 requested, the script has 0" {
		t.Fatalf("empty script: %v", err)
	}

	loop := parse(t, `{"loop":true,"responses":[{"text":"a"},{"text":"b"}]}`)
	for n, want := range []string{"a", "b", "a", "b", "a"} {
		got, err := collect(t, context.Background(), loop, conversation("s", n))
		if err != nil || len(got) != 2 || got[0].Delta != want {
			t.Fatalf("loop call %d: %+v %v", n, got, err)
		}
	}
}

func TestScriptedFailAttempts(t *testing.T) {
	p := parse(t, `{"responses":[{"text":"abcdef","chunkSize":2,
	  "fail":{"afterChunks":2,"retryable":true,"status":429,"retryAfterMs":10,"message":"rate limited","code":"rate_limit","attempts":2}}]}`)
	for attempt := 1; attempt <= 3; attempt++ {
		got, err := collect(t, context.Background(), p, conversation("s", 0))
		if attempt <= 2 {
			want := &provider.Error{Retryable: true, Status: 429, Code: "rate_limit", Message: "rate limited", RetryAfter: 10 * time.Millisecond}
			var pe *provider.Error
			if !errors.As(err, &pe) || !reflect.DeepEqual(pe, want) {
				t.Fatalf("attempt %d: error %#v", attempt, err)
			}
			if len(got) != 2 || got[0].Delta != "ab" || got[1].Delta != "cd" {
				t.Fatalf("attempt %d: chunks before the failure %+v", attempt, got)
			}
			continue
		}
		if err != nil || len(got) != 4 || got[3].Finish != "stop" {
			t.Fatalf("attempt %d: %+v %v", attempt, got, err)
		}
	}
	// Attempts are counted per session: another session fails again.
	if _, err := collect(t, context.Background(), p, conversation("other", 0)); err == nil {
		t.Fatal("another session's first call did not fail")
	}

	always := parse(t, `{"responses":[{"text":"a","fail":{}}]}`)
	for range 3 {
		got, err := collect(t, context.Background(), always, conversation("s", 0))
		var pe *provider.Error
		if len(got) != 0 || !errors.As(err, &pe) || pe.Retryable || pe.Message != "scripted failure" {
			t.Fatalf("%+v %v", got, err)
		}
	}
}

func TestScriptedStallUntilCancel(t *testing.T) {
	p := parse(t, `{"responses":[{"text":"abc","chunkSize":1,"stall":{"afterChunks":2,"attempts":1}}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chunks := make(chan provider.Chunk, 10)
	result := make(chan error, 1)
	go func() {
		for c, err := range p.Stream(ctx, conversation("s", 0)) {
			if err != nil {
				result <- err
				return
			}
			chunks <- c
		}
		result <- nil
	}()
	for _, want := range []string{"a", "b"} {
		if c := <-chunks; c.Delta != want {
			t.Fatalf("chunk %+v, want %q", c, want)
		}
	}
	select {
	case err := <-result:
		t.Fatalf("the stall ended before the cancel: %v", err)
	case c := <-chunks:
		t.Fatalf("a chunk %+v after the stall point", c)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	// The second call of the response does not stall (bounded so that a
	// regression fails instead of hanging).
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	got, err := collect(t, ctx2, p, conversation("s", 0))
	if err != nil || len(got) != 4 {
		t.Fatalf("second call: %+v %v", got, err)
	}
}

func TestScriptedHonoursCancelBetweenChunks(t *testing.T) {
	p, err := scripted.New(scripted.Responses(scripted.Text("abcdef").WithChunkSize(1)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var got []string
	var last error
	for c, err := range p.Stream(ctx, conversation("s", 0)) {
		if err != nil {
			last = err
			break
		}
		got = append(got, c.Delta)
		if len(got) == 2 {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) || !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("got %q then %v", got, last)
	}

	// A delayed stream stops during its delay.
	slow, err := scripted.New(scripted.Responses(scripted.Response{Text: "abc", ChunkSize: 1, DelayMs: 60_000}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	chunks, err := collect(t, ctx, slow, conversation("s", 0))
	if len(chunks) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%+v %v", chunks, err)
	}
}

func TestScriptedDelay(t *testing.T) {
	p, err := scripted.New(scripted.Responses(scripted.Response{Text: "abc", ChunkSize: 1, DelayMs: 5}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := collect(t, context.Background(), p, conversation("s", 0))
	if err != nil || len(got) != 4 {
		t.Fatalf("%+v %v", got, err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("4 chunks with a 5ms delay took %v", d)
	}
}

func TestScriptedStopsWhenTheConsumerStops(t *testing.T) {
	p, err := scripted.New(scripted.Responses(scripted.Text("abcdef").WithChunkSize(1)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range p.Stream(context.Background(), conversation("s", 0)) {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("%d chunks", n)
	}
}

func TestScriptedFinishAndArgumentForms(t *testing.T) {
	p := parse(t, `{"responses":[
	  {"text":"x","finish":"max-tokens"},
	  {"toolCalls":[{"id":"c","name":"n","arguments":{"b": [1, 2],  "a":"é"}}]},
	  {"toolCalls":[{"id":"c","name":"n","arguments":"not json"}],"finish":"stop"}]}`)
	for n, want := range []struct {
		finish provider.FinishReason
		args   string
	}{{"max-tokens", ""}, {"tool-calls", `{"b":[1,2],"a":"é"}`}, {"stop", "not json"}} {
		got, err := collect(t, context.Background(), p, conversation("s", n))
		if err != nil {
			t.Fatal(err)
		}
		if f := got[len(got)-1]; f.Finish != want.finish {
			t.Fatalf("response %d finish %q", n, f.Finish)
		}
		if want.args != "" && got[0].Delta != want.args {
			t.Fatalf("response %d arguments %q", n, got[0].Delta)
		}
	}
}

func TestScriptedHelpersRoundTripThroughJSON(t *testing.T) {
	s := scripted.Script{Loop: true, Responses: []scripted.Response{
		scripted.ToolCall("c1", "read_file", `{"path":"a.txt"}`).WithChunkSize(3).WithUsage(5, 6),
		scripted.ToolCalls(scripted.Call{ID: "c2", Name: "list_dir"}, scripted.Call{ID: "c3", Name: "write_file", Arguments: "{}"}),
		scripted.Text("done").WithFail(scripted.Fail{Retryable: true, Attempts: 1}).WithStall(1),
	}}.WithBranch("TASK-A", scripted.Text("alpha").WithChunkSize(2), scripted.ToolCall("c4", "read_file", `{"path":"b.txt"}`))
	s.Branches = append(s.Branches, scripted.Branch{When: "TASK-B", Loop: true, Responses: []scripted.Response{scripted.Text("bravo")}})
	data, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := scripted.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Script(), s) {
		t.Fatalf("loaded %+v\nwant %+v", p.Script(), s)
	}
	if _, err := scripted.Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestScriptedRefusesInvalidScripts(t *testing.T) {
	cases := []struct {
		name, script, want string
	}{
		{"not json", `{`, "invalid provider script: unexpected EOF"},
		{"trailing data", `{"responses":[]} {}`, "invalid provider script: trailing data after the JSON value"},
		{"unknown top field", `{"responses":[],"loops":true}`, `invalid provider script: json: unknown field "loops"`},
		{"no responses", `{"loop":false}`, `invalid provider script: no "responses" array`},
		{"unknown response field", `{"responses":[{"text":"a"},{"txt":"b"}]}`, `invalid provider script: response 1: json: unknown field "txt"`},
		{"unknown fail field", `{"responses":[{"text":"a","fail":{"after":1}}]}`, `invalid provider script: response 0: json: unknown field "after"`},
		{"unknown tool call field", `{"responses":[{"toolCalls":[{"id":"c","name":"n","args":"{}"}]}]}`, `invalid provider script: response 0: json: unknown field "args"`},
		{"wrong type", `{"responses":[{"chunkSize":"4"}]}`, "invalid provider script: response 0: json: cannot unmarshal string"},
		{"negative chunk size", `{"responses":[{},{"chunkSize":-1}]}`, "invalid provider script: response 1: chunkSize -1 is negative"},
		{"negative delay", `{"responses":[{"delayMs":-1}]}`, "invalid provider script: response 0: delayMs -1 is negative"},
		{"unknown finish", `{"responses":[{"finish":"done"}]}`, `invalid provider script: response 0: unknown finish "done" (stop, tool-calls or max-tokens)`},
		{"tool call without name", `{"responses":[{"toolCalls":[{"id":"c"}]}]}`, "invalid provider script: response 0: tool call 0 needs an id and a name"},
		{"duplicate call id", `{"responses":[{"toolCalls":[{"id":"c","name":"n"},{"id":"c","name":"m"}]}]}`, `invalid provider script: response 0: tool call 1 repeats the id "c"`},
		{"fail after the finish", `{"responses":[{"text":"abc","chunkSize":1,"fail":{"afterChunks":4}}]}`,
			"invalid provider script: response 0: fail.afterChunks 4 is outside 0..3 (the response streams 4 chunks and the failure comes before its finish chunk)"},
		{"negative fail attempts", `{"responses":[{"fail":{"attempts":-1}}]}`, "invalid provider script: response 0: fail.attempts -1 is negative"},
		{"negative retry after", `{"responses":[{"fail":{"retryAfterMs":-5}}]}`, "invalid provider script: response 0: fail.retryAfterMs -5 is negative"},
		{"negative status", `{"responses":[{"fail":{"status":-5}}]}`, "invalid provider script: response 0: fail.status -5 is negative"},
		{"stall after the finish", `{"responses":[{"stall":{"afterChunks":1}}]}`,
			"invalid provider script: response 0: stall.afterChunks 1 is outside 0..0 (the response streams 1 chunks and the stall comes before its finish chunk)"},
		{"negative usage", `{"responses":[{"usage":{"inputTokens":-1,"outputTokens":0}}]}`, "invalid provider script: response 0: usage token count -1 is outside 0..9007199254740991"},
		{"looping without responses", `{"loop":true,"responses":[]}`, "invalid provider script: a looping script needs at least one response"},
		{"unknown branch field", `{"responses":[],"branches":[{"when":"a","responses":[],"whence":"b"}]}`, `invalid provider script: branch 0: json: unknown field "whence"`},
		{"branch without responses", `{"responses":[],"branches":[{"when":"a","responses":[]},{"when":"b"}]}`, `invalid provider script: branch 1: no "responses" array`},
		{"unknown branch response field", `{"responses":[],"branches":[{"when":"a","responses":[{"txt":"b"}]}]}`, `invalid provider script: branch 0: response 0: json: unknown field "txt"`},
		{"branch without when", `{"responses":[],"branches":[{"responses":[{"text":"b"}]}]}`, "invalid provider script: branch 0: when must not be empty"},
		{"invalid branch response", `{"responses":[],"branches":[{"when":"a","responses":[{"chunkSize":-2}]}]}`, "invalid provider script: branch 0: response 0: chunkSize -2 is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scripted.Parse([]byte(tc.script))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, scripted.ErrInvalidScript) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to start with %q", err, tc.want)
			}
		})
	}
	if _, err := scripted.New(scripted.Responses(scripted.Text("a\xff"))); !errors.Is(err, scripted.ErrInvalidScript) ||
		err.Error() != "invalid provider script: response 0: text or reasoning is not valid UTF-8" {
		t.Fatalf("invalid UTF-8: %v", err)
	}
}

func TestScriptedIsSafeForConcurrentUse(t *testing.T) {
	p := parse(t, `{"responses":[{"text":"abcdefgh","chunkSize":1,"fail":{"afterChunks":3,"retryable":true,"attempts":5}}]}`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := collect(t, context.Background(), p, conversation("s", 0))
			if err != nil {
				mu.Lock()
				failures++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failures != 5 || p.Attempts("s", 0) != 20 {
		t.Fatalf("%d failures over %d attempts, want 5 over 20", failures, p.Attempts("s", 0))
	}
}

// TestScriptedDocExample runs the example of docs/SCRIPTED.md as the
// document describes it.
func TestScriptedDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/SCRIPTED.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no json example in docs/SCRIPTED.md")
	}
	p := parse(t, example)
	ctx := context.Background()
	got, err := collect(t, ctx, p, conversation("s", 0))
	var pe *provider.Error
	if len(got) != 2 || got[0].Type != "reasoning" || !errors.As(err, &pe) || !pe.Retryable || pe.Status != 429 {
		t.Fatalf("first call: %+v %v", got, err)
	}
	got, err = collect(t, ctx, p, conversation("s", 0))
	if err != nil || got[len(got)-1].Finish != "tool-calls" {
		t.Fatalf("retry: %+v %v", got, err)
	}
	a := provider.NewAssembler()
	for i, c := range got {
		if err := a.Push(c, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	want := []provider.Block{
		{Type: "reasoning", Text: "The user wants a.txt."},
		{Type: "text", Text: "Reading it."},
		{Type: "tool-call", ID: "call-1", Name: "read_file", Arguments: `{"path":"a.txt"}`},
	}
	if !reflect.DeepEqual(a.Content(), want) {
		t.Fatalf("content %+v", a.Content())
	}
	got, err = collect(t, ctx, p, conversation("s", 1))
	if err != nil || got[0].Delta != "a.txt says hello." || got[1].Finish != "stop" {
		t.Fatalf("second response: %+v %v", got, err)
	}
	_, err = collect(t, ctx, p, conversation("s", 2))
	if !errors.As(err, &pe) || pe.Retryable || pe.Message != "script exhausted: response 2 requested, the script has 2" {
		t.Fatalf("third call: %v", err)
	}
}
