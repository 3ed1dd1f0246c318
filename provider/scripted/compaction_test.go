package scripted_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
)

// The estimates below are the harness's heuristic: a one-word message of
// conversation() is 1 token of text + 4 (block) + 4 (role) = 9, so a
// conversation of n assistant messages is 9*(1+2n); the instruction
// "Summarise the conversation." is 7 + 4 + 4 = 15.

// compactionRequest is the compaction call of session over the
// conversation of n assistant messages, with its closing instruction.
func compactionRequest(session string, n int) provider.Request {
	req := conversation(session, n)
	req.Purpose = provider.PurposeCompaction
	req.Messages = append(req.Messages, provider.Message{Role: "user",
		Content: []provider.Block{{Type: "text", Text: "Summarise the conversation."}}})
	return req
}

// providerErr asserts err is a *provider.Error and returns it.
func providerErr(t *testing.T, err error) provider.Error {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want a *provider.Error", err, err)
	}
	return *pe
}

func TestScriptedContextWindowRefusesALargerRequest(t *testing.T) {
	p := parse(t, `{"contextWindow": 26, "responses": [{"text": "zero"}, {"text": "one"}]}`)
	if p.ContextWindow() != 26 {
		t.Fatalf("ContextWindow() = %d", p.ContextWindow())
	}
	ctx := context.Background()
	// 9 tokens: within the window.
	got, err := collect(t, ctx, p, conversation("s", 0))
	if err != nil || len(got) != 2 || got[0].Delta != "zero" {
		t.Fatalf("a request within the window: %+v %v", got, err)
	}
	// 27 tokens: one over.
	got, err = collect(t, ctx, p, conversation("s", 1))
	want := provider.Error{Status: 400, Code: "CONTEXT_WINDOW_EXCEEDED",
		Message: "request of 27 estimated tokens exceeds the context window of 26"}
	if pe := providerErr(t, err); pe != want || len(got) != 0 {
		t.Fatalf("error %#v after %d chunks, want %#v before any", pe, len(got), want)
	}
	// The refusal comes before the script is found exhausted.
	_, err = collect(t, ctx, p, conversation("s", 4))
	if pe := providerErr(t, err); pe.Code != "CONTEXT_WINDOW_EXCEEDED" || pe.Message != "request of 81 estimated tokens exceeds the context window of 26" {
		t.Fatalf("an oversized request past the script: %#v", pe)
	}
	// A refused call is no attempt of its response; the largest request
	// asked is kept per session.
	if p.Attempts("s", 1) != 0 || p.Attempts("s", 0) != 1 {
		t.Fatalf("attempts %d %d", p.Attempts("s", 0), p.Attempts("s", 1))
	}
	if p.MaxRequestTokens("s") != 81 || p.MaxRequestTokens("other") != 0 {
		t.Fatalf("MaxRequestTokens %d %d", p.MaxRequestTokens("s"), p.MaxRequestTokens("other"))
	}
	// A smaller request later leaves the maximum.
	_, _ = collect(t, ctx, p, conversation("s", 0))
	_, _ = collect(t, ctx, p, conversation("other", 0))
	if p.MaxRequestTokens("s") != 81 || p.MaxRequestTokens("other") != 9 {
		t.Fatalf("MaxRequestTokens %d %d", p.MaxRequestTokens("s"), p.MaxRequestTokens("other"))
	}

	// A window equal to the estimate holds the request; the system prompt
	// and the tools count.
	exact, err := scripted.New(scripted.Responses(scripted.Text("zero"), scripted.Text("one")).WithContextWindow(27))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := collect(t, ctx, exact, conversation("s", 1)); err != nil || got[0].Delta != "one" {
		t.Fatalf("a request the size of the window: %+v %v", got, err)
	}
	req := conversation("s", 1)
	req.System = "Be brief."
	_, err = collect(t, ctx, exact, req)
	if pe := providerErr(t, err); pe.Message != "request of 34 estimated tokens exceeds the context window of 27" {
		t.Fatalf("with a system prompt: %#v", pe)
	}
	if exact.MaxRequestTokens("s") != 34 {
		t.Fatalf("MaxRequestTokens %d", exact.MaxRequestTokens("s"))
	}

	// Without a window nothing is refused.
	open := parse(t, `{"loop": true, "responses": [{"text": "a"}]}`)
	if open.ContextWindow() != 0 {
		t.Fatalf("ContextWindow() = %d", open.ContextWindow())
	}
	if _, err := collect(t, ctx, open, conversation("s", 300)); err != nil {
		t.Fatal(err)
	}
	if open.MaxRequestTokens("s") != 5409 {
		t.Fatalf("MaxRequestTokens %d", open.MaxRequestTokens("s"))
	}
}

