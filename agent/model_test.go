package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func TestConversation(t *testing.T) {
	events := []session.Event{
		ev(t, wire.TypeTurnStart, 0, `{"turn":1}`),
		surface(t, wire.TypeSystemMessage, 1, `{"turn":1,"step":1,"message":{"role":"system","content":[{"type":"text","text":"sys"}]}}`),
		surface(t, wire.TypeUserMessage, 2, `{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`),
		ev(t, wire.TypeStepStart, 3, `{"turn":1,"step":1}`),
		surface(t, wire.TypeAssistantMessage, 4, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"reasoning","text":"hmm"},{"type":"text","text":"look"},{"type":"tool-call","id":"c1","name":"read_file","arguments":"{\"path\":\"a\"}"},{"type":"tool-call","id":"c2","name":"list_dir","arguments":{"path":"."}}]},"stream":[]}`),
		ev(t, wire.TypeToolCall, 5, `{"turn":1,"step":1,"callId":"c1","name":"read_file","arguments":"{}"}`),
		surface(t, wire.TypeToolResult, 6, `{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","isError":true,"content":[{"type":"text","text":"nope"}]}]}}`),
		surface(t, wire.TypeAssistantMessage, 7, `{"turn":1,"step":2,"message":{"role":"assistant","content":[]},"stream":[]}`),
		surface(t, wire.TypeAssistantMessage, 8, `{"turn":1,"step":3,"message":{"role":"assistant","content":[{"type":"text","text":"partial"}]},"stream":[],"interrupted":true}`),
		ev(t, wire.TypeTurnEnd, 9, `{"turn":1,"reason":{"kind":"aborted"}}`),
	}
	got, err := agent.Conversation(events)
	require.NoError(t, err)
	want := []provider.Message{
		{Role: "user", Content: []provider.Block{{Type: "text", Text: "hi"}}},
		{Role: "assistant", Content: []provider.Block{
			{Type: "reasoning", Text: "hmm"}, {Type: "text", Text: "look"},
			{Type: "tool-call", ID: "c1", Name: "read_file", Arguments: `{"path":"a"}`},
			{Type: "tool-call", ID: "c2", Name: "list_dir", Arguments: `{"path":"."}`},
		}},
		{Role: "user", Content: []provider.Block{{Type: "tool-result", ToolCallID: "c1", IsError: true, Content: []provider.Block{{Type: "text", Text: "nope"}}}}},
		{Role: "assistant", Content: []provider.Block{{Type: "text", Text: "partial"}}},
	}
	require.Equal(t, want, got)

	_, err = agent.Conversation([]session.Event{surface(t, wire.TypeToolResult, 0, `{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[]}}`)})
	require.ErrorContains(t, err, "tool/result (seq 0) has no content")
}

// tickingClock returns a clock for agent.Activities.Now that reads
// from, from+1, ... milliseconds on its successive calls.
func tickingClock(from int64) func() time.Time {
	var n atomic.Int64
	return func() time.Time { return time.UnixMilli(from + n.Add(1) - 1) }
}

// storedLines are the stored JSONL lines of events.
func storedLines(t *testing.T, events []session.Event) []string {
	t.Helper()
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = storedLine(t, e)
	}
	return out
}

