package harness

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/wire"
)

// The events of the permission logs, in the shapes of the harness's
// snapshots (examples/acp-agent/tests/snapshots/escalation-rejected and
// apps/web/tests/snapshots/permission-policy-context).

func knob(typ, field, value string) event {
	return event{typ: typ, data: fmt.Sprintf(`{%q:%q}`, field, value)}
}

func sandboxMode(mode string) event { return knob("sandbox/mode", "mode", mode) }

func approvalPolicy(policy string) event { return knob("approval/policy", "policy", policy) }

func permissionPreset(preset string) event { return knob("permission/preset", "preset", preset) }

// approvalAsked asks for id; callID and reason are left out when "".
func approvalAsked(id, tool, callID, reason string) event {
	data := fmt.Sprintf(`{"id":%q,"toolName":%q`, id, tool)
	if callID != "" {
		data += fmt.Sprintf(`,"callId":%q`, callID)
	}
	if reason != "" {
		data += fmt.Sprintf(`,"reason":%q`, reason)
	}
	return event{typ: "approval/asked", data: data + "}"}
}

func approvalDecided(id, outcome string) event {
	return event{typ: "approval/decided", data: fmt.Sprintf(`{"id":%q,"outcome":%q}`, id, outcome)}
}

// approvalRules is sessionflow's approval/rules event (data verbatim),
// always ignorable.
func approvalRules(data string) event {
	return event{typ: "approval/rules", data: data, rest: `,"ignorable":true`}
}

// raw is an event of any type and data.
func rawEvent(typ, data string) event { return event{typ: typ, data: data} }

// assistantCalls is an assistant message calling the tool bash once per
// call id.
func assistantCalls(turn, step int, id string, callIDs ...string) event {
	var calls []string
	for _, c := range callIDs {
		calls = append(calls, fmt.Sprintf(`{"type":"tool-call","id":%q,"name":"bash","arguments":"{\"command\":\"ls\"}"}`, c))
	}
	return event{typ: "assistant/message",
		data: fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"role":"assistant","content":[%s],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":%q}}`,
			turn, step, strings.Join(calls, ","), id),
		rest: `,"surfaceOp":"append"`}
}

func toolCallEvent(turn, step int, callID string) event {
	return event{typ: "tool/call", data: fmt.Sprintf(`{"turn":%d,"step":%d,"callId":%q,"name":"bash","arguments":"{\"command\":\"ls\"}"}`, turn, step, callID)}
}

