package harness

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// TestContinueHarnessSessions: every snapshot log of the harness
// repository (testdata/harness-corpus) that the package loads once restored
// ends between turns; each is also written by the package cut inside its
// last turn, as a crash leaves a log. The CLI reads each corpus log event
// for event as the package loads it (`log cat`, `log inspect`, `log
// migrate`), and every log, cut or not, is resumed and continued through
// the workflows: on a format v3 root (the resume migrates it) and in place
// on a format v0 root, the resume reuses the route its request/context
// records, one more turn runs with the scripted provider, and the session
// is disposed. The log then holds the harness's events, what the resume
// stored (the closers the package's own load stores, the end-seed marker)
// and the new turn; the package loads the continued v0 log, and its surface
// fold is the harness's log's followed by the new turn's messages.
func TestContinueHarnessSessions(t *testing.T) {
	start := time.Now()
	restored := restoreCorpus(t, filepath.Join(t.TempDir(), "corpus"), "none")
	var logs []restoredLog
	var inputs []judgeInput
	empty, refused := 0, 0
	for _, r := range restored {
		switch {
		case r.Events == 0:
			empty++ // the backend materializes a log with its first events only
		case !r.Loaded:
			refused++ // TestDifferentialHarness accounts for it
		default:
			logs = append(logs, r)
			// The package's load writes its repairs: it reads a copy.
			inputs = append(inputs, judgeInput{Root: copyOf(t, r.Root, ""), Compression: "none", ID: r.ID})
		}
	}
	pristine := judgeAll(t, inputs)
	// The same logs cut inside their last turn, as a crash leaves them.
	variants := interruptedVariants(t, filepath.Join(t.TempDir(), "interrupted"), logs, pristine)
	var vinputs []judgeInput
	for _, r := range variants {
		vinputs = append(vinputs, judgeInput{Root: copyOf(t, r.Root, ""), Compression: "none", ID: r.ID})
	}
	logs = append(logs, variants...)
	pristine = append(pristine, judgeAll(t, vinputs)...)
	continuedV0 := make([]continuedLog, len(logs))
	// The continued v0 logs outlive their subtests: the package loads them
	// after.
	keep := t.TempDir()
	interrupted := 0
	t.Run("sessions", func(t *testing.T) {
		for i, r := range logs {
			pv := pristine[i]
			if pv.Accepted && len(pv.Events) > r.Events {
				interrupted++
			}
			t.Run(r.Rel, func(t *testing.T) {
				t.Parallel()
				if !pv.Accepted {
					t.Fatalf("the package refuses a copy of the restored log: %s: %s", pv.ErrorName, pv.Error)
				}
				var meta map[string]any
				if err := json.Unmarshal(pv.Meta, &meta); err != nil {
					t.Fatal(err)
				}
				all := plainJSON(t, pv.Events)
				stored, closers := all[:r.Events], all[r.Events:]
				if !strings.HasPrefix(r.Rel, "interrupted/") {
					t.Run("cli", func(t *testing.T) { checkCLI(t, r, meta, stored) })
				}
				t.Run("v3", func(t *testing.T) { continueOn(t, r, jsonl.FormatV3, meta, stored, closers, "") })
				t.Run("v0", func(t *testing.T) { continuedV0[i] = continueOn(t, r, jsonl.FormatV0, meta, stored, closers, keep) })
			})
		}
	})

	// The package loads every continued v0 log, in one Node process.
	var idx []int
	var again []judgeInput
	for i, c := range continuedV0 {
		if c.root != "" {
			idx = append(idx, i)
			again = append(again, judgeInput{Root: c.root, Compression: "none", ID: logs[i].ID})
		}
	}
	verdicts := judgeAll(t, again)
	t.Run("package-load", func(t *testing.T) {
		for k, i := range idx {
			t.Run(logs[i].Rel, func(t *testing.T) { checkReload(t, continuedV0[i], pristine[i], verdicts[k]) })
		}
	})
	t.Logf("corpus: %d logs (%d without events, %d the package refuses once restored); %d continued: %d ending between turns, %d in an interrupted turn; %d v0 logs reloaded by the package; %v",
		len(restored), empty, refused, len(logs), len(logs)-interrupted, interrupted, len(idx), time.Since(start).Round(time.Second))
}

