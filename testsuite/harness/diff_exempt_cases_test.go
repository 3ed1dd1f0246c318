package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

// TestExemptionsAreNarrow pins each exemption class of the differential
// suite to its own case: a disagreement just outside a class (its oracle
// silent, another refusal, the package refusing, both accepting with other
// events, a corpus log, a mutant of a log that breaks the invariants itself)
// is still a failure.
func TestExemptionsAreNarrow(t *testing.T) {
	duplicate := fmt.Errorf(`session "s": stored log is corrupt: invalid committed event at line 3: %w`,
		&session.LosslessError{Detail: `duplicate object key "role"`})
	nesting := fmt.Errorf(`session "s": stored log is corrupt: invalid committed event at line 3: %w`,
		&session.LosslessError{Detail: "nesting too deep"})
	damage := fmt.Errorf(`session "s": stored log is corrupt: seq gap (expected 1, got 2); the damage at byte 90 is followed by a complete valid record at line 3 (byte 160), so it is not a torn write: %w`,
		jsonl.ErrDamageNotTorn)
	other := errors.New(`closers: assistant/message event (seq 5): data lacks "message.content"`)
	seqGap := errors.New(`session "s": stored log is corrupt: corrupt session log: invalid committed event at line 3: seq gap (expected 2, got 3)`)
	dropped := &packageDamage{StoredEvents: 1, LineEvents: 5, DroppedAfterDamage: 3}
	violation := `invariant violated by "@deepseek-ai/dsh-session": turn/start expected turn 1, got undefined`

	accepts := func(mod func(*nodeVerdict)) nodeVerdict {
		n := nodeVerdict{Accepted: true, Meta: json.RawMessage(`{}`), Events: []json.RawMessage{json.RawMessage(`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`)}}
		if mod != nil {
			mod(&n)
		}
		return n
	}
	refuses := nodeVerdict{Accepted: false, ErrorName: "SessionPersistenceCorruptionError", Error: "stored session failed validation"}

	cases := []struct {
		name         string
		class        string
		n            nodeVerdict
		g            goVerdict
		sourceFails  bool
		want         string // the exemption, "" for a failure
		wantAgreeing bool
	}{
		// lossless JSON
		{name: "lossless: a line that does not round-trip", class: "duplicated",
			n: accepts(func(n *nodeVerdict) { n.RoundTripDiffers = true }), g: goVerdict{Err: duplicate}, want: exemptLossless},
		{name: "lossless: a repeated key whose value JSON.stringify cannot write", class: "duplicated",
			n: accepts(func(n *nodeVerdict) { n.StringifyThrows = true }), g: goVerdict{Err: duplicate}, want: exemptLossless},
		{name: "lossless: every line round-trips", class: "duplicated",
			n: accepts(nil), g: goVerdict{Err: duplicate}},
		{name: "lossless: another refusal", class: "duplicated",
			n: accepts(func(n *nodeVerdict) { n.RoundTripDiffers = true }), g: goVerdict{Err: other}},
		{name: "lossless: sessionflow accepts with other events", class: "duplicated",
			n: accepts(func(n *nodeVerdict) { n.RoundTripDiffers = true }), g: goVerdict{}},
		{name: "lossless: the package refuses, sessionflow accepts", class: "duplicated",
			n: func() nodeVerdict { n := refuses; n.RoundTripDiffers = true; return n }(), g: goVerdict{}},

		// nesting beyond 10,000
		{name: "nesting: JSON.stringify throws", class: "retyped",
			n: accepts(func(n *nodeVerdict) { n.StringifyThrows = true }), g: goVerdict{Err: nesting}, want: exemptNesting},
		{name: "nesting: JSON.stringify writes every line", class: "retyped",
			n: accepts(nil), g: goVerdict{Err: nesting}},
		{name: "nesting: JSON.stringify throws, another refusal", class: "retyped",
			n: accepts(func(n *nodeVerdict) { n.StringifyThrows = true }), g: goVerdict{Err: other}},

		// damage followed by valid records (D11)
		{name: "damage: the package drops records after the damage", class: "seq",
			n: accepts(func(n *nodeVerdict) { n.Damage = dropped }), g: goVerdict{Err: damage}, want: exemptDamage},
		{name: "damage: nothing complete after the damage", class: "torn",
			n: accepts(func(n *nodeVerdict) { n.Damage = &packageDamage{StoredEvents: 4, LineEvents: 5} }), g: goVerdict{Err: damage}},
		{name: "damage: the package keeps as many events as the lines hold", class: "torn",
			n: accepts(func(n *nodeVerdict) { n.Damage = &packageDamage{StoredEvents: 5, LineEvents: 5, DroppedAfterDamage: 1} }), g: goVerdict{Err: damage}},
		{name: "damage: no count from the package's scan (a zstd log)", class: "seq/zstd",
			n: accepts(nil), g: goVerdict{Err: damage}},
		{name: "damage: the package drops records, sessionflow refuses otherwise", class: "seq",
			n: accepts(func(n *nodeVerdict) { n.Damage = dropped }), g: goVerdict{Err: seqGap}},
		{name: "damage: the package drops records, sessionflow accepts", class: "seq",
			n: accepts(func(n *nodeVerdict) { n.Damage = dropped }), g: goVerdict{}},

		// the harness's invariants
		{name: "invariants: a mutant breaks them", class: "dropped",
			n: accepts(func(n *nodeVerdict) { n.InvariantError = violation }), g: goVerdict{Err: other}, want: exemptInvariants},
		{name: "invariants: a thrown error counts", class: "retyped",
			n: accepts(func(n *nodeVerdict) {
				n.InvariantError, n.InvariantErrorName = "Cannot read properties of null (reading 'turn')", "TypeError"
			}), g: goVerdict{Err: other}, want: exemptInvariants},
		{name: "invariants: they pass", class: "dropped",
			n: accepts(nil), g: goVerdict{Err: other}},
		{name: "invariants: a corpus log breaks them", class: "corpus/none",
			n: accepts(func(n *nodeVerdict) { n.InvariantError = violation }), g: goVerdict{Err: other}},
		{name: "invariants: the source log breaks them too", class: "dropped",
			n: accepts(func(n *nodeVerdict) { n.InvariantError = violation }), g: goVerdict{Err: other}, sourceFails: true},
		{name: "invariants: both accept, other events", class: "dropped",
			n: accepts(func(n *nodeVerdict) { n.InvariantError = violation }), g: goVerdict{}},

		// agreement is no exemption
		{name: "both refuse", class: "seq", n: refuses, g: goVerdict{Err: other}, wantAgreeing: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, exempt := verdictOf(judged{name: "examples/x/session.jsonl", class: tc.class, n: tc.n, g: tc.g}, !tc.sourceFails)
			if tc.wantAgreeing {
				if d != "" || exempt != "" {
					t.Fatalf("verdictOf = %q, %q; want an agreement", d, exempt)
				}
				return
			}
			if d == "" {
				t.Fatalf("verdictOf finds no disagreement; the case is built wrong")
			}
			if exempt != tc.want {
				t.Fatalf("exemption %q, want %q (disagreement: %s)", exempt, tc.want, d)
			}
		})
	}
}