// toolResult answers the call whose tool/call is at callSeq.
func toolResultEvent(turn, step int, id, callID string, callSeq int, text string) event {
	return event{typ: "tool/result",
		data: fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"source":{"kind":"tool","callId":%q},"content":[{"type":"tool-result","toolCallId":%q,"content":[{"type":"text","text":%q}]}],"role":"user","id":%q}}`,
			turn, step, callID, callID, text, id),
		rest: fmt.Sprintf(`,"sourceEventSeqs":[%d],"surfaceOp":"append"`, callSeq)}
}

// permLog builds a log event by event, numbering them.
type permLog struct{ events []event }

// add appends events and returns the seq of the first.
func (l *permLog) add(es ...event) int {
	seq := len(l.events)
	l.events = append(l.events, es...)
	return seq
}

// textTurn adds a turn the model answers with text.
func (l *permLog) textTurn(turn int) {
	l.add(turnStart(turn), stepStart(turn, 1), userText(fmt.Sprintf("u%d", turn), "hello"),
		assistantText(turn, 1, fmt.Sprintf("a%d", turn), "hi"), stepEnd(turn, 1), turnEnd(turn, "completed"))
}

// callTurn adds a turn whose first step calls bash once per call id, with
// during(i) between the i-th call's tool/call and its tool/result (the
// calls run one after the other), and whose second step answers with text.
func (l *permLog) callTurn(turn int, during func(i int) []event, callIDs ...string) {
	l.add(turnStart(turn), stepStart(turn, 1), userText(fmt.Sprintf("u%d", turn), "run it"),
		assistantCalls(turn, 1, fmt.Sprintf("a%d", turn), callIDs...))
	for i, c := range callIDs {
		seq := l.add(toolCallEvent(turn, 1, c))
		l.add(during(i)...)
		l.add(toolResultEvent(turn, 1, fmt.Sprintf("r%d-%d", turn, i), c, seq, "done"))
	}
	l.add(stepEnd(turn, 1), stepStart(turn, 2), assistantText(turn, 2, fmt.Sprintf("b%d", turn), "ran it"), stepEnd(turn, 2), turnEnd(turn, "completed"))
}

// openCheck says which approvals are open (their ids, in order) right
// after the event of a type whose data names id.
type openCheck struct {
	typ, id string
	open    []string
}

// permCase is a hand-written log with the permission events.
type permCase struct {
	name   string
	events []event
	// invariantError is a part of what the harness's invariants say of
	// it, "" when they pass.
	invariantError string
	// The fold of the whole log (its closers included): the knobs and the
	// rules; nothing is open in a loaded log, whose turns are closed.
	mode, policy, preset string
	rules                []wire.ApprovalRule
	hasRules             bool
	openAfter            []openCheck
}

// permCases are the hand-written logs of the permission tests.
func permCases() []permCase {
	var cases []permCase

	// Switches between turns, as the harness's preset service writes them
	// (preset, then the knobs that change), and one inside a turn.
	var l permLog
	l.add(permissionPreset("workspace-write"), sandboxMode("workspace-write"), approvalPolicy("ask"))
	l.textTurn(1)
	l.add(permissionPreset("danger-full-access"), sandboxMode("danger-full-access"), approvalPolicy("never"))
	l.textTurn(2)
	l.add(permissionPreset("read-only"), sandboxMode("read-only"), approvalPolicy("ask"))
	l.add(turnStart(3), stepStart(3, 1), userText("u3", "hello"), assistantText(3, 1, "a3", "hi"), stepEnd(3, 1),
		sandboxMode("workspace-write"), stepStart(3, 2), assistantText(3, 2, "b3", "hi again"), stepEnd(3, 2), turnEnd(3, "completed"))
	cases = append(cases, permCase{name: "knob switches", events: l.events, mode: "workspace-write", policy: "ask", preset: "read-only"})

	// Approvals asked and decided between a call's tool/call and its
	// tool/result: one, then two calls in one step, each asking (the
	// second without callId and reason).
	l = permLog{}
	l.add(approvalPolicy("ask"))
	l.callTurn(1, func(int) []event {
		return []event{approvalAsked("a", "bash", "c1", "bash requires manual approval in this session"), approvalDecided("a", "allowed-once")}
	}, "c1")
	l.callTurn(2, func(i int) []event {
		if i == 0 {
			return []event{approvalAsked("b", "bash", "c2", "escalate sandbox to danger-full-access: it writes outside"), approvalDecided("b", "rejected")}
		}
		return []event{approvalAsked("c", "bash", "", ""), approvalDecided("c", "cancelled")}
	}, "c2", "c3")
	cases = append(cases, permCase{name: "approvals asked and decided", events: l.events, policy: "ask",
		openAfter: []openCheck{{"approval/asked", "a", []string{"a"}}, {"approval/decided", "a", nil},
			{"approval/asked", "b", []string{"b"}}, {"approval/decided", "b", nil}, {"approval/asked", "c", []string{"c"}}, {"approval/decided", "c", nil}}})

	// Two approvals open at once (the harness asks for parallel calls
	// together), decided in the other order; an unavailable answerer.
	l = permLog{}
	l.add(turnStart(1), stepStart(1, 1), userText("u1", "run both"), assistantCalls(1, 1, "a1", "c1", "c2"))
	c1 := l.add(toolCallEvent(1, 1, "c1"))
	c2 := l.add(toolCallEvent(1, 1, "c2"))
	l.add(approvalAsked("p", "bash", "c1", "first"), approvalAsked("q", "bash", "c2", "second"), approvalDecided("q", "unavailable"), approvalDecided("p", "allowed-once"),
		toolResultEvent(1, 1, "r1", "c1", c1, "done"), toolResultEvent(1, 1, "r2", "c2", c2, "refused"), stepEnd(1, 1), turnEnd(1, "completed"))
	cases = append(cases, permCase{name: "two approvals open at once",
		events: l.events, openAfter: []openCheck{{"approval/asked", "p", []string{"p"}}, {"approval/asked", "q", []string{"p", "q"}},
			{"approval/decided", "q", []string{"p"}}, {"approval/decided", "p", nil}}})

	// An ask a crash left without its decision: the load closes the turn
	// and nothing is open after.
	l = permLog{}
	l.add(approvalPolicy("ask"), turnStart(1), stepStart(1, 1), userText("u1", "run it"), assistantCalls(1, 1, "a1", "c1"), toolCallEvent(1, 1, "c1"),
		approvalAsked("d", "bash", "c1", "bash requires manual approval in this session"))
	cases = append(cases, permCase{name: "an ask left open by a crash", events: l.events, policy: "ask",
		openAfter: []openCheck{{"approval/asked", "d", []string{"d"}}, {"turn/end", "", nil}}})

	// The same, resumed (the closers and the end-seed marker stored),
	// then a later turn decides the old ask (the harness's invariants
	// accept it: the id is pending and a turn is open) and asks anew.
	l = permLog{}
	l.add(turnStart(1), stepStart(1, 1), userText("u1", "run it"), assistantCalls(1, 1, "a1", "c1"))
	c1 = l.add(toolCallEvent(1, 1, "c1"))
	l.add(approvalAsked("e", "bash", "c1", ""), toolResultEvent(1, 1, "r1", "c1", c1, "interrupted"), stepEnd(1, 1), turnEnd(1, "interrupted"), endSeed())
	l.add(turnStart(2), stepStart(2, 1), approvalDecided("e", "cancelled"), userText("u2", "again"), assistantCalls(2, 1, "a2", "c2"))
	c2 = l.add(toolCallEvent(2, 1, "c2"))
	l.add(approvalAsked("f", "bash", "c2", ""), toolResultEvent(2, 1, "r2", "c2", c2, "running"))
	cases = append(cases, permCase{name: "an ask left open, resumed, decided in a later turn",
		events: l.events, openAfter: []openCheck{{"approval/asked", "e", []string{"e"}}, {"turn/end", "", nil}, {"approval/decided", "e", nil},
			{"approval/asked", "f", []string{"f"}}}})

	// sessionflow's approval/rules, ignorable: the harness's folds pass
	// over it; the last one is in effect, and one whose data does not
	// decode allows nothing.
	l = permLog{}
	l.add(approvalPolicy("ask"), approvalRules(`{"rules":[{"tool":"bash","commandPrefix":"go test"}]}`))
	l.textTurn(1)
	l.add(approvalRules(`{"rules":[{"tool":"write","pathPrefix":"src"},{"tool":"read"}]}`))
	cases = append(cases, permCase{name: "ignorable approval/rules", events: l.events, policy: "ask", hasRules: true,
		rules: []wire.ApprovalRule{{Tool: "write", PathPrefix: "src"}, {Tool: "read"}}})
	l.add(approvalRules(`{"rules":"all"}`))
	cases = append(cases, permCase{name: "an approval/rules that does not decode", events: l.events, policy: "ask", hasRules: true})

	// Values the harness's vocabulary does not know: the harness's folds
	// read the last event whatever it holds, and its invariants refuse
	// the log.
	l = permLog{}
	l.add(sandboxMode("danger-full-access"), sandboxMode("wide-open"))
	l.textTurn(1)
	cases = append(cases, permCase{name: "an unknown sandbox mode after a known one", events: l.events, mode: "wide-open",
		invariantError: `invariant violated by "@deepseek-ai/dsh-sandbox-policy": sandbox/mode carries unknown mode "wide-open"`})
	l = permLog{}
	l.add(approvalPolicy("never"), approvalPolicy("sometimes"))
	l.textTurn(1)
	cases = append(cases, permCase{name: "an unknown approval policy after a known one", events: l.events, policy: "sometimes",
		invariantError: `invariant violated by "@deepseek-ai/dsh-user-approval": approval/policy carries unknown policy "sometimes"`})
	l = permLog{}
	l.add(permissionPreset("danger-full-access"), permissionPreset("custom"))
	l.textTurn(1)
	cases = append(cases, permCase{name: "an unknown preset after a known one", events: l.events, preset: "custom",
		invariantError: `invariant violated by "@deepseek-ai/dsh-permission-presets": permission/preset names unknown preset "custom"`})
	l = permLog{}
	l.add(sandboxMode("danger-full-access"), rawEvent("sandbox/mode", `{"mode":null}`), permissionPreset("danger-full-access"), rawEvent("permission/preset", `{}`),
		rawEvent("sandbox/mode", `{"Mode":"danger-full-access"}`))
	l.textTurn(1)
	l.add(rawEvent("sandbox/mode", `{"mode":""}`), rawEvent("permission/preset", `{"preset":{"name":"x"}}`), sandboxMode("read-only"), rawEvent("sandbox/mode", `{"mode":5}`))
	cases = append(cases, permCase{name: "knob values that are not strings, or none", events: l.events, mode: "5", preset: `{"name":"x"}`,
		invariantError: `invariant violated by "@deepseek-ai/dsh-sandbox-policy": sandbox/mode carries unknown mode null`})
	l = permLog{}
	l.add(approvalPolicy("never"), rawEvent("approval/policy", `{"source":"delegation"}`), approvalPolicy("never"), rawEvent("approval/policy", `{"policy":["ask"]}`))
	l.textTurn(1)
	cases = append(cases, permCase{name: "approval policies that are not strings, or none", events: l.events, policy: `["ask"]`,
		invariantError: `invariant violated by "@deepseek-ai/dsh-user-approval": approval/policy carries unknown policy undefined`})

	// The pairing the harness's invariants refuse.
	l = permLog{}
	l.callTurn(1, func(int) []event { return []event{approvalDecided("x", "rejected")} }, "c1")
	cases = append(cases, permCase{name: "a decision without its ask", events: l.events,
		invariantError: `invariant violated by "@deepseek-ai/dsh-user-approval": approval/decided has no matching approval/asked for id "x"`})
	l = permLog{}
	l.textTurn(1)
	l.add(approvalAsked("y", "bash", "", "between turns"))
	l.textTurn(2)
	cases = append(cases, permCase{name: "an ask outside a turn", events: l.events,
		invariantError: `invariant violated by "@deepseek-ai/dsh-user-approval": approval/asked appended outside any open turn`,
		openAfter:      []openCheck{{"approval/asked", "y", []string{"y"}}, {"turn/end", "", nil}}})
	l = permLog{}
	l.callTurn(1, func(int) []event {
		return []event{approvalAsked("z", "bash", "c1", "once"), approvalAsked("z", "bash", "c1", "twice"), approvalDecided("z", "rejected")}
	}, "c1")
	cases = append(cases, permCase{name: "an ask repeated while open", events: l.events,
		invariantError: `invariant violated by "@deepseek-ai/dsh-user-approval": approval/asked repeated open id "z"`,
		openAfter:      []openCheck{{"approval/decided", "z", nil}}})
	l = permLog{}
	l.callTurn(1, func(int) []event { return []event{approvalAsked("w", "", "c1", ""), approvalDecided("w", "rejected")} }, "c1")
	cases = append(cases, permCase{name: "an ask without a tool name", events: l.events,
		invariantError: `invariant violated by "@deepseek-ai/dsh-user-approval": approval/asked toolName must be non-empty`})
	l = permLog{}
	l.callTurn(1, func(int) []event { return []event{approvalAsked("v", "bash", "c1", ""), approvalDecided("v", "maybe")} }, "c1")
	cases = append(cases, permCase{name: "an unknown outcome", events: l.events,
		invariantError: `invariant violated by "@deepseek-ai/dsh-user-approval": approval/decided carries unknown outcome "maybe"`,
		openAfter:      []openCheck{{"approval/asked", "v", []string{"v"}}, {"approval/decided", "v", nil}}})
	return cases
}

// judgedPermCase is a hand-written log judged by both sides.
type judgedPermCase struct {
	permCase
	g goVerdict
	n nodeVerdict
}

// judgePermCases writes each permission log as the only log of a raw root
// and judges it with sessionflow's read and the package's load and
// invariants (judge.mjs): both must accept it, alike.
func judgePermCases(t *testing.T) []judgedPermCase {
	t.Helper()
	cases := permCases()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var inputs []judgeInput
	for i, tc := range cases {
		id := fmt.Sprintf("0000%04x-0000-4000-8000-0000000000e0", i)
		header := fmt.Sprintf(`{"type":"session","version":0,"id":%q,"createdAt":0,"cwd":%q,"delegationDepth":0}`, id, corpusCwd)
		mu := mutant{id: id, cwd: corpusCwd, lines: [][]byte{[]byte(header)}}
		for seq, e := range tc.events {
			mu.lines = append(mu.lines, e.line(seq))
		}
		in, err := writeMutant(enc, filepath.Join(dir, "logs"), i, mu)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, in)
	}
	gv, nv := judgeBoth(t, testdeadline.Context(t, 3*time.Minute), inputs)
	out := make([]judgedPermCase, len(cases))
	for i, tc := range cases {
		out[i] = judgedPermCase{permCase: tc, g: gv[i], n: nv[i]}
		if !nv[i].Accepted {
			t.Fatalf("%s: the package refuses it: %s: %s", tc.name, nv[i].ErrorName, nv[i].Error)
		}
		if d := compareVerdicts(nv[i], gv[i]); d != "" {
			t.Fatalf("%s: sessionflow's read and the package's load disagree: %s", tc.name, d)
		}
	}
	return out
}

// harnessPermFold is permissions.mjs's reading of the prefix of a log up
// to Index: the harness's folds of its knobs and the approvals pending.
type harnessPermFold struct {
	Index int `json:"index"`
	// SandboxMode, ApprovalPolicy and Preset are the folds' values as
	// JSON, nil for undefined.
	SandboxMode    json.RawMessage `json:"sandboxMode"`
	ApprovalPolicy json.RawMessage `json:"approvalPolicy"`
	Preset         json.RawMessage `json:"preset"`
	Pending        []struct {
		Seq      int64  `json:"seq"`
		ID       string `json:"id"`
		ToolName string `json:"toolName"`
		CallID   string `json:"callId"`
		Reason   string `json:"reason"`
		OpenTurn bool   `json:"openTurn"`
	} `json:"pending"`
}

// permissionsRead is permissions.mjs's reading of one log.
type permissionsRead struct {
	Folds     []harnessPermFold `json:"folds"`
	Error     string            `json:"error"`
	ErrorName string            `json:"errorName"`
}

// readPermissions reads the permissions of loaded logs (judge.mjs
// verdicts) with permissions.mjs.
func readPermissions(t *testing.T, verdicts []nodeVerdict) []permissionsRead {
	t.Helper()
	var in strings.Builder
	enc := json.NewEncoder(&in)
	for _, v := range verdicts {
		if err := enc.Encode(map[string]any{"meta": v.Meta, "events": v.Events}); err != nil {
			t.Fatal(err)
		}
	}
	var stdout []json.RawMessage
	runLines(t, "permissions.mjs", in.String(), &stdout)
	if len(stdout) != len(verdicts) {
		t.Fatalf("permissions.mjs read %d logs, want %d", len(stdout), len(verdicts))
	}
	out := make([]permissionsRead, len(verdicts))
	for i, r := range stdout {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// knobAgrees reports whether sessionflow's value of a knob is the
// harness's (as JSON, nil for undefined): "" for undefined or null, a
// non-empty string itself, any other value its JSON text.
func knobAgrees(harness json.RawMessage, got string) bool {
	if len(harness) == 0 || string(harness) == "null" {
		return got == ""
	}
	var s string
	if json.Unmarshal(harness, &s) == nil && s != "" {
		return got == s
	}
	return got != "" && canonJSON([]byte(got)) == canonJSON(harness)
}

// foldEvents folds events one by one with session.PermissionFold and
// compares the fold after each with the harness's (r): the three knobs,
// and the open approvals, which must be the approvals the harness has
// pending whose turn is still open. It returns the first difference, ""
// when there is none, and the fold after each event.
func foldEvents(events []session.Event, r permissionsRead) (string, []session.PermissionFold) {
	if len(r.Folds) == 0 && len(events) > 0 {
		return "permissions.mjs gave no fold", nil
	}
	var f session.PermissionFold
	folds := make([]session.PermissionFold, len(events))
	k := 0
	for i, e := range events {
		f.Add(e)
		folds[i] = f // a copy folds on independently
		for k+1 < len(r.Folds) && r.Folds[k+1].Index <= i {
			k++
		}
		h := r.Folds[k]
		if h.Index > i {
			return fmt.Sprintf("permissions.mjs's first fold is at index %d", h.Index), nil
		}
		for _, c := range []struct {
			what    string
			harness json.RawMessage
			got     string
		}{{"sandbox mode", h.SandboxMode, f.SandboxMode}, {"approval policy", h.ApprovalPolicy, f.ApprovalPolicy}, {"preset", h.Preset, f.Preset}} {
			if !knobAgrees(c.harness, c.got) {
				h := string(c.harness)
				if h == "" {
					h = "undefined"
				}
				return fmt.Sprintf("after event %d (%s): the %s is %q; the harness's fold gives %s", i, e.Type, c.what, c.got, h), nil
			}
		}
		var want []session.OpenApproval
		for _, p := range h.Pending {
			if p.OpenTurn {
				want = append(want, session.OpenApproval{Seq: p.Seq, ID: p.ID, ToolName: p.ToolName, CallID: p.CallID, Reason: p.Reason})
			}
		}
		if got := f.Open(); !slices.Equal(got, want) {
			return fmt.Sprintf("after event %d (%s): open approvals %+v; the harness has pending in the open turn %+v (all pending: %+v)", i, e.Type, got, want, h.Pending), nil
		}
	}
	if len(r.Folds) > 0 && r.Folds[len(r.Folds)-1].Index >= len(events) {
		return fmt.Sprintf("permissions.mjs folds %d events or more, sessionflow %d", r.Folds[len(r.Folds)-1].Index+1, len(events)), nil
	}
	return "", folds
}

// eventsOf is a verdict's events with the closers of a resume.
func eventsOf(g goVerdict) []session.Event {
	return append(slices.Clip(g.Events), g.Closers...)
}

// checkOpenAfter checks a case's openAfter on sessionflow's folds.
func checkOpenAfter(t *testing.T, name string, events []session.Event, folds []session.PermissionFold, checks []openCheck) {
	t.Helper()
	for _, c := range checks {
		found := false
		for i, e := range events {
			if e.Type != c.typ {
				continue
			}
			var d struct {
				ID string `json:"id"`
			}
			if c.id != "" && (json.Unmarshal(e.Data, &d) != nil || d.ID != c.id) {
				continue
			}
			found = true
			var ids []string
			for _, o := range folds[i].Open() {
				ids = append(ids, o.ID)
			}
			if !slices.Equal(ids, c.open) {
				t.Errorf("%s: after %s %q (seq %d) the open approvals are %v, want %v", name, c.typ, c.id, e.Seq, ids, c.open)
			}
			break
		}
		if !found {
			t.Errorf("%s: no %s %q in the log", name, c.typ, c.id)
		}
	}
}

// permSnapshots are the harness's snapshots with approvals (and one
// without), with what their logs hold: each approval asked, in order, and
// how it was decided; none switches a knob.
var permSnapshots = map[string][]struct{ id, tool, callID, reason, outcome string }{
	"examples/acp-agent/tests/snapshots/escalation-approved/session.jsonl": {{"7e4e0dfa-6ff0-4037-b519-297a1e7f11cf", "bash", "call_00_d0sAHpJ9mYOJi0z7KNy30441",
		"escalate sandbox to danger-full-access: the user asked to write a file outside the workspace", "allowed-once"}},
	"examples/acp-agent/tests/snapshots/escalation-rejected/session.jsonl": {{"15cd5a18-13cf-4b4e-bca2-30937c1cd39a", "bash", "call_00_WB1vnPomi8yr6MlcFKTj7912",
		"escalate sandbox to danger-full-access: the user asked to write a file outside the workspace", "rejected"}},
	"examples/acp-agent/tests/snapshots/fs-escalation-approved/session.jsonl": {{"6632f8a2-c406-429b-bbe0-5b487ebc71fb", "write", "call_00_Fnymmavpr4klMDy4Fdej3227",
		"escalate sandbox to danger-full-access: the user asked to escalate this write", "allowed-once"}},
	"examples/acp-agent/tests/snapshots/fs-policy-reject/session.jsonl": nil,
	"examples/acp-agent/tests/snapshots/hook-cc-pretool-ask/session.jsonl": {{"664315fe-3ca7-41fb-89a6-770d64be625a", "bash", "call_00_6k0oGSliVHxGSgqBmMEO4311",
		"bash requires manual approval in this session", "rejected"}},
}

// checkSnapshot checks a snapshot of permSnapshots on sessionflow's read:
// its approvals, each open from its ask to its decision, both between
// its call's tool/call and tool/result; and nothing switched or open at
// the end.
func checkSnapshot(t *testing.T, name string, events []session.Event, folds []session.PermissionFold) {
	t.Helper()
	type approval struct{ id, tool, callID, reason, outcome string }
	var got []approval
	asked := map[string]int{}
	calls, results, askedAt, decided := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	for i, e := range events {
		if !strings.HasPrefix(e.Type, "approval/") && !strings.HasPrefix(e.Type, "tool/") {
			continue
		}
		var d struct {
			ID       string `json:"id"`
			ToolName string `json:"toolName"`
			CallID   string `json:"callId"`
			Reason   string `json:"reason"`
			Outcome  string `json:"outcome"`
			Message  struct {
				Source struct {
					CallID string `json:"callId"`
				} `json:"source"`
			} `json:"message"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("%s: event %d: %v", name, i, err)
		}
		switch e.Type {
		case "tool/call":
			calls[d.CallID] = i
		case "tool/result":
			results[d.Message.Source.CallID] = i
		case "approval/asked":
			asked[d.ID], askedAt[d.ID] = len(got), i
			got = append(got, approval{id: d.ID, tool: d.ToolName, callID: d.CallID, reason: d.Reason})
			if o := folds[i].Open(); len(o) != 1 || o[0] != (session.OpenApproval{Seq: e.Seq, ID: d.ID, ToolName: d.ToolName, CallID: d.CallID, Reason: d.Reason}) {
				t.Errorf("%s: after its ask, the open approvals are %+v, want only %s", name, o, d.ID)
			}
		case "approval/decided":
			k, ok := asked[d.ID]
			if !ok {
				t.Errorf("%s: approval %s is decided, never asked", name, d.ID)
				continue
			}
			got[k].outcome = d.Outcome
			decided[d.ID] = i
			if o := folds[i].Open(); len(o) != 0 {
				t.Errorf("%s: after its decision, the open approvals are %+v, want none", name, o)
			}
		}
	}
	// Each ask and its decision lie between its call's tool/call and
	// tool/result.
	for _, a := range got {
		c, okc := calls[a.callID]
		r, okr := results[a.callID]
		k, okd := decided[a.id]
		if !okc || !okr || !okd || !(c < askedAt[a.id] && k < r) {
			t.Errorf("%s: approval %s is not asked and decided between its call's tool/call and tool/result (call %d, ask %d, decision %d, result %d)",
				name, a.id, c, askedAt[a.id], k, r)
		}
	}
	var want []approval
	for _, w := range permSnapshots[name] {
		want = append(want, approval(w))
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: the approvals are %+v, want %+v", name, got, want)
	}
	f := folds[len(folds)-1]
	if f.SandboxMode != "" || f.ApprovalPolicy != "" || f.Preset != "" || f.HasRules || len(f.Open()) != 0 {
		t.Errorf("%s: the fold at the end is %+v (open %+v), want empty", name, f, f.Open())
	}
}

