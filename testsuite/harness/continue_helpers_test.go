package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// judgeAll runs the package's load and surface fold over every session
// (judge.mjs, in one Node process) and returns its verdicts in order.
func judgeAll(t *testing.T, sessions []judgeInput) []nodeVerdict {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, s := range sessions {
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testdeadline.Context(t, 5*time.Minute)
	cmd := exec.CommandContext(ctx, nodeBinary(t), "judge.mjs")
	cmd.Dir = harnessDir
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("judge.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	out := make([]nodeVerdict, len(sessions))
	for i := range out {
		if err := dec.Decode(&out[i]); err != nil {
			t.Fatalf("judge.mjs verdict %d of %d: %v\nstderr:\n%s", i, len(sessions), err, stderr.String())
		}
	}
	return out
}

// plainJSON decodes raw JSON values into plain ones (maps, slices,
// float64), for comparison with equalJSON.
func plainJSON(t *testing.T, raws []json.RawMessage) []any {
	t.Helper()
	out := make([]any, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// routeSeen is a provider that records the route of every request and
// answers with the scripted provider.
type routeSeen struct {
	next provider.Provider
	mu   sync.Mutex
	seen []string
}

// Stream implements provider.Provider.
func (r *routeSeen) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	r.mu.Lock()
	r.seen = append(r.seen, req.Provider+"/"+req.Model)
	r.mu.Unlock()
	return r.next.Stream(ctx, req)
}

func (r *routeSeen) routes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// The turn every continued session runs.
const (
	continuePrompt = "Carry on where the harness left off."
	continueAnswer = "Carried on: the harness's session continues here."
)

// continued is what continueSession saw.
type continued struct {
	// Routes are the routes the model calls were made on.
	Routes []string
	// Err is the workflow's error, or the refusal or failure of one of
	// its updates, nil when the turn ran and the session was disposed.
	Err error
	// What names the step that failed.
	What string
}

// continueSession resumes the session id stored in st through the
// ResumeSession workflow (in Temporal's test environment, with the real
// store and agent activities), sends one Followup whose turn the scripted
// provider answers with continueAnswer, waits for the turn's end and
// disposes the session. The scripted provider is offered under the name
// of the log's route, when it has one, and as "scripted"; opts are the
// resume's agent options.
func continueSession(t *testing.T, st *jsonl.Store, id, routeProvider string, opts *wire.AgentOptions) continued {
	t.Helper()
	h := sessiontest.NewHarnessOn(t, st).WithID(id)
	p, err := scripted.New(scripted.Script{Loop: true, Responses: []scripted.Response{scripted.Text(continueAnswer).WithChunkSize(6)}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &routeSeen{next: p}
	set := provider.Set{"scripted": rec}
	if routeProvider != "" {
		set[routeProvider] = rec
	}
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, set))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt(continuePrompt))
	ended := h.TurnsEnded(1)
	h.WaitFor(2*time.Second, "the continued turn ended", func() bool {
		if ended() {
			return true
		}
		// A refused Followup starts no turn.
		s := h.LoopState()
		return fu.Settled() && len(s.Recent) == 0 && len(s.Pending.NextTurn)+len(s.Pending.NextStep) == 0
	})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: id, AgentOptions: opts})
	out := continued{Routes: rec.routes()}
	if err := h.Env.GetWorkflowError(); err != nil {
		out.Err, out.What = err, "ResumeSession"
	}
	for _, c := range []struct {
		what string
		r    *sessiontest.Result
	}{{"WaitReady", ready}, {"Followup", fu}, {"Dispose", disp}} {
		if err := c.r.Outcome(); err != nil && out.Err == nil {
			out.Err, out.What = err, c.what
		}
	}
	return out
}

// lastRoute returns the provider and model of the last request/context
// naming both, "" when none does.
func lastRoute(events []any) (string, string) {
	p, m := "", ""
	for _, e := range events {
		ev := e.(map[string]any)
		if ev["type"] != "request/context" {
			continue
		}
		d, _ := ev["data"].(map[string]any)
		pp, ok1 := d["provider"].(string)
		mm, ok2 := d["model"].(string)
		if ok1 && ok2 && pp != "" && mm != "" {
			p, m = pp, mm
		}
	}
	return p, m
}