// checkReload: the package loads the continued v0 log with the events
// sessionflow stored, and its surface fold is the harness's log's followed
// by the new turn's question and answer.
func checkReload(t *testing.T, c continuedLog, pristine, v nodeVerdict) {
	if !v.Accepted {
		t.Fatalf("the package's load of the continued log: %s: %s", v.ErrorName, v.Error)
	}
	equalJSON(t, "the continued log as the package loads it", plainJSON(t, v.Events), c.events)
	if v.FoldError != "" {
		t.Fatalf("the package's fold of the continued log: %s", v.FoldError)
	}
	// The new turn's messages: the inputs the harness's log left pending
	// (delivered with the next turn), then the question and the answer.
	want := append(append([]int64(nil), pristine.Nodes...), c.turnNodes...)
	if fmt.Sprint(v.Nodes) != fmt.Sprint(want) || fmt.Sprint(want[len(want)-2:]) != fmt.Sprint([]int64{c.userSeq, c.answerSeq}) {
		t.Fatalf("the package's surface of the continued log: %v, want the harness's %v, then the new turn's %v ending with the question %d and the answer %d",
			v.Nodes, pristine.Nodes, c.turnNodes, c.userSeq, c.answerSeq)
	}
}

// checkCLI: `log cat` and `log inspect` read the pristine v0 log as the
// package does, and `log migrate` carries it into v3 unchanged in meaning.
func checkCLI(t *testing.T, cs restoredLog, meta map[string]any, stored []any) {
	root := copyOf(t, cs.Root, "")
	flags := []string{"--id", cs.ID, "--root", root, "--compression", "none"}
	out, errOut, err := starter(t, append([]string{"log", "cat", "--format", "v0"}, flags...)...)
	if err != nil {
		t.Fatalf("log cat: %v\n%s", err, errOut)
	}
	equalJSON(t, "log cat", catEvents(t, out), stored)
	out, errOut, err = starter(t, append([]string{"log", "inspect", "--json", "--format", "v0"}, flags...)...)
	if err != nil {
		t.Fatalf("log inspect: %v\n%s%s", err, out, errOut)
	}
	var in struct {
		FormatVersion int   `json:"formatVersion"`
		EventCount    int   `json:"eventCount"`
		TornBytes     int64 `json:"tornBytes"`
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil || in.FormatVersion != 0 || in.EventCount != len(stored) || in.TornBytes != 0 {
		t.Fatalf("log inspect: %+v (%v), want format 0 with %d events and no torn tail:\n%s", in, err, len(stored), out)
	}
	out, errOut, err = starter(t, append([]string{"log", "migrate"}, flags...)...)
	if err != nil {
		t.Fatalf("log migrate: %v\n%s%s", err, out, errOut)
	}
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone})
	if err != nil {
		t.Fatal(err)
	}
	h, got := readAll(t, st, cs.ID)
	if v := h.Header().Version; v != 3 {
		t.Fatalf("log migrate left format v%d", v)
	}
	equalJSON(t, "the events after log migrate", asJSON(t, got), asV3(meta, stored))
}

// continuedLog is a session continueOn continued.
type continuedLog struct {
	// root holds it; "" when the continuation failed.
	root string
	// events are its events, as sessionflow reads them.
	events []any
	// userSeq and answerSeq are the seqs of the new turn's question and
	// answer; turnNodes those of all its messages (surfaceOp "append").
	userSeq, answerSeq int64
	turnNodes          []int64
}

