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

	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
)

// event is one event of a hand-written log, numbered when the log is
// written: its seq and time are its index.
type event struct {
	typ, data string
	// rest follows data: the surfaceOp and sourceEventSeqs of a surface
	// event, with their leading comma.
	rest string
}

// line is the event's log line at seq.
func (e event) line(seq int) []byte {
	return fmt.Appendf(nil, `{"type":%q,"seq":%d,"time":%d,"data":%s%s}`, e.typ, seq, seq, e.data, e.rest)
}

// The events of the compaction logs, in the shapes of the harness's snapshot
// examples/headless-agent/tests/snapshots/compaction-recovery.
func turnStart(turn int) event {
	return event{typ: "turn/start", data: fmt.Sprintf(`{"turn":%d}`, turn)}
}

func turnEnd(turn int, reason string) event {
	return event{typ: "turn/end", data: fmt.Sprintf(`{"turn":%d,"reason":{"kind":%q}}`, turn, reason)}
}

func stepStart(turn, step int) event {
	return event{typ: "step/start", data: fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step)}
}

func stepEnd(turn, step int) event {
	return event{typ: "step/end", data: fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step)}
}

func userText(id, text string) event {
	return event{typ: "user/message",
		data: fmt.Sprintf(`{"content":[{"type":"text","text":%q}],"source":{"kind":"user"},"role":"user","id":%q}`, text, id),
		rest: `,"surfaceOp":"append"`}
}