// TestCallModelStoresOneMessage: the call reads the conversation from the
// log, offers the system prompt and the tools, and stores in one batch, as
// the published harness writes a model call: a request/context naming the
// route (the log has none yet), the stream's chunks as assistant/chunk
// events at the times they arrived (block-start, deltas and block-end per
// block, indexed by content position; the usage and finish last), and the
// assistant/message with its model source, citing every chunk.
func TestCallModelStoresOneMessage(t *testing.T) {
	var runs atomic.Int64
	tools := newTools(t, echoTool("echo", true, true, &runs), echoTool("shell", false, false, &runs))
	r := toolCalls([3]string{"call-1", "echo", `{"text":"a"}`}, [3]string{"call-2", "shell", `{}`})
	r.chunks = append([]provider.Chunk{reasoning("think"), usage(7, 3)}, r.chunks...)
	f := newFixture(t, tools, r)
	f.acts.Now = tickingClock(1000)

	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.Equal(t, agent.ModelResult{
		MessageSeq: 18, NextSeq: 19,
		ToolCalls: []agent.CallRef{{ID: "call-1", Name: "echo", Parallel: true}, {ID: "call-2", Name: "shell"}},
		Finish:    provider.FinishToolCalls, Usage: &provider.Usage{InputTokens: 7, OutputTokens: 3},
	}, res)

	require.Equal(t, 1, f.prov.calls())
	req := f.prov.requests[0]
	require.Equal(t, "be brief", req.System)
	require.Equal(t, "m1", req.Model)
	require.Equal(t, f.hd.ID(), req.SessionID)
	require.Equal(t, []provider.Message{{Role: "user", Content: []provider.Block{{Type: "text", Text: "hello"}}}}, req.Messages)
	require.Len(t, req.Tools, 2)

	log := f.log()
	chunk := func(seq, time int, c string) string {
		return fmt.Sprintf(`{"type":"assistant/chunk","seq":%d,"time":%d,"data":{"turn":1,"step":1,"chunk":%s}}`, seq, time, c)
	}
	require.Equal(t, []string{
		`{"type":"request/context","seq":3,"time":1006,"data":{"provider":"fake","model":"m1"}}`,
		chunk(4, 1000, `{"type":"block-start","index":0,"blockType":"reasoning"}`),
		chunk(5, 1000, `{"type":"reasoning-delta","index":0,"text":"think"}`),
		chunk(6, 1002, `{"type":"block-end","index":0,"block":{"type":"reasoning","text":"think"}}`),
		chunk(7, 1002, `{"type":"block-start","index":1,"blockType":"text"}`),
		chunk(8, 1002, `{"type":"text-delta","index":1,"text":"Let me look."}`),
		chunk(9, 1003, `{"type":"block-end","index":1,"block":{"type":"text","text":"Let me look."}}`),
		chunk(10, 1003, `{"type":"block-start","index":2,"blockType":"tool-call"}`),
		chunk(11, 1003, `{"type":"tool-call-delta","index":2,"id":"call-1","name":"echo","argumentsDelta":"{\"text\":\"a\"}"}`),
		chunk(12, 1004, `{"type":"block-start","index":3,"blockType":"tool-call"}`),
		chunk(13, 1004, `{"type":"tool-call-delta","index":3,"id":"call-2","name":"shell","argumentsDelta":"{}"}`),
		chunk(14, 1005, `{"type":"block-end","index":2,"block":{"type":"tool-call","id":"call-1","name":"echo","arguments":"{\"text\":\"a\"}"}}`),
		chunk(15, 1005, `{"type":"block-end","index":3,"block":{"type":"tool-call","id":"call-2","name":"shell","arguments":"{}"}}`),
		chunk(16, 1001, `{"type":"usage","usage":{"inputTokens":7,"outputTokens":3}}`),
		chunk(17, 1005, `{"type":"finish","reason":{"kind":"tool-calls"}}`),
		`{"type":"assistant/message","seq":18,"time":1006,"data":{"turn":1,"step":1,"message":{"id":"assistant-1-1","role":"assistant",` +
			`"content":[{"type":"reasoning","text":"think"},{"type":"text","text":"Let me look."},` +
			`{"type":"tool-call","id":"call-1","name":"echo","arguments":"{\"text\":\"a\"}"},{"type":"tool-call","id":"call-2","name":"shell","arguments":"{}"}],` +
			`"source":{"kind":"model","provider":"fake","model":"m1"}},"usage":{"inputTokens":7,"outputTokens":3}},` +
			`"surfaceOp":"append","sourceEventSeqs":[4,5,6,7,8,9,10,11,12,13,14,15,16,17]}`,
	}, storedLines(t, log[3:]))
	am, err := log[18].AssistantMessage()
	require.NoError(t, err)
	require.Len(t, am.ToolCalls(), 2)
	require.NoError(t, session.CheckAppendable(wire.Header{Version: wire.FormatVersion}, 3, log[3:]))
	require.NoError(t, session.CheckAppendable(wire.Header{Version: wire.FormatVersionV0}, 3, log[3:]))
}

// TestCallModelStoresTheRouteWhenItChanges: a request/context is stored
// before the first call of the log and again only when the call's route
// differs from the last one stored.
func TestCallModelStoresTheRouteWhenItChanges(t *testing.T) {
	f := newFixture(t, nil, answer("one"), answer("two"), answer("three"), answer("four"))
	f.acts.Providers["other"] = f.prov
	step := func(n int64, seq int64, prov, model string) {
		t.Helper()
		if n > 1 {
			f.append(ev(t, wire.TypeStepStart, seq, fmt.Sprintf(`{"turn":1,"step":%d}`, n)))
		}
		in := f.modelInput(1, n)
		in.Provider, in.Model = prov, model
		_, err := f.callModel(f.acts, in)
		require.NoError(t, err)
	}
	// Each call stores 5 chunks (block-start, delta, block-end, usage,
	// finish) and the message, after the route when it changed.
	step(1, 0, "fake", "m1")
	step(2, 10, "fake", "m1")
	step(3, 17, "fake", "m2")
	step(4, 25, "other", "m2")
	var routes []string
	for _, e := range f.log() {
		if e.Type == wire.TypeRequestContext {
			routes = append(routes, fmt.Sprintf("%d %s", e.Seq, e.Data))
		}
	}
	require.Equal(t, []string{
		`3 {"provider":"fake","model":"m1"}`,
		`18 {"provider":"fake","model":"m2"}`,
		`26 {"provider":"other","model":"m2"}`,
	}, routes)
}

