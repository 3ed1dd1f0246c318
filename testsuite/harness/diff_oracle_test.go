package harness

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
)

// TestJudgeOracles runs judge.mjs and sessionflow's judge over hand-made
// logs, one per oracle of the exemptions: the harness's session invariants
// (replayed as a resume seeds a session), what the package's raw scan drops
// after damage, and whether its writer could have written each line; each
// log also goes through the exemption rules of the differential suite.
func TestJudgeOracles(t *testing.T) {
	ctx := testdeadline.Context(t, 3*time.Minute)
	const (
		start    = `{"type":"turn/start","seq":%d,"time":%[1]d,"data":{"turn":%d}}`
		end      = `{"type":"turn/end","seq":%d,"time":%[1]d,"data":{"turn":%d,"reason":{"kind":"completed"}}}`
		stepOpen = `{"type":"step/start","seq":%d,"time":%[1]d,"data":{"turn":1,"step":1}}`
		chunk    = `{"type":"assistant/chunk","seq":%d,"time":%[1]d,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}}`
	)
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	type want struct {
		accepted       bool
		invariantError string // a part of it; "" when they pass
		damage         *packageDamage
		roundTrip      bool
		stringify      bool
		exempt         string
		agree          bool
	}
	cases := []struct {
		name  string
		lines []string
		tail  string
		want  want
	}{
		{name: "a complete turn", lines: []string{fmt.Sprintf(start, 0, 1), fmt.Sprintf(end, 1, 1)},
			want: want{accepted: true, agree: true}},
		{name: "turn 3 after turn 1",
			lines: []string{fmt.Sprintf(start, 0, 1), fmt.Sprintf(end, 1, 1), fmt.Sprintf(start, 2, 3), fmt.Sprintf(end, 3, 3)},
			want:  want{accepted: true, invariantError: "turn/start expected turn 2, got 3"}},
		{name: "a chunk outside any step", lines: []string{fmt.Sprintf(chunk, 0)},
			want: want{accepted: true, invariantError: "assistant/chunk names turn 1/step 1 but open is turn null/step null"}},
		{name: "damage followed by a valid record",
			lines: []string{fmt.Sprintf(start, 0, 1), `{"type":"step/st`, fmt.Sprintf(stepOpen, 1)},
			want:  want{accepted: true, damage: &packageDamage{StoredEvents: 1, LineEvents: 2, DroppedAfterDamage: 1}, exempt: exemptDamage}},
		{name: "a seq gap followed by a valid record",
			lines: []string{fmt.Sprintf(start, 0, 1), fmt.Sprintf(stepOpen, 5), fmt.Sprintf(stepOpen, 1)},
			want:  want{accepted: true, damage: &packageDamage{StoredEvents: 1, LineEvents: 3, DroppedAfterDamage: 1}, exempt: exemptDamage}},
		{name: "a torn tail", lines: []string{fmt.Sprintf(start, 0, 1), "garbage"},
			want: want{accepted: true, agree: true}},
		{name: "a repeated key", lines: []string{`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1,"turn":1}}`, fmt.Sprintf(end, 1, 1)},
			want: want{accepted: true, roundTrip: true, exempt: exemptLossless}},
		{name: "nesting 10,001 deep",
			lines: []string{fmt.Sprintf(start, 0, 1), `{"type":"x-probe/unknown","seq":1,"time":1,"data":` + deep + `,"ignorable":true}`, fmt.Sprintf(end, 2, 1)},
			// A resume of it throws too: the package's prepare clones the
			// loaded events with structuredClone.
			want: want{accepted: true, stringify: true, invariantError: "Maximum call stack size exceeded", exempt: exemptNesting}},
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var inputs []judgeInput
	for i, tc := range cases {
		id := fmt.Sprintf("0000000%d-0000-4000-8000-000000000000", i)
		header := fmt.Sprintf(`{"type":"session","version":0,"id":%q,"createdAt":0,"cwd":%q,"delegationDepth":0}`, id, corpusCwd)
		mu := mutant{id: id, cwd: corpusCwd, lines: [][]byte{[]byte(header)}}
		for _, l := range tc.lines {
			mu.lines = append(mu.lines, []byte(l))
		}
		in, err := writeMutant(enc, filepath.Join(dir, "logs"), i, mu)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, in)
	}
	gv, nv := judgeBoth(t, ctx, inputs)
	for i, tc := range cases {
		n, w := nv[i], tc.want
		c := judged{name: tc.name, class: "oracle", n: n, g: gv[i]}
		d, exempt := verdictOf(c, true)
		switch {
		case n.Accepted != w.accepted:
			t.Errorf("%s: the package accepts: %v (%s: %s), want %v", tc.name, n.Accepted, n.ErrorName, n.Error, w.accepted)
		case w.invariantError == "" && n.InvariantError != "":
			t.Errorf("%s: the invariants refuse it: %s: %s", tc.name, n.InvariantErrorName, n.InvariantError)
		case !strings.Contains(n.InvariantError, w.invariantError):
			t.Errorf("%s: the invariants say %q, want %q", tc.name, n.InvariantError, w.invariantError)
		case w.damage != nil && (n.Damage == nil || *n.Damage != *w.damage):
			t.Errorf("%s: the package's scan counts %+v, want %+v", tc.name, n.Damage, *w.damage)
		case n.RoundTripDiffers != w.roundTrip || n.StringifyThrows != w.stringify:
			t.Errorf("%s: round trip differs %v, JSON.stringify throws %v; want %v, %v", tc.name, n.RoundTripDiffers, n.StringifyThrows, w.roundTrip, w.stringify)
		case w.agree && d != "":
			t.Errorf("%s: the two disagree: %s", tc.name, d)
		case exempt != w.exempt:
			t.Errorf("%s: exemption %q, want %q (disagreement: %s)", tc.name, exempt, w.exempt, d)
		}
	}
}