func assistantText(turn, step int, id, text string) event {
	return event{typ: "assistant/message",
		data: fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"role":"assistant","content":[{"type":"text","text":%q}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":%q}}`, turn, step, text, id),
		rest: `,"surfaceOp":"append"`}
}

// owner is a compaction's turn in JSON: "null" for a standalone one.
func compactionStart(id, owner string) event {
	return event{typ: "compaction/start", data: fmt.Sprintf(`{"compactionId":%q,"turn":%s}`, id, owner)}
}

// compactionSummary shadows the surface nodes shadowed (first to last).
func compactionSummary(id string, shadowed ...int) event {
	seqs := jsonInts(shadowed)
	return event{typ: "compaction/summary", data: fmt.Sprintf(`{"compactionId":%q,"summary":[{"type":"text","text":"The user said hello."}],`+
		`"rawOutput":[{"type":"text","text":"The user said hello."}],"llmStreamCall":true,"shadowedRange":{"start":%d,"end":%d},"shadowedSeqs":%s,`+
		`"shadowedTokenCount":18,"provider":"deepseek-official","model":"deepseek-v4-flash","maxTokens":32,"usage":{"inputTokens":20,"outputTokens":4}}`,
		id, shadowed[0], shadowed[len(shadowed)-1], seqs)}
}

// checkpoint is the user/message that replaces the nodes shadowed, citing
// the compaction's start and summary and the nodes it shadows.
func checkpoint(id string, startSeq, summarySeq int, shadowed ...int) event {
	sources := jsonInts(append([]int{startSeq, summarySeq}, shadowed...))
	return event{typ: "user/message",
		data: fmt.Sprintf(`{"content":[{"type":"text","text":"<compacted-summary>"},{"type":"text","text":"The user said hello."},{"type":"text","text":"</compacted-summary>"}],`+
			`"source":{"kind":"plugin","plugin":"compact","compactionId":%q},"role":"user","id":"checkpoint-%s"}`, id, id),
		rest: fmt.Sprintf(`,"sourceEventSeqs":%s,"surfaceOp":{"op":"replace","start":%d,"end":%d}`, sources, shadowed[0], shadowed[len(shadowed)-1])}
}

// compactionEnd ends a compaction; failure is its error ("" for a
// successful one).
func compactionEnd(id, owner, failure string) event {
	if failure != "" {
		return event{typ: "compaction/end", data: fmt.Sprintf(`{"compactionId":%q,"turn":%s,"error":%q}`, id, owner, failure)}
	}
	return event{typ: "compaction/end", data: fmt.Sprintf(`{"compactionId":%q,"turn":%s}`, id, owner)}
}

func endSeed() event { return event{typ: "session/end-seed", data: `{}`} }

func jsonInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// TestJudgeCompactionInvariants runs judge.mjs and sessionflow's judge over
// hand-written logs with compaction brackets: the package's load accepts
// each, and the harness's invariants (the compaction companion beside the
// session one) refuse a summary without a start, a start inside an open
// bracket, a turn boundary inside one, an end or a checkpoint naming another
// compaction, a start naming another turn and a successful end without a
// summary; they pass a complete bracket inside its turn (whose checkpoint
// replaces the shadowed nodes in the package's fold), a failed one, a
// standalone one between turns, and a start left open by a crash, which the
// end-seed marker after it makes stale (the stored one of a resume, or the
// one the judge's seed appends), unless a compaction/end follows it first.
// sessionflow's read must agree with the package's load and fold, except
// that it may refuse a log the invariants refuse.
func TestJudgeCompactionInvariants(t *testing.T) {
	const c, d = "c0000000-0000-4000-8000-000000000001", "c0000000-0000-4000-8000-000000000002"
	// turn1 opens turn 1 with a user and an assistant message (seqs 2 and
	// 3) and opens its step 2 at seq 5.
	turn1 := []event{turnStart(1), stepStart(1, 1), userText("u1", "hello"), assistantText(1, 1, "a1", "hi"), stepEnd(1, 1), stepStart(1, 2)}
	closeTurn1 := []event{assistantText(1, 2, "a2", "done"), stepEnd(1, 2), turnEnd(1, "completed")}
	cat := func(parts ...[]event) []event { return slices.Concat(parts...) }
	type replacement struct {
		seq, start, end int64
		shadowed        []int64
	}
	cases := []struct {
		name   string
		events []event
		// invariantError is a part of what the invariants say; "" when
		// they pass.
		invariantError string
		// closers are the types of the events the package's load appends.
		closers []string
		// replacements are the package's fold's, when checked.
		replacements []replacement
	}{
		{name: "a summary without a start",
			events:         cat(turn1, []event{compactionSummary(c, 2, 3)}, closeTurn1),
			invariantError: `invariant violated by "@deepseek-ai/dsh-compaction": compaction/summary has no matching compaction/start`},
		{name: "two starts without an end",
			events:         cat(turn1, []event{compactionStart(c, "1"), compactionStart(d, "1")}, closeTurn1),
			invariantError: `invariant violated by "@deepseek-ai/dsh-compaction": compaction/start while turn 1 is still compacting`},
		{name: "a turn/end inside a bracket",
			events:         cat(turn1, []event{compactionStart(c, "1"), stepEnd(1, 2), turnEnd(1, "completed"), compactionEnd(c, "1", "cancelled")}),
			invariantError: `invariant violated by "@deepseek-ai/dsh-compaction": turn/end cannot cross an open compaction for turn 1`},
		{name: "a turn/start inside a standalone bracket",
			events: cat(turn1, closeTurn1, []event{compactionStart(c, "null"), turnStart(2), stepStart(2, 1),
				assistantText(2, 1, "a3", "again"), stepEnd(2, 1), turnEnd(2, "completed"), compactionEnd(c, "null", "cancelled")}),
			invariantError: `invariant violated by "@deepseek-ai/dsh-compaction": turn/start cannot cross an open standalone compaction`},
		{name: "an end with another compactionId",
			events:         cat(turn1, []event{compactionStart(c, "1"), compactionEnd(d, "1", "failed")}, closeTurn1),
			invariantError: `invariant violated by "@deepseek-ai/dsh-compaction": compaction/end id ` + d + ` does not match compaction/start id ` + c},
		{name: "a successful end without a summary",
			events:         cat(turn1, []event{compactionStart(c, "1"), compactionEnd(c, "1", "")}, closeTurn1),
			invariantError: `invariant violated by "@deepseek-ai/dsh-compaction": successful compaction/end requires one compaction/summary`},
		{name: "a checkpoint of another compaction",
			events:         cat(turn1, []event{compactionStart(c, "1"), compactionSummary(c, 2, 3), checkpoint(d, 6, 7, 2, 3), compactionEnd(c, "1", "")}, closeTurn1),
			invariantError: `invariant violated by "@deepseek-ai/dsh-compaction": compaction checkpoint id ` + d + ` does not match compaction/start id ` + c},
		{name: "a start for another turn",
			events:         cat(turn1, []event{compactionStart(c, "2"), compactionEnd(c, "2", "failed")}, closeTurn1),
			invariantError: `invariant violated by "@deepseek-ai/dsh-compaction": compaction/start names turn 2 but open turn is 1`},
		{name: "a complete bracket inside its turn",
			// start 6, summary 7, the checkpoint 8 replaces 2..3, end 9.
			events:       cat(turn1, []event{compactionStart(c, "1"), compactionSummary(c, 2, 3), checkpoint(c, 6, 7, 2, 3), compactionEnd(c, "1", "")}, closeTurn1),
			replacements: []replacement{{seq: 8, start: 2, end: 3, shadowed: []int64{2, 3}}}},
		{name: "a failed bracket",
			events: cat(turn1, []event{compactionStart(c, "1"), compactionEnd(c, "1", "the summarizer failed")}, closeTurn1)},
		{name: "a standalone bracket between turns",
			// turn 1 ends at seq 8; start 9, summary 10, the checkpoint
			// 11 replaces 2..6, end 12.
			events: cat(turn1, closeTurn1, []event{compactionStart(c, "null"), compactionSummary(c, 2, 3, 6), checkpoint(c, 9, 10, 2, 3, 6), compactionEnd(c, "null", ""),
				turnStart(2), stepStart(2, 1), userText("u2", "go on"), assistantText(2, 1, "a3", "going"), stepEnd(2, 1), turnEnd(2, "completed")}),
			replacements: []replacement{{seq: 11, start: 2, end: 6, shadowed: []int64{2, 3, 6}}}},
		{name: "a start left open by a crash",
			// The load closes step 2 and turn 1; the resume's seed ends
			// with session/end-seed.
			events:  cat(turn1, []event{compactionStart(c, "1")}),
			closers: []string{"step/end", "turn/end"}},
		{name: "a start left open, closed by a resume, then a compaction in the next turn",
			// The start at 6, the stored closers at 7 and 8, the end-seed
			// marker at 9; turn 2 from 10 (messages 12 and 13): start 16,
			// summary 17, the checkpoint 18 replaces 2..13, end 19.
			events: cat(turn1, []event{compactionStart(c, "1"), stepEnd(1, 2), turnEnd(1, "interrupted"), endSeed(),
				turnStart(2), stepStart(2, 1), userText("u2", "go on"), assistantText(2, 1, "a3", "going"), stepEnd(2, 1), stepStart(2, 2),
				compactionStart(d, "2"), compactionSummary(d, 2, 3, 12, 13), checkpoint(d, 16, 17, 2, 3, 12, 13), compactionEnd(d, "2", ""),
				assistantText(2, 2, "a4", "gone"), stepEnd(2, 2), turnEnd(2, "completed")}),
			replacements: []replacement{{seq: 18, start: 2, end: 13, shadowed: []int64{2, 3, 12, 13}}}},
		{name: "a start left open, its turn closed without the end-seed marker",
			// A start that no compaction/end follows before an end-seed
			// marker is stale, and the marker the judge's seed appends
			// counts: the turn boundaries after it pass.
			events: cat(turn1, []event{compactionStart(c, "1"), stepEnd(1, 2), turnEnd(1, "interrupted"),
				turnStart(2), stepStart(2, 1), userText("u2", "go on"), assistantText(2, 1, "a3", "going"), stepEnd(2, 1), turnEnd(2, "completed")})},
		{name: "a start left open, its turn closed, then a bracket ended",
			// The later compaction/end keeps the start from going stale.
			events: cat(turn1, []event{compactionStart(c, "1"), stepEnd(1, 2), turnEnd(1, "interrupted"),
				compactionStart(d, "null"), compactionEnd(d, "null", "failed")}),
			invariantError: `invariant violated by "@deepseek-ai/dsh-compaction": turn/end cannot cross an open compaction for turn 1`},
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var inputs []judgeInput
	for i, tc := range cases {
		id := fmt.Sprintf("0000000%x-0000-4000-8000-0000000000c0", i)
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
	for i, tc := range cases {
		n := nv[i]
		if !n.Accepted {
			t.Errorf("%s: the package refuses it: %s: %s", tc.name, n.ErrorName, n.Error)
			continue
		}
		// sessionflow's read agrees with the package's load and fold; it
		// may refuse only a log that breaks the invariants.
		if d, exempt := verdictOf(judged{name: tc.name, class: "compaction", n: n, g: gv[i]}, true); d != "" &&
			(tc.invariantError == "" || exempt != exemptInvariants) {
			t.Errorf("%s: the two disagree (exemption %q): %s", tc.name, exempt, d)
		}
		switch {
		case tc.invariantError == "" && n.InvariantError != "":
			t.Errorf("%s: the invariants refuse it: %s: %s", tc.name, n.InvariantErrorName, n.InvariantError)
		case tc.invariantError != "" && (n.InvariantErrorName != "InvariantError" || !strings.Contains(n.InvariantError, tc.invariantError)):
			t.Errorf("%s: the invariants say %s: %q, want InvariantError: %q", tc.name, n.InvariantErrorName, n.InvariantError, tc.invariantError)
		}
		var closers []string
		for _, raw := range n.Events[len(tc.events):] {
			closers = append(closers, eventType(t, raw))
		}
		if !slices.Equal(closers, tc.closers) {
			t.Errorf("%s: the load appends %v, want %v", tc.name, closers, tc.closers)
		}
		if tc.replacements == nil {
			continue
		}
		var got []replacement
		for _, r := range n.Replacements {
			got = append(got, replacement{seq: r.Seq, start: r.Start, end: r.End, shadowed: r.Shadowed})
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.replacements) {
			t.Errorf("%s: the package folds the replacements %v, want %v (fold error %q)", tc.name, got, tc.replacements, n.FoldError)
		}
	}
}

// eventType is the type of a loaded event.
func eventType(t *testing.T, raw []byte) string {
	t.Helper()
	var e struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e.Type
}