// TestCallModelRetryStoresNoSecondMessage: a retried call (on this or
// another worker) after the message was stored returns it, calls no model
// and stores nothing; the finish reason survives the round trip.
func TestCallModelRetryStoresNoSecondMessage(t *testing.T) {
	r := answer("cut short")
	r.chunks[len(r.chunks)-1] = finish(provider.FinishMaxTokens)
	f := newFixture(t, nil, r, answer("second response"))
	first, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.False(t, first.Reused)
	require.Equal(t, provider.FinishMaxTokens, first.Finish)

	for _, acts := range []*agent.Activities{f.acts, f.actsOn(f.newStore())} {
		again, err := f.callModel(acts, f.modelInput(1, 1))
		require.NoError(t, err)
		require.True(t, again.Reused)
		again.Reused = false
		require.Equal(t, first, again)
	}
	require.Equal(t, 1, f.prov.calls())
	require.Equal(t, callTypes(5), types(f.log()))

	// The next step's call is a new call, with the first answer in its
	// conversation, and the same route (no request/context).
	f.append(ev(t, wire.TypeStepStart, 10, `{"turn":1,"step":2}`))
	second, err := f.callModel(f.acts, f.modelInput(1, 2))
	require.NoError(t, err)
	require.Equal(t, int64(16), second.MessageSeq)
	require.Equal(t, 2, f.prov.calls())
	require.Equal(t, "assistant", f.prov.requests[1].Messages[1].Role)
}

// TestCallModelConcurrentAttemptsStoreOneMessage: two attempts racing from
// two store instances store one message between them.
func TestCallModelConcurrentAttemptsStoreOneMessage(t *testing.T) {
	f := newFixture(t, nil, answer("only once"))
	others := []*agent.Activities{f.acts, f.actsOn(f.newStore()), f.actsOn(f.newStore())}
	var wg sync.WaitGroup
	results := make([]agent.ModelResult, len(others))
	errs := make([]error, len(others))
	for i, a := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = a.CallModel(bg, f.modelInput(1, 1))
		}()
	}
	wg.Wait()
	reused := 0
	for i, r := range results {
		require.NoError(t, errs[i])
		require.Equal(t, int64(9), r.MessageSeq)
		if r.Reused {
			reused++
		}
	}
	require.Equal(t, len(others)-1, reused, "all but the storing attempt see the stored message")
	require.Equal(t, callTypes(5), types(f.log()))
}

// cancelAfter runs CallModel in an activity environment whose context is
// cancelled with cause once n chunks streamed.
func cancelAfter(t *testing.T, f *fixture, n int, cause error) error {
	f.prov.streamed = make(chan provider.Chunk, 100)
	ctx, cancel := context.WithCancelCause(bg)
	defer cancel(nil)
	go func() {
		for range n {
			<-f.prov.streamed
		}
		cancel(cause)
	}()
	_, err := f.env(f.acts, withContext(ctx)).ExecuteActivity(wire.CallModelActivity, f.modelInput(1, 1))
	return err
}

// callTypes are the types of the fixture's log after one model call
// stored n chunks: the route, the chunks, the message.
func callTypes(n int) []string {
	out := []string{"turn/start", "user/message", "step/start", "request/context"}
	for range n {
		out = append(out, "assistant/chunk")
	}
	return append(out, "assistant/message")
}

