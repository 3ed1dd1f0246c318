package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// signalling is a provider that sends on streamed after each chunk it
// handed over (the model activity pushed it).
type signalling struct {
	next     provider.Provider
	streamed chan struct{}
}

func (s signalling) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		for c, err := range s.next.Stream(ctx, req) {
			if !yield(c, err) || err != nil {
				return
			}
			s.streamed <- struct{}{}
		}
	}
}

// agentLog drives the agent activities over one session of a v0 root, in
// the order the turn workflow runs them.
type agentLog struct {
	t    *testing.T
	st   *jsonl.Store
	h    *jsonl.Handle
	acts *agent.Activities
}

// appendEvent appends one event of type typ at the log's next seq.
func (l *agentLog) appendEvent(typ, data string) {
	l.t.Helper()
	next, err := l.h.Update(context.Background(), 0, func(_ []session.Event, next int64) ([]session.Event, error) {
		e, err := session.NewEvent(typ, next, 1767225600000+next, json.RawMessage(data))
		if err != nil {
			return nil, err
		}
		if session.SurfaceEligible(typ) {
			e.SurfaceOp = session.AppendOp()
		}
		return []session.Event{e}, nil
	})
	if err != nil || next < 1 {
		l.t.Fatalf("append %s: %v", typ, err)
	}
}

// openTurn opens turn n and its step 1 with a prompt, as a turn does.
func (l *agentLog) openTurn(n int, prompt string) {
	l.t.Helper()
	l.appendEvent(wire.TypeTurnStart, fmt.Sprintf(`{"turn":%d}`, n))
	l.appendEvent(wire.TypeStepStart, fmt.Sprintf(`{"turn":%d,"step":1}`, n))
	l.appendEvent(wire.TypeUserMessage, fmt.Sprintf(`{"id":"u%d","role":"user","content":[{"type":"text","text":%q}],"source":{"kind":"user"}}`, n, prompt))
}

// run runs activity with in in a Temporal test activity environment whose
// context is ctx and decodes its result into out.
func (l *agentLog) run(ctx context.Context, activity string, in, out any) error {
	var suite sdktest.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivity(l.acts)
	v, err := env.ExecuteActivity(activity, in)
	if err != nil {
		return err
	}
	return v.Get(out)
}

func (l *agentLog) must(activity string, in, out any) {
	l.t.Helper()
	if err := l.run(context.Background(), activity, in, out); err != nil {
		l.t.Fatalf("%s: %v", activity, err)
	}
}

func (l *agentLog) model(turn int64) agent.ModelResult {
	l.t.Helper()
	var res agent.ModelResult
	l.must(wire.CallModelActivity, agent.ModelInput{Ref: l.h.Ref(), Turn: turn, Step: 1, Provider: "scripted", Model: "m1"}, &res)
	return res
}