func TestScriptedReportsItsWindow(t *testing.T) {
	p := parse(t, `{"contextWindow": 5000, "responses": []}`)
	if w, ok := provider.ProviderContextWindow(p, "scripted", "m"); w != 5000 || !ok {
		t.Fatalf("ProviderContextWindow = %d, %v", w, ok)
	}
	none := parse(t, `{"responses": []}`)
	if w, ok := provider.ProviderContextWindow(none, "scripted", "m"); w != 0 || ok {
		t.Fatalf("without a window: %d, %v", w, ok)
	}
}

func TestScriptedCompactionDoesNotConsumeAResponse(t *testing.T) {
	p := parse(t, `{"responses": [
	  {"text": "zero", "fail": {"retryable": true, "status": 429, "message": "later", "attempts": 1}},
	  {"text": "one"}]}`)
	ctx := context.Background()
	// A compaction call first: the default summary, and response 0's one
	// failure is still to come.
	got, err := collect(t, ctx, p, compactionRequest("s", 0))
	want := []provider.Chunk{{Type: "text", Delta: "Summary of 1 messages."}, {Type: "finish", Finish: "stop"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("compaction call: %+v %v", got, err)
	}
	if _, err := collect(t, ctx, p, conversation("s", 0)); providerErr(t, err).Message != "later" {
		t.Fatalf("response 0's first call: %v", err)
	}
	if got, err := collect(t, ctx, p, conversation("s", 0)); err != nil || got[0].Delta != "zero" {
		t.Fatalf("response 0's retry: %+v %v", got, err)
	}
	// Compaction calls between the responses, over a conversation of one
	// and of two assistant messages (past the script's end).
	for n, k := range map[int]string{1: "Summary of 3 messages.", 2: "Summary of 5 messages."} {
		got, err := collect(t, ctx, p, compactionRequest("s", n))
		if err != nil || len(got) != 2 || got[0].Delta != k {
			t.Fatalf("compaction over %d assistant messages: %+v %v", n, got, err)
		}
	}
	if got, err := collect(t, ctx, p, conversation("s", 1)); err != nil || got[0].Delta != "one" {
		t.Fatalf("response 1: %+v %v", got, err)
	}
	if p.CompactionCalls("s") != 3 || p.Attempts("s", scripted.CompactionIndex) != 3 || p.Attempts("s", 1) != 1 || p.Attempts("s", 0) != 2 {
		t.Fatalf("compactions %d, attempts compaction %d, 0 %d, 1 %d", p.CompactionCalls("s"),
			p.Attempts("s", scripted.CompactionIndex), p.Attempts("s", 0), p.Attempts("s", 1))
	}
	if p.CompactionCalls("other") != 0 {
		t.Fatalf("another session: %d", p.CompactionCalls("other"))
	}
	// A compaction call of a request without messages.
	empty := provider.Request{SessionID: "e", Purpose: provider.PurposeCompaction}
	if got, err := collect(t, ctx, p, empty); err != nil || got[0].Delta != "Summary of 0 messages." {
		t.Fatalf("no messages: %+v %v", got, err)
	}
	// Any other purpose is an ordinary call.
	req := conversation("s", 1)
	req.Purpose = "title"
	if got, err := collect(t, ctx, p, req); err != nil || got[0].Delta != "one" {
		t.Fatalf("purpose title: %+v %v", got, err)
	}
}

func TestScriptedCompactionResponse(t *testing.T) {
	p := parse(t, `{"contextWindow": 42, "responses": [{"text": "zero"}],
	  "compaction": {"text": "The user said hi.", "chunkSize": 8, "usage": {"inputTokens": 42, "outputTokens": 5},
	                 "fail": {"afterChunks": 1, "retryable": true, "status": 503, "code": "overloaded", "message": "busy", "attempts": 1}}}`)
	ctx := context.Background()
	// Its failure, on the first compaction call only.
	got, err := collect(t, ctx, p, compactionRequest("s", 1))
	want := provider.Error{Retryable: true, Status: 503, Code: "overloaded", Message: "busy"}
	if pe := providerErr(t, err); pe != want || len(got) != 1 || got[0].Delta != "The user" {
		t.Fatalf("first compaction call: %+v then %#v", got, pe)
	}
	got, err = collect(t, ctx, p, compactionRequest("s", 1))
	wantChunks := []provider.Chunk{
		{Type: "text", Delta: "The user"}, {Type: "text", Delta: " said hi"}, {Type: "text", Delta: "."},
		{Type: "usage", Usage: &provider.Usage{InputTokens: 42, OutputTokens: 5}},
		{Type: "finish", Finish: "stop"},
	}
	if err != nil || !reflect.DeepEqual(got, wantChunks) {
		t.Fatalf("second compaction call: %+v %v", got, err)
	}
	// A compaction call over the window is refused like any other, and is
	// no attempt of the compaction response.
	_, err = collect(t, ctx, p, compactionRequest("s", 2))
	if pe := providerErr(t, err); pe != (provider.Error{Status: 400, Code: "CONTEXT_WINDOW_EXCEEDED",
		Message: "request of 60 estimated tokens exceeds the context window of 42"}) {
		t.Fatalf("oversized compaction call: %#v", pe)
	}
	if p.CompactionCalls("s") != 3 || p.Attempts("s", scripted.CompactionIndex) != 2 || p.MaxRequestTokens("s") != 60 {
		t.Fatalf("compactions %d, attempts %d, max %d", p.CompactionCalls("s"), p.Attempts("s", scripted.CompactionIndex), p.MaxRequestTokens("s"))
	}
	// The ordinary response is untouched.
	if got, err := collect(t, ctx, p, conversation("s", 0)); err != nil || got[0].Delta != "zero" || p.Attempts("s", 0) != 1 {
		t.Fatalf("response 0: %+v %v", got, err)
	}
}

func TestScriptedCompactionStalls(t *testing.T) {
	p, err := scripted.New(scripted.Responses().WithCompaction(scripted.Text("abc").WithChunkSize(1).WithStall(1)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []provider.Chunk
	var last error
	for c, err := range p.Stream(ctx, compactionRequest("s", 0)) {
		if err != nil {
			last = err
			break
		}
		got = append(got, c)
		cancel()
	}
	if !errors.Is(last, context.Canceled) || len(got) != 1 {
		t.Fatalf("%+v then %v", got, last)
	}
}

func TestScriptedRefusesInvalidWindowAndCompaction(t *testing.T) {
	cases := []struct {
		name, script, want string
	}{
		{"zero window", `{"contextWindow": 0, "responses": []}`, "invalid provider script: contextWindow 0 is not a positive integer"},
		{"negative window", `{"contextWindow": -5, "responses": []}`, "invalid provider script: contextWindow -5 is not a positive integer"},
		{"fractional window", `{"contextWindow": 1.5, "responses": []}`, "invalid provider script: contextWindow 1.5 is not a positive integer"},
		{"window as a string", `{"contextWindow": "1000", "responses": []}`, `invalid provider script: contextWindow "1000" is not a positive integer`},
		{"null window", `{"contextWindow": null, "responses": []}`, "invalid provider script: contextWindow null is not a positive integer"},
		{"window past 2^53-1", `{"contextWindow": 9007199254740992, "responses": []}`,
			"invalid provider script: contextWindow 9007199254740992 is outside 1..9007199254740991 (0 for none)"},
		{"unknown compaction field", `{"responses": [], "compaction": {"txt": "a"}}`, `invalid provider script: compaction: json: unknown field "txt"`},
		{"unknown compaction fail field", `{"responses": [], "compaction": {"fail": {"after": 1}}}`, `invalid provider script: compaction: json: unknown field "after"`},
		{"null compaction", `{"responses": [], "compaction": null}`, "invalid provider script: compaction: not a response object"},
		{"compaction as a string", `{"responses": [], "compaction": "summary"}`, "invalid provider script: compaction: json: cannot unmarshal string"},
		{"compaction finish", `{"responses": [], "compaction": {"finish": "done"}}`, `invalid provider script: compaction: unknown finish "done" (stop, tool-calls or max-tokens)`},
		{"compaction fail after the finish", `{"responses": [], "compaction": {"text": "ab", "fail": {"afterChunks": 2}}}`,
			"invalid provider script: compaction: fail.afterChunks 2 is outside 0..1 (the response streams 2 chunks and the failure comes before its finish chunk)"},
		{"compaction negative delay", `{"responses": [], "compaction": {"delayMs": -1}}`, "invalid provider script: compaction: delayMs -1 is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scripted.Parse([]byte(tc.script))
			if !errors.Is(err, scripted.ErrInvalidScript) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to start with %q", err, tc.want)
			}
		})
	}
	for _, s := range []scripted.Script{
		scripted.Responses().WithContextWindow(-1),
		scripted.Responses().WithContextWindow(1 << 53),
		scripted.Responses().WithCompaction(scripted.Response{ChunkSize: -2}),
	} {
		if _, err := scripted.New(s); !errors.Is(err, scripted.ErrInvalidScript) {
			t.Fatalf("New(%+v): %v", s, err)
		}
	}
	if p, err := scripted.New(scripted.Responses().WithContextWindow(1<<53 - 1)); err != nil || p.ContextWindow() != 1<<53-1 {
		t.Fatalf("the largest window: %v", err)
	}
}

func TestScriptedWindowAndCompactionRoundTripThroughJSON(t *testing.T) {
	s := scripted.Responses(scripted.Text("a")).WithContextWindow(5000).
		WithCompaction(scripted.Text("summary").WithUsage(40, 3).WithFail(scripted.Fail{Retryable: true, Attempts: 1}))
	data, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"contextWindow": 5000`) || !strings.Contains(string(data), `"compaction": {`) {
		t.Fatalf("marshalled %s", data)
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
	// Without them, neither is written.
	data, err = scripted.Responses(scripted.Text("a")).Marshal()
	if err != nil || strings.Contains(string(data), "contextWindow") || strings.Contains(string(data), "compaction") {
		t.Fatalf("marshalled %s %v", data, err)
	}
}

// TestScriptedDocCompactionExample runs the compaction example of
// docs/SCRIPTED.md (its second json block) as the document describes it.
func TestScriptedDocCompactionExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/SCRIPTED.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```json\n")
	if len(blocks) < 3 {
		t.Fatal("no second json example in docs/SCRIPTED.md")
	}
	example, _, _ := strings.Cut(blocks[2], "```")
	p := parse(t, example)
	ctx := context.Background()
	big := conversation("s", 0)
	big.Messages[0].Content[0].Text = strings.Repeat("word ", 1600) // 2000 tokens of text, 2008 in all
	if _, err := collect(t, ctx, p, big); providerErr(t, err).Message != "request of 2008 estimated tokens exceeds the context window of 2000" {
		t.Fatalf("a request over the window: %v", err)
	}
	got, err := collect(t, ctx, p, compactionRequest("s", 1))
	if pe := providerErr(t, err); !pe.Retryable || pe.Status != 503 || pe.Message != "overloaded" || len(got) != 0 {
		t.Fatalf("first compaction call: %+v %#v", got, pe)
	}
	got, err = collect(t, ctx, p, compactionRequest("s", 1))
	want := []provider.Chunk{{Type: "text", Delta: "The user asked for a.txt; it says hello."},
		{Type: "usage", Usage: &provider.Usage{InputTokens: 1900, OutputTokens: 12}}, {Type: "finish", Finish: "stop"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("its retry: %+v %v", got, err)
	}
	if got, err := collect(t, ctx, p, conversation("s", 0)); err != nil || got[0].Delta != "a.txt says hello." {
		t.Fatalf("the first ordinary call: %+v %v", got, err)
	}
}