// TestPermissionFoldMatchesHarness folds the permission events of every
// corpus log (restored and written by the package, raw) and of the
// hand-written logs (permCases) with session.PermissionFold, event by
// event over sessionflow's read of the log and the closers of a resume,
// and compares the fold after each event with the harness's own folds of
// the same prefix of the log the package loads (permissions.mjs):
// effectiveSandboxMode, effectiveApprovalPolicy and
// effectivePermissionPreset, and the approvals the user-approval
// companion's pairing has pending whose turn is still open (Open). The
// hand-written logs hold switches of the three knobs between and inside
// turns, approvals asked and decided one at a time and two at once, an
// ask a crash left open (the load closes its turn: nothing is open
// after), the same resumed and decided in a later turn, sessionflow's
// ignorable approval/rules (the harness's folds pass over it), values
// the harness's vocabulary does not know and values that are not strings
// or are absent (the last event is in effect whatever it holds), and the
// pairings the harness's invariants refuse. Each log's fold at its end
// is checked against literals too, and the snapshots of permSnapshots
// (by name) against their approvals. The corpus logs the package loads
// pass the harness's invariants, with the user-approval, sandbox-policy
// and permission-presets companions mounted, but the fixtures
// TestDifferentialHarness names.
func TestPermissionFoldMatchesHarness(t *testing.T) {
	dir := t.TempDir()
	var names []string
	var inputs []judgeInput
	var cases []judged
	for _, r := range restoreCorpus(t, filepath.Join(dir, "corpus"), "none") {
		if r.Events == 0 || !r.Loaded {
			if !r.Loaded && r.Events > 0 && !unloadable[r.Rel] {
				t.Errorf("the package does not load the restored %s: %s: %s", r.Rel, r.ErrorName, r.Error)
			}
			continue
		}
		names = append(names, r.Rel)
		inputs = append(inputs, judgeInput{Root: r.Root, Compression: r.Compression, ID: r.ID, discard: true})
	}
	gv, nv := judgeBoth(t, testdeadline.Context(t, 5*time.Minute), inputs)
	for i := range inputs {
		if d := compareVerdicts(nv[i], gv[i]); d != "" {
			t.Errorf("%s: sessionflow's read and the package's load disagree: %s", names[i], d)
		}
		cases = append(cases, judged{name: names[i], class: "corpus/none", g: gv[i], n: nv[i]})
	}
	checkCorpusInvariants(t, cases)

	perm := judgePermCases(t)
	verdicts := slices.Clone(nv)
	for _, c := range perm {
		verdicts = append(verdicts, c.n)
	}
	reads := readPermissions(t, verdicts)

	snapshots, agreeing, switching, asking := 0, 0, 0, 0
	for i, name := range names {
		if _, ok := permSnapshots[name]; ok {
			snapshots++
		}
		r := reads[i]
		if r.Error != "" {
			t.Errorf("%s: permissions.mjs: %s: %s", name, r.ErrorName, r.Error)
			continue
		}
		events := eventsOf(gv[i])
		d, folds := foldEvents(events, r)
		if d != "" {
			t.Errorf("%s: %s", name, d)
			continue
		}
		agreeing++
		if f := folds[len(folds)-1]; f.SandboxMode != "" || f.ApprovalPolicy != "" || f.Preset != "" {
			switching++
		}
		for _, e := range events {
			if e.Type == "approval/asked" {
				asking++
				break
			}
		}
		if _, ok := permSnapshots[name]; ok {
			checkSnapshot(t, name, events, folds)
		}
	}
	if snapshots != len(permSnapshots) {
		t.Errorf("%d of the %d snapshots of permSnapshots are among the corpus logs the package loads", snapshots, len(permSnapshots))
	}
	t.Logf("the folds agree on every event of %d of %d corpus logs (%d end with a knob switched, %d ask for approval)", agreeing, len(names), switching, asking)

	for k, c := range perm {
		r := reads[len(names)+k]
		if r.Error != "" {
			t.Errorf("%s: permissions.mjs: %s: %s", c.name, r.ErrorName, r.Error)
			continue
		}
		events := eventsOf(c.g)
		d, folds := foldEvents(events, r)
		if d != "" {
			t.Errorf("%s: %s", c.name, d)
			continue
		}
		f := folds[len(folds)-1]
		if f.SandboxMode != c.mode || f.ApprovalPolicy != c.policy || f.Preset != c.preset || f.HasRules != c.hasRules || !slices.Equal(f.Rules, c.rules) || len(f.Open()) != 0 {
			t.Errorf("%s: the fold at the end is %+v (open %+v), want mode %q, policy %q, preset %q, rules %v (%v), none open",
				c.name, f, f.Open(), c.mode, c.policy, c.preset, c.rules, c.hasRules)
		}
		checkOpenAfter(t, c.name, events, folds, c.openAfter)
	}
}

