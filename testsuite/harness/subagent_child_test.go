package harness

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// subagentCallOf is a scripted call of the subagent tool.
func subagentCallOf(id, label, prompt string) scripted.Call {
	args, _ := json.Marshal(map[string]string{"description": label, "prompt": prompt})
	return scripted.Call{ID: id, Name: "subagent", Arguments: string(args)}
}

// callSeqOf returns the seq of the tool/call of call id in evs.
func callSeqOf(t *testing.T, evs []session.Event, id string) int64 {
	t.Helper()
	for _, e := range evs {
		if e.Type != wire.TypeToolCall {
			continue
		}
		c, err := e.ToolCall()
		if err != nil {
			t.Fatal(err)
		}
		if c.CallID == id {
			return e.Seq
		}
	}
	t.Fatalf("no tool/call %q in the log", id)
	return 0
}

// TestHarnessReadsTheChildLogsSessionflowWrites: a worker (the session
// workflows and the real agent activities with the subagent tool and the
// scripted provider) on a root of format v0 runs a parent whose call of
// the subagent tool starts a child, whose own call starts a grandchild.
// The published harness loads the three logs sessionflow wrote: the
// children's headers carry their lineage as the harness reads it
// (parentSession, origin "subagent", delegationDepth 1 and 2; the
// parent's none), every log passes the load's validation, the surface fold
// and the harness's session invariants, @deepseek-ai/dsh-subagent's
// foldSubagentDescriptor identifies each child (version 2, one-shot,
// spawn, its call's label), and the package's own writer of that event
// stores exactly what sessionflow stored.
func TestHarnessReadsTheChildLogsSessionflowWrites(t *testing.T) {
	root := t.TempDir()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, Format: jsonl.FormatV0})
	if err != nil {
		t.Fatal(err)
	}
	h := sessiontest.NewHarnessOn(t, st).WithID("lineage")
	s := scripted.Script{Responses: []scripted.Response{
		scripted.ToolCalls(subagentCallOf("p1", "Survey the code", "CHILD-TASK: survey the code and report")),
		scripted.Text("The survey is in."),
	}}.
		WithBranch("CHILD-TASK", scripted.ToolCalls(subagentCallOf("g1", "Count the files", "GRANDCHILD-TASK: count the files")),
			scripted.Text("Survey: 3 files.").WithChunkSize(5)).
		WithBranch("GRANDCHILD-TASK", scripted.Text("3 files."))
	p, err := scripted.New(s)
	if err != nil {
		t.Fatal(err)
	}
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"scripted": p}, tool.Subagent(tool.SubagentOptions{MaxDepth: 3})))
	cwd := t.TempDir()
	parent := h.RunTurns(workflows.CreateSessionRequest{SessionID: "lineage", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: cwd}},
		sessiontest.PromptID("u1", "survey the code"))
	child := agent.ChildSessionID("lineage", callSeqOf(t, parent, "p1"))
	grandchild := agent.ChildSessionID(child, callSeqOf(t, sessiontest.Stored(t, st, child), "g1"))

	ids := []string{"lineage", child, grandchild}
	inputs := make([]judgeInput, len(ids))
	sessions := make([]map[string]string, len(ids))
	for i, id := range ids {
		inputs[i] = judgeInput{Root: root, Compression: "none", ID: id}
		sessions[i] = map[string]string{"root": root, "compression": "none", "id": id}
	}
	verdicts := judgeAll(t, inputs)
	wantLineage := []map[string]any{
		{},
		{"parentSession": "lineage", "origin": "subagent", "delegationDepth": float64(1)},
		{"parentSession": child, "origin": "subagent", "delegationDepth": float64(2)},
	}
	for i, v := range verdicts {
		if !v.Accepted || v.FoldError != "" || v.InvariantError != "" {
			t.Fatalf("%s: the package's load accepted %t (%s), its fold: %q, its invariants: %q (%s)", ids[i], v.Accepted, v.Error, v.FoldError, v.InvariantError, v.InvariantErrorName)
		}
		var meta map[string]any
		if err := json.Unmarshal(v.Meta, &meta); err != nil {
			t.Fatal(err)
		}
		got := map[string]any{}
		for _, k := range []string{"parentSession", "origin", "delegationDepth"} {
			if val, ok := meta[k]; ok && !(k == "delegationDepth" && val == float64(0)) {
				got[k] = val
			}
		}
		if !reflect.DeepEqual(got, wantLineage[i]) {
			t.Fatalf("%s: the package loads the header %s, want the lineage %v", ids[i], v.Meta, wantLineage[i])
		}
		if meta["cwd"] != cwd {
			t.Fatalf("%s: the package loads the cwd %v, want the parent's %s", ids[i], meta["cwd"], cwd)
		}
		_, stored := readAll(t, st, ids[i])
		if len(v.Events) != len(stored) {
			t.Fatalf("%s: the package loads %d events, sessionflow stored %d (no closer is needed)", ids[i], len(v.Events), len(stored))
		}
	}

	var folded []subagentVerdict
	runScript(t, "subagent.mjs", map[string]any{"sessions": sessions}, &folded)
	if len(folded) != len(ids) {
		t.Fatalf("subagent.mjs read %d of %d sessions", len(folded), len(ids))
	}
	wantDescriptor := []string{
		`null`,
		`{"version":2,"mode":"one-shot","provider":"spawn","label":"Survey the code"}`,
		`{"version":2,"mode":"one-shot","provider":"spawn","label":"Count the files"}`,
	}
	for i, v := range folded {
		if v.Error != "" {
			t.Fatalf("%s: the package: %s", ids[i], v.Error)
		}
		if !equalJSONText(t, string(v.Descriptor), wantDescriptor[i]) {
			t.Fatalf("%s: foldSubagentDescriptor returns %s, want %s", ids[i], v.Descriptor, wantDescriptor[i])
		}
		if i == 0 {
			continue
		}
		var ours json.RawMessage
		for _, e := range sessiontest.Stored(t, st, ids[i]) {
			if e.Type == "subagent/descriptor" {
				ours = json.RawMessage(e.Data)
				break
			}
		}
		if len(v.Seeded) != 1 || v.Seeded[0].Type != "subagent/descriptor" || !equalJSONText(t, string(v.Seeded[0].Data), string(ours)) {
			t.Fatalf("%s: seedDescriptorTurn writes %+v, sessionflow stored %s", ids[i], v.Seeded, ours)
		}
	}
}

// equalJSONText reports whether two JSON texts hold the same value.
func equalJSONText(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
