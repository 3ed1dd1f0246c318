package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/internal/sessiontest"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/workflows"
)

// corpusSession is one session the published harness wrote: a root of its
// own (no compression) holding its format v0 log alone.
type corpusSession struct {
	// Name is the log's path in the harness repository.
	Name string
	// Root is the root holding the log; tests work on copies of it.
	Root string
	// ID is the session id.
	ID string
}

// interimDir holds two snapshot logs of the harness repository, restored
// the way its JSONL backend writes them (see its README).
const interimDir = "testdata/resume-interim"

// corpusSessions returns the harness sessions the continuation tests run
// over.
func corpusSessions(t *testing.T) []corpusSession {
	t.Helper()
	logs := []struct{ name, dir string }{
		{"examples/acp-agent/tests/snapshots/advanced-toolchain/session.1.jsonl", "advanced-toolchain.1"},
		{"examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl", "compaction-recovery"},
	}
	var out []corpusSession
	for _, l := range logs {
		root, err := filepath.Abs(filepath.Join(interimDir, l.dir))
		if err != nil {
			t.Fatal(err)
		}
		ids, err := filepath.Glob(filepath.Join(root, "*", "*", "session.jsonl"))
		if err != nil || len(ids) != 1 {
			t.Fatalf("%s: want one log, found %v (%v)", root, ids, err)
		}
		out = append(out, corpusSession{Name: l.name, Root: root, ID: filepath.Base(filepath.Dir(ids[0]))})
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
func continueSession(t *testing.T, st *jsonl.Store, id, routeProvider string, opts *workflows.AgentOptions) continued {
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
	ready := h.UpdateAt(time.Second, "", workflows.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", workflows.UpdateFollowup, sessiontest.Prompt(continuePrompt))
	ended := h.TurnsEnded(1)
	h.WaitFor(2*time.Second, "the continued turn ended", func() bool {
		if ended() {
			return true
		}
		// A refused Followup starts no turn.
		s := h.LoopState()
		return fu.Settled() && len(s.Recent) == 0 && len(s.Pending.NextTurn)+len(s.Pending.NextStep) == 0
	})
	disp := h.UpdateAt(3*time.Second, "", workflows.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.ResumeSession, workflows.ResumeSessionRequest{ResumeSessionID: id, AgentOptions: opts})
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

// copyOf copies a root to a fresh directory.
func copyOf(t *testing.T, root string) string {
	t.Helper()
	if _, err := os.Stat(root); err != nil {
		t.Fatal(err)
	}
	return copyRoot(t, root)
}
