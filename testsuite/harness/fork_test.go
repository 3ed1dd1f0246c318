package harness

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// forkSession forks a session of st into id through the CreateSession
// workflow (Temporal's test environment, the real store and agent
// activities), runs one turn in it when turn is set (the scripted provider,
// offered under every name, answers continueAnswer) and disposes it. It
// returns the routes of the turn's model calls.
func forkSession(t *testing.T, st *jsonl.Store, id string, fork wire.ForkSeed, turn bool) []string {
	t.Helper()
	h := sessiontest.NewHarnessOn(t, st).WithID(id)
	p, err := scripted.New(scripted.Script{Loop: true, Responses: []scripted.Response{scripted.Text(continueAnswer)}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &routeSeen{next: p}
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"scripted": rec, "deepseek-official": rec}))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var fu *sessiontest.Result
	if turn {
		fu = h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt(continuePrompt))
		ended := h.TurnsEnded(1)
		h.WaitFor(2*time.Second, "the fork's turn ended", func() bool {
			// A refused Followup starts no turn.
			s := h.LoopState()
			return ended() || fu.Settled() && len(s.Recent) == 0 && len(s.Pending.NextTurn)+len(s.Pending.NextStep) == 0
		})
	}
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, Fork: &fork})
	if err := h.Env.GetWorkflowError(); err != nil {
		t.Fatalf("fork %s: %v", id, err)
	}
	ready.OK(t)
	if fu != nil {
		fu.OK(t)
	}
	disp.OK(t)
	return rec.routes()
}

// forkLineage is what the package's load reports of a fork child's header.
type forkLineage struct {
	ParentSession   string `json:"parentSession"`
	SeedLength      *int   `json:"seedLength"`
	Origin          string `json:"origin"`
	DelegationDepth int    `json:"delegationDepth"`
	Cwd             string `json:"cwd"`
}

// TestForkChildrenLoadWithLineage: sessions forked at a turn on a format
// v0 root (the published harness's format) are loaded by the pinned
// package with the harness's lineage: parentSession, seedLength (the
// copied prefix, through the turn's turn/end), the parent's cwd, and the
// end-seed marker at seq seedLength; their prefix is the parent's events as
// the package loads them, and the package's invariants and surface fold
// pass. The parents: a two-turn harness session (forked at turn 1, at its
// last turn, and the fork, which ran a turn of its own with the route the
// copied prefix records, forked again) and a fork child the harness wrote
// itself (forked at its inherited turn and at its own).
func TestForkChildrenLoadWithLineage(t *testing.T) {
	dir := t.TempDir()
	multi := restoreSnapshot(t, filepath.Join(dir, "multi"), "examples/acp-agent/tests/snapshots/multi-turn/session.jsonl")
	hfork := restoreSnapshot(t, filepath.Join(dir, "hfork"), "examples/acp-agent/tests/snapshots/subagent-fork-in-process/session.1.jsonl")

	type fork struct {
		id, parent string
		seed       wire.ForkSeed
		turn       bool
	}
	type rootCase struct {
		root  string
		forks []fork
	}
	cases := []rootCase{
		{copyOf(t, multi.Root, dir), []fork{
			{"at-turn-1", multi.ID, wire.ForkSeed{ParentSessionID: multi.ID, AtTurn: 1}, true},
			{"at-last-turn", multi.ID, wire.ForkSeed{ParentSessionID: multi.ID, AtLastTurn: true}, false},
			{"fork-of-fork", "at-turn-1", wire.ForkSeed{ParentSessionID: "at-turn-1", AtLastTurn: true}, false},
		}},
		{copyOf(t, hfork.Root, dir), []fork{
			{"of-harness-fork-1", hfork.ID, wire.ForkSeed{ParentSessionID: hfork.ID, AtTurn: 1}, false},
			{"of-harness-fork-2", hfork.ID, wire.ForkSeed{ParentSessionID: hfork.ID, AtTurn: 2}, false},
		}},
	}
	var inputs []judgeInput
	var forks []fork
	for _, c := range cases {
		st, err := jsonl.NewStore(jsonl.Options{Root: c.root, Compression: jsonl.CompressionNone, Format: jsonl.FormatV0})
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, judgeInput{Root: c.root, Compression: "none", ID: c.forks[0].parent})
		for _, f := range c.forks {
			routes := forkSession(t, st, f.id, f.seed, f.turn)
			if f.turn && (len(routes) != 1 || routes[0] != "deepseek-official/deepseek-v4-flash") {
				t.Fatalf("%s: the fork's turn called %v, want the route its prefix records", f.id, routes)
			}
			forks = append(forks, f)
		}
	}
	// Judged on copies: the package's load writes its repairs.
	byID := map[string]judgeInput{}
	for _, c := range cases {
		for _, f := range c.forks {
			byID[f.id] = judgeInput{Root: c.root, Compression: "none", ID: f.id}
		}
	}
	var order []string
	for _, f := range forks {
		order = append(order, f.id)
		inputs = append(inputs, byID[f.id])
	}
	for i := range inputs {
		inputs[i].Root = copyOf(t, inputs[i].Root, "")
	}
	verdicts := judgeAll(t, inputs)
	loaded := map[string]nodeVerdict{multi.ID: verdicts[0], hfork.ID: verdicts[1]}
	for i, id := range order {
		loaded[id] = verdicts[2+i]
	}
	for _, f := range forks {
		t.Run(f.id, func(t *testing.T) {
			v, parent := loaded[f.id], loaded[f.parent]
			if !v.Accepted || v.FoldError != "" || v.InvariantError != "" {
				t.Fatalf("the package's load: accepted %t %s: %s; fold %q; invariants %q", v.Accepted, v.ErrorName, v.Error, v.FoldError, v.InvariantError)
			}
			var meta forkLineage
			if err := json.Unmarshal(v.Meta, &meta); err != nil {
				t.Fatal(err)
			}
			if meta.ParentSession != f.parent || meta.SeedLength == nil || meta.Origin != "" || meta.DelegationDepth != 0 || meta.Cwd != corpusCwd {
				t.Fatalf("lineage %s, want parentSession %q, a seedLength, no origin, depth 0, cwd %q", v.Meta, f.parent, corpusCwd)
			}
			n := *meta.SeedLength
			got, want := plainJSON(t, v.Events), plainJSON(t, parent.Events)
			if n > len(want) || n >= len(got) {
				t.Fatalf("seedLength %d: the parent has %d events, the fork %d", n, len(want), len(got))
			}
			equalJSON(t, "the inherited prefix", got[:n], want[:n])
			if shape(got[n-1])[:len("turn/end")] != "turn/end" {
				t.Fatalf("the prefix ends with %s, want a turn/end", shape(got[n-1]))
			}
			if typ := got[n].(map[string]any)["type"]; typ != "session/end-seed" {
				t.Fatalf("event %d is %v, want the end-seed marker", n, typ)
			}
			turns := 0
			for _, e := range want[:n] {
				if e.(map[string]any)["type"] == "turn/end" {
					turns++
				}
			}
			wantTurns := map[string]int{"at-turn-1": 1, "at-last-turn": 2, "fork-of-fork": 2, "of-harness-fork-1": 1, "of-harness-fork-2": 2}[f.id]
			if turns != wantTurns {
				t.Fatalf("the prefix holds %d turns, want %d", turns, wantTurns)
			}
		})
	}
}