// TestHarnessLoadsTheAgentsClosersOfAV0Root: what the agent writes when a
// turn does not complete is accepted by the published harness on a v0
// root, and its conversation derives: the max-tokens results of the calls
// of a message cut at its token limit (CloseCalls, EndTurn); a cancelled
// turn's outcome-unknown result of a recorded call and the
// aborted-before-dispatch result of an undispatched one (EndTurn); the
// interrupted anchor of a model call cancelled mid-stream, citing the
// chunks that streamed; and the closers a resume stores for a turn left
// open by a crash.
func TestHarnessLoadsTheAgentsClosersOfAV0Root(t *testing.T) {
	root := t.TempDir()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, Format: jsonl.FormatV0})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := st.Create(ctx, wire.Header{ID: "closers", CreatedAt: 1767225600000, Cwd: "/work/project"},
		jsonl.CreateOptions{HandleID: "h-closers", Owner: jsonl.Owner{WorkflowID: "session/closers", RunID: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := scripted.New(scripted.Responses(
		scripted.Response{ToolCalls: []scripted.Call{{ID: "c1", Name: "echo", Arguments: `{"te`}, {ID: "c2", Name: "echo", Arguments: `{}`}}, Finish: provider.FinishMaxTokens},
		scripted.ToolCalls(scripted.Call{ID: "c3", Name: "shell", Arguments: `{}`}, scripted.Call{ID: "c4", Name: "shell", Arguments: `{}`}),
		scripted.Text("A partial answer").WithChunkSize(4).WithStall(3),
		scripted.ToolCall("c5", "shell", `{}`),
	))
	if err != nil {
		t.Fatal(err)
	}
	streamed := make(chan struct{}, 64)
	l := &agentLog{t: t, st: st, h: h, acts: &agent.Activities{Runtime: &activities.Runtime{Store: st},
		Providers: provider.Set{"scripted": signalling{next: p, streamed: streamed}}}}

	// Turn 1: the model's calls are cut at its token limit.
	l.openTurn(1, "one")
	res := l.model(1)
	var closed agent.CloseCallsResult
	l.must(wire.CloseCallsActivity, agent.CloseCallsInput{Ref: h.Ref(), Turn: 1, MessageSeq: res.MessageSeq, MaxTokens: true}, &closed)
	var ended agent.EndTurnResult
	l.must(wire.EndTurnActivity, agent.EndTurnInput{Ref: h.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq, MaxTokens: true,
		Reason: wire.TurnEndReason{Kind: "max-tokens"}}, &ended)

	// Turn 2: cancelled after c3's tool/call was stored, before c4 ran.
	l.openTurn(2, "two")
	res = l.model(2)
	l.appendEvent(wire.TypeToolCall, `{"turn":2,"step":1,"callId":"c3","name":"shell","arguments":"{}"}`)
	l.must(wire.EndTurnActivity, agent.EndTurnInput{Ref: h.Ref(), Turn: 2, Step: 1, MessageSeq: res.MessageSeq, Skipped: []string{"c4"},
		Reason: wire.TurnEndReason{Kind: "aborted", Reason: json.RawMessage(`{"kind":"user"}`)}}, &ended)

	// Turn 3: cancelled while the answer streams.
	for len(streamed) > 0 {
		<-streamed
	}
	l.openTurn(3, "three")
	cctx, cancel := context.WithCancelCause(ctx)
	go func() {
		for range 3 {
			<-streamed
		}
		cancel(temporal.NewCanceledError("turn cancelled"))
	}()
	if err := l.run(cctx, wire.CallModelActivity, agent.ModelInput{Ref: h.Ref(), Turn: 3, Step: 1, Provider: "scripted", Model: "m1"}, &res); err == nil {
		t.Fatal("the cancelled model call succeeded")
	}
	l.must(wire.EndTurnActivity, agent.EndTurnInput{Ref: h.Ref(), Turn: 3, Step: 1, MessageSeq: -1,
		Reason: wire.TurnEndReason{Kind: "aborted", Reason: json.RawMessage(`{"kind":"user"}`)}}, &ended)

	// Turn 4: the worker dies after c5's tool/call; a resume closes the turn.
	l.openTurn(4, "four")
	l.model(4)
	l.appendEvent(wire.TypeToolCall, `{"turn":4,"step":1,"callId":"c5","name":"shell","arguments":"{}"}`)
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := starter(t, "log", "repair", "--id", "closers", "--root", root, "--compression", "none", "--format", "v0"); err != nil {
		t.Fatalf("log repair: %v\n%s%s", err, out, errOut)
	}

	rs := runHarness(t, root, "none", op{"op": "load", "id": "closers"}, op{"op": "messages", "id": "closers"})
	var loaded struct {
		Events []loadedEvent `json:"events"`
	}
	if err := json.Unmarshal(mustOK(t, "load", rs[0]), &loaded); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range loaded.Events {
		if e.Type == wire.TypeAssistantChunk && !strings.Contains(string(e.Data), `"turn":3`) {
			continue // the chunks of the finished calls (their shapes are the other test's)
		}
		got = append(got, e.line(t))
	}
	want := []string{
		`0 turn/start {"turn":1}`,
		`1 step/start {"step":1,"turn":1}`,
		`2 user/message {"content":[{"text":"one","type":"text"}],"id":"u1","role":"user","source":{"kind":"user"}} surfaceOp="append"`,
		`3 request/context {"model":"m1","provider":"scripted"}`,
		`11 assistant/message {"message":{"content":[{"arguments":"{\"te","id":"c1","name":"echo","type":"tool-call"},{"arguments":"{}","id":"c2","name":"echo","type":"tool-call"}],"id":"assistant-1-1","role":"assistant","source":{"kind":"model","model":"m1","provider":"scripted"}},"step":1,"turn":1} surfaceOp="append" cites=[4 5 6 7 8 9 10]`,
		`12 tool/call {"arguments":"{\"te","callId":"c1","name":"echo","step":1,"turn":1}`,
		`13 tool/result {"error":{"code":"MAX_TOKENS_NOT_RUN","name":"ToolNotRunError"},"message":{"content":[{"content":[{"text":"` + maxTokensText + `","type":"text"}],"isError":true,"toolCallId":"c1","type":"tool-result"}],"id":"tool-result-1-1-c1","role":"user","source":{"callId":"c1","kind":"tool"}},"step":1,"turn":1} surfaceOp="append" cites=[12]`,
		`14 tool/call {"arguments":"{}","callId":"c2","name":"echo","step":1,"turn":1}`,
		`15 tool/result {"error":{"code":"MAX_TOKENS_NOT_RUN","name":"ToolNotRunError"},"message":{"content":[{"content":[{"text":"` + maxTokensText + `","type":"text"}],"isError":true,"toolCallId":"c2","type":"tool-result"}],"id":"tool-result-1-1-c2","role":"user","source":{"callId":"c2","kind":"tool"}},"step":1,"turn":1} surfaceOp="append" cites=[14]`,
		`16 step/end {"step":1,"turn":1}`,
		`17 turn/end {"reason":{"kind":"max-tokens"},"turn":1}`,
		`18 turn/start {"turn":2}`,
		`19 step/start {"step":1,"turn":2}`,
		`20 user/message {"content":[{"text":"two","type":"text"}],"id":"u2","role":"user","source":{"kind":"user"}} surfaceOp="append"`,
		`28 assistant/message {"message":{"content":[{"arguments":"{}","id":"c3","name":"shell","type":"tool-call"},{"arguments":"{}","id":"c4","name":"shell","type":"tool-call"}],"id":"assistant-2-1","role":"assistant","source":{"kind":"model","model":"m1","provider":"scripted"}},"step":1,"turn":2} surfaceOp="append" cites=[21 22 23 24 25 26 27]`,
		`29 tool/call {"arguments":"{}","callId":"c3","name":"shell","step":1,"turn":2}`,
		`30 tool/result {"error":{"code":"TOOL_OUTCOME_UNKNOWN","name":"ToolOutcomeUnknownError"},"message":{"content":[{"content":[{"text":"` + unknownText + `","type":"text"}],"isError":true,"toolCallId":"c3","type":"tool-result"}],"id":"interrupted-tool-result-c3-30","role":"user","source":{"callId":"c3","kind":"tool"}},"step":1,"turn":2} surfaceOp="append" cites=[29]`,
		`31 tool/call {"arguments":"{}","callId":"c4","name":"shell","step":1,"turn":2}`,
		`32 tool/result {"error":{"code":"ABORTED_BEFORE_DISPATCH","name":"AbortError"},"message":{"content":[{"content":[{"text":"Error: tool call aborted before dispatch","type":"text"}],"isError":true,"toolCallId":"c4","type":"tool-result"}],"id":"tool-result-2-1-c4","role":"user","source":{"callId":"c4","kind":"tool"}},"step":1,"turn":2} surfaceOp="append" cites=[31]`,
		`33 step/end {"step":1,"turn":2}`,
		`34 turn/end {"reason":{"kind":"aborted","reason":{"kind":"user"}},"turn":2}`,
		`35 turn/start {"turn":3}`,
		`36 step/start {"step":1,"turn":3}`,
		`37 user/message {"content":[{"text":"three","type":"text"}],"id":"u3","role":"user","source":{"kind":"user"}} surfaceOp="append"`,
		`38 assistant/chunk {"chunk":{"blockType":"text","index":0,"type":"block-start"},"step":1,"turn":3}`,
		`39 assistant/chunk {"chunk":{"index":0,"text":"A pa","type":"text-delta"},"step":1,"turn":3}`,
		`40 assistant/chunk {"chunk":{"index":0,"text":"rtia","type":"text-delta"},"step":1,"turn":3}`,
		`41 assistant/chunk {"chunk":{"index":0,"text":"l an","type":"text-delta"},"step":1,"turn":3}`,
		`42 assistant/message {"interrupted":true,"message":{"content":[{"text":"A partial an","type":"text"}],"id":"assistant-3-1","role":"assistant","source":{"kind":"model","model":"m1","provider":"scripted"}},"step":1,"turn":3} surfaceOp="append" cites=[38 39 40 41]`,
		`43 step/end {"step":1,"turn":3}`,
		`44 turn/end {"reason":{"kind":"aborted","reason":{"kind":"user"}},"turn":3}`,
		`45 turn/start {"turn":4}`,
		`46 step/start {"step":1,"turn":4}`,
		`47 user/message {"content":[{"text":"four","type":"text"}],"id":"u4","role":"user","source":{"kind":"user"}} surfaceOp="append"`,
		`52 assistant/message {"message":{"content":[{"arguments":"{}","id":"c5","name":"shell","type":"tool-call"}],"id":"assistant-4-1","role":"assistant","source":{"kind":"model","model":"m1","provider":"scripted"}},"step":1,"turn":4} surfaceOp="append" cites=[48 49 50 51]`,
		`53 tool/call {"arguments":"{}","callId":"c5","name":"shell","step":1,"turn":4}`,
		`54 tool/result {"error":{"code":"TOOL_OUTCOME_UNKNOWN","name":"ToolOutcomeUnknownError"},"message":{"content":[{"content":[{"text":"` + unknownText + `","type":"text"}],"isError":true,"toolCallId":"c5","type":"tool-result"}],"id":"interrupted-tool-result-c5-54","role":"user","source":{"callId":"c5","kind":"tool"}},"step":1,"turn":4} surfaceOp="append" cites=[53]`,
		`55 step/end {"step":1,"turn":4}`,
		`56 turn/end {"reason":{"kind":"interrupted"},"turn":4}`,
		`57 session/end-seed {}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the harness loaded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(mustOK(t, "messages", rs[1]), &msgs); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		var v struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		}
		if err := json.Unmarshal(m, &v); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.Role+" "+v.ID)
	}
	wantIDs := []string{"user u1", "assistant assistant-1-1", "user tool-result-1-1-c1", "user tool-result-1-1-c2",
		"user u2", "assistant assistant-2-1", "user interrupted-tool-result-c3-30", "user tool-result-2-1-c4",
		"user u3", "assistant assistant-3-1",
		"user u4", "assistant assistant-4-1", "user interrupted-tool-result-c5-54"}
	if strings.Join(ids, "\n") != strings.Join(wantIDs, "\n") {
		t.Fatalf("the harness derives the conversation\n%s\nwant\n%s", strings.Join(ids, "\n"), strings.Join(wantIDs, "\n"))
	}
}

// The texts of the closing results.
const (
	unknownText   = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."
	maxTokensText = "Error: tool call not run: the response reached its max-tokens limit, so the call may be cut off"
)
