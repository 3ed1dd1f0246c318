package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// TestHarnessLoadsCallsTheModelCallRecordedOfAV0Root: the tool rounds
// written the way the model-records-calls change writes them (every
// tool/call of the message in the model call's batch, right after the
// message, before any tool runs) are accepted by the published harness's
// load on a v0 root and their conversation derives, as its own logs of
// parallel calls hold them (assistant/message, tool/call, tool/call,
// tool/result, tool/result, step/end): two parallel calls run to their
// results; two recorded calls a cancel kept from dispatch, closed
// ABORTED_BEFORE_DISPATCH after their recorded tool/calls; a recorded call
// left without result by a crash, closed TOOL_OUTCOME_UNKNOWN by a resume.
func TestHarnessLoadsCallsTheModelCallRecordedOfAV0Root(t *testing.T) {
	root := t.TempDir()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, Format: jsonl.FormatV0})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := st.Create(ctx, wire.Header{ID: "recorded", CreatedAt: 1767225600000, Cwd: "/work/project"},
		jsonl.CreateOptions{HandleID: "h-recorded", Owner: jsonl.Owner{WorkflowID: "session/recorded", RunID: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := scripted.New(scripted.Responses(
		scripted.ToolCalls(scripted.Call{ID: "c1", Name: "echo", Arguments: `{"text":"a"}`}, scripted.Call{ID: "c2", Name: "echo", Arguments: `{"text":"b"}`}),
		scripted.Text("Both echoed."),
		scripted.ToolCalls(scripted.Call{ID: "c3", Name: "echo", Arguments: `{}`}, scripted.Call{ID: "c4", Name: "echo", Arguments: `{}`}),
		scripted.ToolCall("c5", "echo", `{}`),
	))
	if err != nil {
		t.Fatal(err)
	}
	echo := tool.Tool{Name: "echo", Description: "echoes", Schema: json.RawMessage(`{"type":"object"}`), Parallel: true,
		Run: func(_ context.Context, c tool.Call) (tool.Result, error) {
			return tool.TextResult("echo " + string(c.Arguments)), nil
		}}
	tools, err := tool.NewRegistry(echo)
	if err != nil {
		t.Fatal(err)
	}
	l := &agentLog{t: t, st: st, h: h, acts: &agent.Activities{Runtime: &activities.Runtime{Store: st},
		Providers: provider.Set{"scripted": p}, Tools: tools}}
	model := func(turn, step int64) agent.ModelResult {
		t.Helper()
		var res agent.ModelResult
		l.must(wire.CallModelActivity, agent.ModelInput{Ref: h.Ref(), Turn: turn, Step: step, Provider: "scripted", Model: "m1", RecordCalls: true}, &res)
		if res.RecordedCalls != len(res.ToolCalls) {
			t.Fatalf("turn %d step %d: the model call recorded %d of its calls", turn, step, res.RecordedCalls)
		}
		return res
	}
	var ended agent.EndTurnResult
	aborted := wire.TurnEndReason{Kind: "aborted", Reason: json.RawMessage(`{"kind":"user"}`)}

	// Turn 1: two parallel calls, each run by its first RunTool.
	l.openTurn(1, "one")
	res := model(1, 1)
	outs := make(chan error, 2)
	for i, id := range []string{"c1", "c2"} {
		go func() {
			var out agent.ToolOutcome
			outs <- l.run(ctx, wire.RunToolActivity, agent.ToolInput{Ref: h.Ref(), Turn: 1, Step: 1, MessageSeq: res.MessageSeq,
				CallID: id, Name: "echo", Index: i, Recorded: true, OpenNext: true}, &out)
		}()
	}
	for range 2 {
		if err := <-outs; err != nil {
			t.Fatal(err)
		}
	}
	model(1, 2)
	l.must(wire.EndTurnActivity, agent.EndTurnInput{Ref: h.Ref(), Turn: 1, Step: 2, MessageSeq: -1, Reason: wire.TurnEndReason{Kind: "completed"}}, &ended)

	// Turn 2: cancelled after the model call, before any RunTool.
	l.openTurn(2, "two")
	res = model(2, 1)
	l.must(wire.EndTurnActivity, agent.EndTurnInput{Ref: h.Ref(), Turn: 2, Step: 1, MessageSeq: res.MessageSeq, Skipped: []string{"c3", "c4"}, Reason: aborted}, &ended)

	// Turn 3: the worker dies after the model call; a resume closes it.
	l.openTurn(3, "three")
	model(3, 1)
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := starter(t, "log", "repair", "--id", "recorded", "--root", root, "--compression", "none", "--format", "v0"); err != nil {
		t.Fatalf("log repair: %v\n%s%s", err, out, errOut)
	}

	rs := runHarness(t, root, "none", op{"op": "load", "id": "recorded"}, op{"op": "messages", "id": "recorded"})
	var loaded struct {
		Events []loadedEvent `json:"events"`
	}
	if err := json.Unmarshal(mustOK(t, "load", rs[0]), &loaded); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range loaded.Events {
		switch e.Type {
		case wire.TypeAssistantChunk, wire.TypeRequestContext, wire.TypeUserMessage:
			continue // their shapes are the other tests'
		case wire.TypeToolCall:
			var c wire.ToolCall
			if err := json.Unmarshal(e.Data, &c); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d tool/call %s", e.Seq, c.CallID))
		case wire.TypeToolResult:
			var r wire.ToolResult
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Fatal(err)
			}
			code := "ok"
			if r.Error != nil {
				code = r.Error.Code
			}
			got = append(got, fmt.Sprintf("%d tool/result %s %s cites=%v", e.Seq, r.Message.Source.CallID, code, e.SourceEventSeqs))
		default:
			got = append(got, fmt.Sprintf("%d %s", e.Seq, e.Type))
		}
	}
	want := []string{
		"0 turn/start", "1 step/start",
		"11 assistant/message", "12 tool/call c1", "13 tool/call c2",
		"14 tool/result c1 ok cites=[12]", "15 tool/result c2 ok cites=[13]",
		"16 step/end", "17 step/start",
		"22 assistant/message", "23 step/end", "24 turn/end",
		"25 turn/start", "26 step/start",
		"35 assistant/message", "36 tool/call c3", "37 tool/call c4",
		"38 tool/result c3 ABORTED_BEFORE_DISPATCH cites=[36]", "39 tool/result c4 ABORTED_BEFORE_DISPATCH cites=[37]",
		"40 step/end", "41 turn/end",
		"42 turn/start", "43 step/start",
		"49 assistant/message", "50 tool/call c5",
		"51 tool/result c5 TOOL_OUTCOME_UNKNOWN cites=[50]",
		"52 step/end", "53 turn/end", "54 session/end-seed",
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
	wantIDs := []string{"user u1", "assistant assistant-1-1", "user tool-result-1-1-c1", "user tool-result-1-1-c2", "assistant assistant-1-2",
		"user u2", "assistant assistant-2-1", "user tool-result-2-1-c3", "user tool-result-2-1-c4",
		"user u3", "assistant assistant-3-1", "user interrupted-tool-result-c5-51"}
	if strings.Join(ids, "\n") != strings.Join(wantIDs, "\n") {
		t.Fatalf("the harness derives the conversation\n%s\nwant\n%s", strings.Join(ids, "\n"), strings.Join(wantIDs, "\n"))
	}
}