// TestJudgePermissionInvariants runs judge.mjs and sessionflow's read
// over the hand-written permission logs (permCases): the package loads
// each and sessionflow reads it alike, and the harness's invariants, with
// the companions of @deepseek-ai/dsh-user-approval,
// @deepseek-ai/dsh-sandbox-policy and @deepseek-ai/dsh-permission-presets
// mounted beside the session and compaction ones, refuse an unknown
// sandbox mode, approval policy or preset (and a knob value that is not a
// string), a decision without its ask, an ask outside a turn, an ask
// repeated while open, an ask without a tool name and an unknown outcome;
// they pass switches (the shipped composition's read-only preset
// included), approvals asked and decided, two open at once, an ask a
// crash left open, the same decided in a later turn, and sessionflow's
// ignorable approval/rules.
func TestJudgePermissionInvariants(t *testing.T) {
	for _, c := range judgePermCases(t) {
		n := c.n
		switch {
		case c.invariantError == "" && n.InvariantError != "":
			t.Errorf("%s: the invariants refuse it: %s: %s", c.name, n.InvariantErrorName, n.InvariantError)
		case c.invariantError != "" && (n.InvariantErrorName != "InvariantError" || n.InvariantError != c.invariantError):
			t.Errorf("%s: the invariants say %s: %q, want InvariantError: %q", c.name, n.InvariantErrorName, n.InvariantError, c.invariantError)
		}
	}
}