// TestCallModelCancelStoresInterruptedAnchor: a cancelled stream that showed
// text stores the interrupted anchor with the shown text and reasoning and
// no tool call, citing the chunks that streamed, and returns the
// cancellation.
func TestCallModelCancelStoresInterruptedAnchor(t *testing.T) {
	f := newFixture(t, nil, response{chunks: []provider.Chunk{reasoning("thinking"), text("Hello "), text("wor"), callChunk(0, "c1", "echo", `{"te`)}, stall: true})
	f.acts.Now = tickingClock(1000)
	err := cancelAfter(t, f, 4, temporal.NewCanceledError())
	require.Error(t, err)
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled) || errors.Is(err, context.Canceled), "got %v", err)
	log := f.log()
	require.Equal(t, callTypes(9), types(log))
	chunk := func(seq, time int, c string) string {
		return fmt.Sprintf(`{"type":"assistant/chunk","seq":%d,"time":%d,"data":{"turn":1,"step":1,"chunk":%s}}`, seq, time, c)
	}
	require.Equal(t, []string{
		`{"type":"request/context","seq":3,"time":1004,"data":{"provider":"fake","model":"m1"}}`,
		chunk(4, 1000, `{"type":"block-start","index":0,"blockType":"reasoning"}`),
		chunk(5, 1000, `{"type":"reasoning-delta","index":0,"text":"thinking"}`),
		chunk(6, 1001, `{"type":"block-end","index":0,"block":{"type":"reasoning","text":"thinking"}}`),
		chunk(7, 1001, `{"type":"block-start","index":1,"blockType":"text"}`),
		chunk(8, 1001, `{"type":"text-delta","index":1,"text":"Hello "}`),
		chunk(9, 1002, `{"type":"text-delta","index":1,"text":"wor"}`),
		chunk(10, 1003, `{"type":"block-end","index":1,"block":{"type":"text","text":"Hello wor"}}`),
		chunk(11, 1003, `{"type":"block-start","index":2,"blockType":"tool-call"}`),
		chunk(12, 1003, `{"type":"tool-call-delta","index":2,"id":"c1","name":"echo","argumentsDelta":"{\"te"}`),
		`{"type":"assistant/message","seq":13,"time":1004,"data":{"turn":1,"step":1,"message":{"id":"assistant-1-1","role":"assistant",` +
			`"content":[{"type":"reasoning","text":"thinking"},{"type":"text","text":"Hello wor"}],` +
			`"source":{"kind":"model","provider":"fake","model":"m1"}},"interrupted":true},` +
			`"surfaceOp":"append","sourceEventSeqs":[4,5,6,7,8,9,10,11,12]}`,
	}, storedLines(t, log[3:]))
	requireBalancedAfterClosing(t, log)

	// A retry of the cancelled call finds the anchor.
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.True(t, res.Reused)
	require.True(t, res.Interrupted)
	require.Empty(t, res.ToolCalls)
	require.Equal(t, int64(13), res.MessageSeq)
}

// requireBalancedAfterClosing: closing the open turn as resume would gives
// a balanced log with no pending call.
func requireBalancedAfterClosing(t *testing.T, log []session.Event) {
	t.Helper()
	ot, open, err := session.ScanOpenTurn(log)
	require.NoError(t, err)
	require.True(t, open)
	require.Empty(t, ot.PendingCalls)
}

// TestCallModelCancelWithoutShownTextStoresNothing: no text or reasoning
// shown, or a context ended for another reason than a cancellation (a
// timeout, a worker shutdown: the call is retried), stores nothing.
func TestCallModelCancelWithoutShownTextStoresNothing(t *testing.T) {
	f := newFixture(t, nil, response{chunks: []provider.Chunk{callChunk(0, "c1", "echo", `{}`)}, stall: true})
	require.Error(t, cancelAfter(t, f, 1, temporal.NewCanceledError()))
	require.Len(t, f.log(), 3)

	g := newFixture(t, nil, response{chunks: []provider.Chunk{text("Hello")}, stall: true})
	require.Error(t, cancelAfter(t, g, 1, errors.New("worker shutting down")))
	require.Len(t, g.log(), 3, "only a cancellation of the activity stores an anchor")
}

