package harness

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/workflows"
)

// TestContinueHarnessSessions: every session the published harness wrote
// in the corpus (each ends between turns or in an interrupted turn) is
// read by the CLI event for event as the package reads it (`log cat`,
// `log inspect`, `log migrate`), and is resumed and continued through the
// workflows: on a format v3 root (the resume migrates it) and in place on a
// format v0 root, the resume reuses the route its request/context records,
// one more turn runs with the scripted provider, and the session is
// disposed. The log then holds the harness's events, what the resume
// stored (the closers the harness's own load stores, the end-seed marker)
// and the new turn; on the v0 root the package loads it and sees the new
// turn's question and answer last.
func TestContinueHarnessSessions(t *testing.T) {
	for _, cs := range corpusSessions(t) {
		t.Run(cs.Name, func(t *testing.T) {
			t.Parallel()
			// The package's view of the pristine log: its stored events,
			// and what its load makes of them (closers of an interrupted
			// turn appended), on a copy, as its load writes them.
			rs := runHarness(t, copyOf(t, cs.Root), "none", op{"op": "readFrom", "id": cs.ID, "fromSeq": 0}, op{"op": "load", "id": cs.ID})
			_, stored := harnessEvents(t, mustOK(t, "readFrom", rs[0]))
			meta, loaded := harnessEvents(t, mustOK(t, "load", rs[1]))
			if len(loaded) < len(stored) {
				t.Fatalf("the package loads %d events of %d stored", len(loaded), len(stored))
			}
			closers := loaded[len(stored):]
			t.Logf("%d events, %s", len(stored), map[bool]string{true: "ends between turns", false: fmt.Sprintf("ends in an interrupted turn (%d closers)", len(closers))}[len(closers) == 0])

			t.Run("cli", func(t *testing.T) { checkCLI(t, cs, meta, stored) })
			for _, format := range []jsonl.Format{jsonl.FormatV3, jsonl.FormatV0} {
				t.Run(string(format), func(t *testing.T) {
					continueOn(t, cs, format, meta, stored, closers)
				})
			}
		})
	}
}

// checkCLI: `log cat` and `log inspect` read the pristine v0 log as the
// package does, and `log migrate` carries it into v3 unchanged in meaning.
func checkCLI(t *testing.T, cs corpusSession, meta map[string]any, stored []any) {
	root := copyOf(t, cs.Root)
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
	out, errOut, err = starter(t, append([]string{"log", "cat"}, flags...)...)
	if err != nil {
		t.Fatalf("log cat after log migrate: %v\n%s", err, errOut)
	}
	equalJSON(t, "log cat after log migrate", catEvents(t, out), asV3(meta, stored))
}

// continueOn resumes and continues a copy of the session on a root of
// format and checks the log it leaves.
func continueOn(t *testing.T, cs corpusSession, format jsonl.Format, meta map[string]any, stored, closers []any) {
	root := copyOf(t, cs.Root)
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, Format: format})
	if err != nil {
		t.Fatal(err)
	}
	provider, model := lastRoute(stored)
	var opts *workflows.AgentOptions
	wantRoute := provider + "/" + model
	if provider == "" {
		// Nothing to reuse: the caller names the route.
		opts, wantRoute = &workflows.AgentOptions{Provider: "scripted", Model: "m1"}, "scripted/m1"
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
	checkTurn(t, turn, lastTurn(stored)+1)
	if format != jsonl.FormatV0 {
		return
	}
	// The package reads the continued v0 log back, and its last messages
	// are the new turn's question and answer.
	rs := runHarness(t, root, "none", op{"op": "load", "id": cs.ID})
	if rs[0].Error != "" {
		t.Fatalf("the package's load of the continued log: %s: %s", rs[0].Name, rs[0].Error)
	}
	_, reloaded := harnessEvents(t, rs[0].OK)
	equalJSON(t, "the continued log as the package loads it", reloaded, events)
	user, answer := lastTexts(reloaded)
	if user != continuePrompt || answer != continueAnswer {
		t.Fatalf("the package's last messages: user %q, assistant %q", user, answer)
	}
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
// the continued session's question and the scripted answer.
func checkTurn(t *testing.T, events []any, turn int) {
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