// catEvents parses the JSONL of `starter log cat`.
func catEvents(t *testing.T, out string) []any {
	t.Helper()
	var events []any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("log cat line %q: %v", sc.Text(), err)
		}
		if m, ok := v.(map[string]any); ok && m["type"] == "session" {
			continue
		}
		events = append(events, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

// asV3 is the harness's events as a migration to format v3 stores them: a
// replace surfaceOp respelled {op, startSeq, endSeq} (FORMAT.md §1.1) and,
// in a fork child (seedLength in meta), the fork's end-seed marker
// carrying {"inherited":true}.
func asV3(meta map[string]any, events []any) []any {
	b, _ := json.Marshal(events)
	var out []any
	_ = json.Unmarshal(b, &out)
	for _, e := range out {
		ev := e.(map[string]any)
		if op, ok := ev["surfaceOp"].(map[string]any); ok {
			if s, ok := op["start"]; ok {
				ev["surfaceOp"] = map[string]any{"op": op["op"], "startSeq": s, "endSeq": op["end"]}
			}
		}
	}
	if seed, ok := meta["seedLength"].(float64); ok {
		at := int(seed)
		if at >= len(out) || out[at].(map[string]any)["type"] != "session/end-seed" {
			at--
		}
		out[at].(map[string]any)["data"] = map[string]any{"inherited": true}
	}
	return out
}

// copyOf copies a root to a fresh directory under dir, or under a
// directory of the test's when dir is "".
func copyOf(t *testing.T, root, dir string) string {
	t.Helper()
	if _, err := os.Stat(root); err != nil {
		t.Fatal(err)
	}
	if dir == "" {
		return copyRoot(t, root)
	}
	to, err := os.MkdirTemp(dir, "root-")
	if err != nil {
		t.Fatal(err)
	}
	to = filepath.Join(to, "copy")
	if out, err := exec.Command("cp", "-a", root, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	return to
}

// interruptedCut returns where to cut a log that ends between turns so that
// it ends in an interrupted turn, as a crash would leave it: right after the
// last turn's last tool/call (a call recorded as started, without its
// result), else right before its last step/end (a step open after the
// model's answer), else right before its turn/end; -1 when it has no turn.
func interruptedCut(events []any) int {
	start := -1
	for i, e := range events {
		if e.(map[string]any)["type"] == "turn/start" {
			start = i
		}
	}
	if start < 0 {
		return -1
	}
	call, stepEnd, turnEnd := -1, -1, -1
	for i := start; i < len(events); i++ {
		switch events[i].(map[string]any)["type"] {
		case "tool/call":
			call = i
		case "step/end":
			stepEnd = i
		case "turn/end":
			turnEnd = i
		}
	}
	switch {
	case call >= 0:
		return call + 1
	case stepEnd >= 0:
		return stepEnd
	case turnEnd >= 0:
		return turnEnd
	}
	return -1
}

// interruptedVariants has the package write, for every log, the log cut
// where interruptedCut says, each in a root of its own under dir
// (write.mjs: the events keep their seqs and times; nothing loads them, so
// the turn stays open), and returns them named "interrupted/<name>". Logs
// without a turn have no variant.
func interruptedVariants(t *testing.T, dir string, logs []restoredLog, pristine []nodeVerdict) []restoredLog {
	t.Helper()
	type write struct {
		Root        string `json:"root"`
		Compression string `json:"compression"`
		Meta        any    `json:"meta"`
		Events      []any  `json:"events"`
	}
	var in []write
	var out []restoredLog
	for i, r := range logs {
		if !pristine[i].Accepted {
			continue
		}
		events := plainJSON(t, pristine[i].Events)[:r.Events]
		cut := interruptedCut(events)
		if cut < 0 {
			continue
		}
		var meta any
		if err := json.Unmarshal(pristine[i].Meta, &meta); err != nil {
			t.Fatal(err)
		}
		root := filepath.Join(dir, fmt.Sprintf("%03d", i))
		in = append(in, write{Root: root, Compression: "none", Meta: meta, Events: events[:cut]})
		out = append(out, restoredLog{Rel: "interrupted/" + r.Rel, Compression: "none", Root: root, ID: r.ID, Events: cut, Loaded: true})
	}
	var res []struct {
		Error     string `json:"error"`
		ErrorName string `json:"errorName"`
	}
	runScript(t, "write.mjs", map[string]any{"sessions": in}, &res)
	if len(res) != len(in) {
		t.Fatalf("write.mjs wrote %d sessions, want %d", len(res), len(in))
	}
	for i, r := range res {
		if r.Error != "" {
			t.Fatalf("the package does not write %s: %s: %s", out[i].Rel, r.ErrorName, r.Error)
		}
	}
	return out
}