// TestCallModelProviderErrors: refused → non-retryable ProviderRefused with
// the provider error as details; retryable → ProviderUnavailable with the
// provider's RetryAfter as the next retry delay; unknown provider →
// non-retryable; a stream without a finish → retryable. Nothing is stored.
func TestCallModelProviderErrors(t *testing.T) {
	refused := &provider.Error{Status: 400, Code: "bad_request", Message: "context too long"}
	limited := &provider.Error{Retryable: true, Status: 429, Message: "rate limited", RetryAfter: 1500 * time.Millisecond}
	f := newFixture(t, nil, response{chunks: []provider.Chunk{text("x")}, fail: refused})

	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "ProviderRefused", app.Type())
	require.True(t, app.NonRetryable())
	var details provider.Error
	require.NoError(t, app.Details(&details))
	require.Equal(t, *refused, details)
	require.Contains(t, app.Error(), "model call failed (status 400, bad_request): context too long")

	f.prov.responses = []response{{chunks: []provider.Chunk{text("x")}, fail: limited}}
	_, err = f.callModel(f.acts, f.modelInput(1, 1))
	require.ErrorAs(t, err, &app)
	require.Equal(t, "ProviderUnavailable", app.Type())
	require.False(t, app.NonRetryable())
	details = provider.Error{}
	require.Equal(t, 1500*time.Millisecond, app.NextRetryDelay())
	require.NoError(t, app.Details(&details))
	require.Equal(t, *limited, details)

	f.prov.responses = []response{{chunks: []provider.Chunk{text("no finish")}}}
	_, err = f.callModel(f.acts, f.modelInput(1, 1))
	require.ErrorAs(t, err, &app)
	require.Equal(t, "ProviderUnavailable", app.Type())
	require.False(t, app.NonRetryable())

	in := f.modelInput(1, 1)
	in.Provider = "nobody"
	_, err = f.callModel(f.acts, in)
	require.ErrorAs(t, err, &app)
	require.Equal(t, "UnknownProvider", app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Error(), `unknown model provider "nobody"`)

	require.Len(t, f.log(), 3)
}

// TestCallModelHeartbeatsProgress: heartbeats carry ModelProgress, the
// first one due an interval after the stream started: a call that ends
// sooner sends none, and a stream that lasts longer shows its progress (the
// SDK throttles what reaches the server; the test environment passes the
// first heartbeat of each throttling window to the listener, and the window
// is 30 s here).
func TestCallModelHeartbeatsProgress(t *testing.T) {
	listen := func(env *testsuite.TestActivityEnvironment) func() []wire.ModelProgress {
		var mu sync.Mutex
		var beats []wire.ModelProgress
		env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
			var p wire.ModelProgress
			if d.HasValues() && d.Get(&p) == nil {
				mu.Lock()
				beats = append(beats, p)
				mu.Unlock()
			}
		})
		return func() []wire.ModelProgress {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(beats)
		}
	}
	t.Run("a call shorter than an interval sends none", func(t *testing.T) {
		f := newFixture(t, nil, response{chunks: []provider.Chunk{reasoning("plan"), text("Hi"), finish(provider.FinishStop)}})
		env := f.env(f.acts)
		beats := listen(env)
		f.acts.Runtime.HeartbeatInterval = time.Hour
		_, err := env.ExecuteActivity(wire.CallModelActivity, f.modelInput(1, 1))
		require.NoError(t, err)
		require.Empty(t, beats())
	})
	t.Run("a longer stream shows its progress", func(t *testing.T) {
		f := newFixture(t, nil, response{chunks: []provider.Chunk{reasoning("plan"), text("Hi"), finish(provider.FinishStop)}})
		env := f.env(f.acts)
		beats := listen(env)
		f.acts.Runtime.HeartbeatInterval = 100 * time.Millisecond
		f.prov.streamed = make(chan provider.Chunk)
		done := make(chan error, 1)
		go func() {
			_, err := env.ExecuteActivity(wire.CallModelActivity, f.modelInput(1, 1))
			done <- err
		}()
		// The stream stops after its second chunk (the provider goes on to
		// it once the first is taken) for several intervals.
		<-f.prov.streamed
		time.Sleep(600 * time.Millisecond)
		<-f.prov.streamed
		<-f.prov.streamed
		require.NoError(t, <-done)
		require.Equal(t, []wire.ModelProgress{{Turn: 1, Step: 1, Chunks: 2, Text: "Hi", Attempt: 1}}, beats())
	})
}

// TestCallModelUnreadableConversation: a message event the conversation
// cannot be derived from is a non-retryable InvalidLog error naming it.
func TestCallModelUnreadableConversation(t *testing.T) {
	f := newFixture(t, nil, answer("never"))
	f.append(
		surface(t, wire.TypeUserMessage, 3, `{"id":"u-2","role":"user","content":"not blocks","source":{"kind":"user"}}`),
	)
	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "InvalidLog", app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Error(), "conversation: user/message (seq 3)")
	require.Equal(t, 0, f.prov.calls())
}

// TestCallModelMalformedStream: a stream the assembler refuses (a provider
// bug) is a non-retryable ProviderRefused error and stores nothing.
func TestCallModelMalformedStream(t *testing.T) {
	f := newFixture(t, nil, response{chunks: []provider.Chunk{text("a"), {Type: provider.ChunkToolCall, Index: 3, Delta: "{"}, finish(provider.FinishStop)}})
	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "ProviderRefused", app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Error(), "malformed model stream")
	require.Len(t, f.log(), 3)
}