// continueOn resumes and continues a copy of the session on a root of
// format and checks the log it leaves. The copy is made in dir, or in a
// directory of the test's when dir is "".
func continueOn(t *testing.T, cs restoredLog, format jsonl.Format, meta map[string]any, stored, closers []any, dir string) continuedLog {
	root := copyOf(t, cs.Root, dir)
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, Format: format})
	if err != nil {
		t.Fatal(err)
	}
	provider, model := lastRoute(stored)
	var opts *wire.AgentOptions
	wantRoute := provider + "/" + model
	if provider == "" {
		// Nothing to reuse: the caller names the route.
		opts, wantRoute = &wire.AgentOptions{Provider: "scripted", Model: "m1"}, "scripted/m1"
	}
	res := continueSession(t, st, cs.ID, provider, opts)
	if res.Err != nil {
		t.Fatalf("%s: %v", res.What, res.Err)
	}
	if len(res.Routes) != 1 || res.Routes[0] != wantRoute {
		t.Fatalf("the turn's model calls went to %v, want one to %s", res.Routes, wantRoute)
	}
	_, got := readAll(t, st, cs.ID)
	events := asJSON(t, got)
	want := stored
	if format == jsonl.FormatV3 {
		want = asV3(meta, stored)
	}
	if len(events) < len(want) {
		t.Fatalf("the log holds %d events, fewer than the harness's %d", len(events), len(want))
	}
	equalJSON(t, "the harness's events after the resume", events[:len(want)], want)
	rest := events[len(want):]
	// The resume's repair: the closers the package's load stores (their
	// times aside), then the end-seed marker unless the log ends with one.
	var repair []string
	for _, c := range closers {
		repair = append(repair, shape(c))
	}
	last := want[len(want)-1].(map[string]any)
	if len(closers) > 0 || last["type"] != "session/end-seed" {
		repair = append(repair, `session/end-seed {}`)
	}
	if len(rest) < len(repair) {
		t.Fatalf("after the harness's events: %d events, want the repair's %d first", len(rest), len(repair))
	}
	for i, want := range repair {
		if got := shape(rest[i]); got != want {
			t.Fatalf("repair event %d: %s, want %s", i, got, want)
		}
	}
	turn := rest[len(repair):]
	user, answer := checkTurn(t, turn, lastTurn(stored)+1)
	var nodes []int64
	for _, e := range turn {
		if ev := e.(map[string]any); ev["surfaceOp"] == "append" {
			nodes = append(nodes, int64(ev["seq"].(float64)))
		}
	}
	return continuedLog{root: root, events: events, userSeq: user, answerSeq: answer, turnNodes: nodes}
}

// shape is an event's type and data, without its seq and time.
func shape(e any) string {
	ev := e.(map[string]any)
	b, _ := json.Marshal(ev["data"])
	return fmt.Sprint(ev["type"], " ", string(b))
}

// lastTurn is the number of the last turn/start of events, 0 if none.
func lastTurn(events []any) int {
	n := 0
	for _, e := range events {
		ev := e.(map[string]any)
		if ev["type"] == "turn/start" {
			n = int(ev["data"].(map[string]any)["turn"].(float64))
		}
	}
	return n
}

// checkTurn: events are one whole turn numbered turn, completed, holding
// the continued session's question and the scripted answer. It returns the
// seqs of the two messages.
func checkTurn(t *testing.T, events []any, turn int) (int64, int64) {
	t.Helper()
	var types []string
	for _, e := range events {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	if len(events) < 2 || types[0] != "turn/start" || types[len(types)-1] != "turn/end" {
		t.Fatalf("the continued turn: %v, want one whole turn", types)
	}
	if got := shape(events[0]); got != fmt.Sprintf(`turn/start {"turn":%d}`, turn) {
		t.Fatalf("the continued turn starts with %s, want turn %d", got, turn)
	}
	if got := shape(events[len(events)-1]); got != fmt.Sprintf(`turn/end {"reason":{"kind":"completed"},"turn":%d}`, turn) {
		t.Fatalf("the continued turn ends with %s", got)
	}
	user, answer := lastTexts(events)
	if user != continuePrompt || answer != continueAnswer {
		t.Fatalf("the continued turn's messages: user %q, assistant %q (%s)", user, answer, strings.Join(types, ", "))
	}
	var userSeq, answerSeq int64
	for _, e := range events {
		ev := e.(map[string]any)
		switch ev["type"] {
		case "user/message":
			userSeq = int64(ev["seq"].(float64))
		case "assistant/message":
			answerSeq = int64(ev["seq"].(float64))
		}
	}
	return userSeq, answerSeq
}

// lastTexts returns the text of the last user/message and of the last
// assistant/message of events.
func lastTexts(events []any) (user, answer string) {
	for _, e := range events {
		ev := e.(map[string]any)
		d, _ := ev["data"].(map[string]any)
		switch ev["type"] {
		case "user/message":
			user = blockText(d["content"])
		case "assistant/message":
			m, _ := d["message"].(map[string]any)
			answer = blockText(m["content"])
		}
	}
	return user, answer
}

// blockText joins the text blocks of a content array.
func blockText(content any) string {
	blocks, _ := content.([]any)
	var b strings.Builder
	for _, c := range blocks {
		if m, ok := c.(map[string]any); ok && m["type"] == "text" {
			s, _ := m["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}
