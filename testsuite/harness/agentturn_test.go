package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

// loadedEvent is an event as the harness's load returns it, without its
// time (the workflow's and the activities' clocks differ in the test
// environment).
type loadedEvent struct {
	Type            string          `json:"type"`
	Seq             int64           `json:"seq"`
	Data            json.RawMessage `json:"data"`
	SurfaceOp       json.RawMessage `json:"surfaceOp,omitempty"`
	SourceEventSeqs []int64         `json:"sourceEventSeqs,omitempty"`
}

// line renders e as "seq type data [surfaceOp] [sourceEventSeqs]".
func (e loadedEvent) line(t *testing.T) string {
	t.Helper()
	var data any
	if err := json.Unmarshal(e.Data, &data); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(data) // keys sorted: the package's key order is not asserted
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("%d %s %s", e.Seq, e.Type, b)
	if e.SurfaceOp != nil {
		s += " surfaceOp=" + string(e.SurfaceOp)
	}
	if e.SourceEventSeqs != nil {
		s += fmt.Sprintf(" cites=%v", e.SourceEventSeqs)
	}
	return s
}

// TestHarnessLoadsAnAgentSessionOfAV0Root: a worker (the session workflows
// and the real agent activities, with the scripted provider) on a root of
// format v0 runs a turn that reads a file with read_file and a turn whose
// answer streams in several text deltas, and disposes the session. The
// published harness's inspect and load accept the log, and load returns
// what the harness itself writes around a model call: request/context
// with the route, the chunks as assistant/chunk events (the run of text
// deltas was stored packed, as the harness packs it), the assistant/message
// with its model source citing every chunk of its call, and the tool
// result with its tool source; the harness derives the conversation from
// it.
func TestHarnessLoadsAnAgentSessionOfAV0Root(t *testing.T) {
	root := t.TempDir()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, Format: jsonl.FormatV0})
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := sessiontest.NewHarnessOn(t, st).WithID("agent")
	sessiontest.UseRealAgentTools(h, nil,
		scripted.ToolCall("c1", "read_file", `{"path":"a.txt"}`),
		scripted.Text("It says alpha."),
		scripted.Text("Second answer, streamed.").WithChunkSize(4).WithUsage(20, 6),
	)
	req := workflows.CreateSessionRequest{SessionID: "agent", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: cwd}}
	h.RunTurns(req, sessiontest.PromptID("u1", "what is in a.txt?"), sessiontest.PromptID("u2", "again"))

	rs := runHarness(t, root, "none",
		op{"op": "inspect", "id": "agent"}, op{"op": "load", "id": "agent"}, op{"op": "messages", "id": "agent"})
	mustOK(t, "inspect", rs[0])
	var loaded struct {
		Events []loadedEvent `json:"events"`
	}
	if err := json.Unmarshal(mustOK(t, "load", rs[1]), &loaded); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range loaded.Events {
		got = append(got, e.line(t))
	}
	chunk := func(seq, turn, step int, c string) string {
		return fmt.Sprintf(`%d assistant/chunk {"chunk":%s,"step":%d,"turn":%d}`, seq, c, step, turn)
	}
	want := []string{
		`0 turn/start {"turn":1}`,
		`1 step/start {"step":1,"turn":1}`,
		`2 user/message {"content":[{"text":"what is in a.txt?","type":"text"}],"id":"u1","role":"user","source":{"kind":"user"}} surfaceOp="append"`,
		`3 request/context {"model":"m1","provider":"scripted"}`,
		chunk(4, 1, 1, `{"blockType":"tool-call","index":0,"type":"block-start"}`),
		chunk(5, 1, 1, `{"argumentsDelta":"{\"path\":\"a.txt\"}","id":"c1","index":0,"name":"read_file","type":"tool-call-delta"}`),
		chunk(6, 1, 1, `{"block":{"arguments":"{\"path\":\"a.txt\"}","id":"c1","name":"read_file","type":"tool-call"},"index":0,"type":"block-end"}`),
		chunk(7, 1, 1, `{"reason":{"kind":"tool-calls"},"type":"finish"}`),
		`8 assistant/message {"message":{"content":[{"arguments":"{\"path\":\"a.txt\"}","id":"c1","name":"read_file","type":"tool-call"}],"id":"assistant-1-1","role":"assistant",` +
			`"source":{"kind":"model","model":"m1","provider":"scripted"}},"step":1,"turn":1} surfaceOp="append" cites=[4 5 6 7]`,
		`9 tool/call {"arguments":"{\"path\":\"a.txt\"}","callId":"c1","name":"read_file","step":1,"turn":1}`,
		`10 tool/result {"message":{"content":[{"content":[{"text":"alpha\n","type":"text"}],"isError":false,"toolCallId":"c1","type":"tool-result"}],"id":"tool-result-1-1-c1","role":"user",` +
			`"source":{"callId":"c1","kind":"tool"}},"meta":{"bytes":6,"endLine":1,"path":"a.txt","startLine":1,"truncated":false},"step":1,"turn":1} surfaceOp="append" cites=[9]`,
		`11 step/end {"step":1,"turn":1}`,
		`12 step/start {"step":2,"turn":1}`,
		chunk(13, 1, 2, `{"blockType":"text","index":0,"type":"block-start"}`),
		chunk(14, 1, 2, `{"index":0,"text":"It says alpha.","type":"text-delta"}`),
		chunk(15, 1, 2, `{"block":{"text":"It says alpha.","type":"text"},"index":0,"type":"block-end"}`),
		chunk(16, 1, 2, `{"reason":{"kind":"stop"},"type":"finish"}`),
		`17 assistant/message {"message":{"content":[{"text":"It says alpha.","type":"text"}],"id":"assistant-1-2","role":"assistant",` +
			`"source":{"kind":"model","model":"m1","provider":"scripted"}},"step":2,"turn":1} surfaceOp="append" cites=[13 14 15 16]`,
		`18 step/end {"step":2,"turn":1}`,
		`19 turn/end {"reason":{"kind":"completed"},"turn":1}`,
		`20 turn/start {"turn":2}`,
		`21 step/start {"step":1,"turn":2}`,
		`22 user/message {"content":[{"text":"again","type":"text"}],"id":"u2","role":"user","source":{"kind":"user"}} surfaceOp="append"`,
		chunk(23, 2, 1, `{"blockType":"text","index":0,"type":"block-start"}`),
		chunk(24, 2, 1, `{"index":0,"text":"Seco","type":"text-delta"}`),
		chunk(25, 2, 1, `{"index":0,"text":"nd a","type":"text-delta"}`),
		chunk(26, 2, 1, `{"index":0,"text":"nswe","type":"text-delta"}`),
		chunk(27, 2, 1, `{"index":0,"text":"r, s","type":"text-delta"}`),
		chunk(28, 2, 1, `{"index":0,"text":"trea","type":"text-delta"}`),
		chunk(29, 2, 1, `{"index":0,"text":"med.","type":"text-delta"}`),
		chunk(30, 2, 1, `{"block":{"text":"Second answer, streamed.","type":"text"},"index":0,"type":"block-end"}`),
		chunk(31, 2, 1, `{"type":"usage","usage":{"inputTokens":20,"outputTokens":6}}`),
		chunk(32, 2, 1, `{"reason":{"kind":"stop"},"type":"finish"}`),
		`33 assistant/message {"message":{"content":[{"text":"Second answer, streamed.","type":"text"}],"id":"assistant-2-1","role":"assistant",` +
			`"source":{"kind":"model","model":"m1","provider":"scripted"}},"step":1,"turn":2,"usage":{"inputTokens":20,"outputTokens":6}} surfaceOp="append" cites=[23 24 25 26 27 28 29 30 31 32]`,
		`34 step/end {"step":1,"turn":2}`,
		`35 turn/end {"reason":{"kind":"completed"},"turn":2}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the harness loaded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The text deltas were stored as one packed row, as the harness packs
	// them.
	raw, err := os.ReadFile(filepath.Join(root, filepath.Base(projectDir(t, root)), "agent", "session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"data":{"turn":2,"step":1,"index":0,"dt":[`) ||
		!strings.Contains(string(raw), `"texts":["Seco","nd a","nswe","r, s","trea","med."]}}`+"\n") {
		t.Fatalf("no packed text-chunks row in the stored log:\n%s", raw)
	}

	var msgs []json.RawMessage
	if err := json.Unmarshal(mustOK(t, "messages", rs[2]), &msgs); err != nil {
		t.Fatal(err)
	}
	var conv []string
	for _, m := range msgs {
		var v any
		if err := json.Unmarshal(m, &v); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		conv = append(conv, string(b))
	}
	wantConv := []string{
		`{"content":[{"text":"what is in a.txt?","type":"text"}],"id":"u1","role":"user","source":{"kind":"user"}}`,
		`{"content":[{"arguments":"{\"path\":\"a.txt\"}","id":"c1","name":"read_file","type":"tool-call"}],"id":"assistant-1-1","role":"assistant","source":{"kind":"model","model":"m1","provider":"scripted"}}`,
		`{"content":[{"content":[{"text":"alpha\n","type":"text"}],"isError":false,"toolCallId":"c1","type":"tool-result"}],"id":"tool-result-1-1-c1","role":"user","source":{"callId":"c1","kind":"tool"}}`,
		`{"content":[{"text":"It says alpha.","type":"text"}],"id":"assistant-1-2","role":"assistant","source":{"kind":"model","model":"m1","provider":"scripted"}}`,
		`{"content":[{"text":"again","type":"text"}],"id":"u2","role":"user","source":{"kind":"user"}}`,
		`{"content":[{"text":"Second answer, streamed.","type":"text"}],"id":"assistant-2-1","role":"assistant","source":{"kind":"model","model":"m1","provider":"scripted"}}`,
	}
	if strings.Join(conv, "\n") != strings.Join(wantConv, "\n") {
		t.Fatalf("the harness derives the conversation\n%s\nwant\n%s", strings.Join(conv, "\n"), strings.Join(wantConv, "\n"))
	}
}

// projectDir is the one project directory of root.
func projectDir(t *testing.T, root string) string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(root, "--*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("project directories of %s: %v (%v)", root, dirs, err)
	}
	return dirs[0]
}
