package harness

import (
	"errors"
	"strings"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

// The exemption classes: the places where sessionflow stays stricter than the
// package's load on purpose (docs/FORMAT.md §8.2.1). A disagreement is
// exempt only when the package accepts the log, sessionflow refuses it, and
// a check computed by the package's own code (judge.mjs) shows that the
// harness never writes the log.
const (
	// exemptLossless: sessionflow refuses a line that is not lossless JSON
	// (FORMAT.md §1.4), and some line of the log is not
	// JSON.stringify(JSON.parse(line)) (or JSON.stringify throws on it), so
	// the package's writer did not write it.
	exemptLossless = "lossless JSON"
	// exemptNesting: sessionflow refuses a value nested deeper than 10,000,
	// and JSON.stringify, the package's writer, throws on some line of the
	// log.
	exemptNesting = "nesting"
	// exemptDamage: sessionflow refuses damage followed by valid records
	// (jsonl.ErrDamageNotTorn, docs/DECISIONS.md D11), and the package's own
	// scan dropped complete records after the damage; its writer cuts a torn
	// tail before it appends, so it never writes such a log.
	exemptDamage = "damage not torn (D11)"
	// exemptInvariants: a mutant the package loads violates the harness's
	// own session invariants (the companions of @deepseek-ai/dsh-session
	// and @deepseek-ai/dsh-compaction registered with
	// @deepseek-ai/dsh-invariants), which every event a live session
	// appends must pass, while the corpus log it was made from passes
	// them. Never a corpus log: those the harness wrote.
	exemptInvariants = "violates the harness's invariants"
)

// exemptClasses are the exemption classes, in report order.
var exemptClasses = []string{exemptLossless, exemptNesting, exemptDamage, exemptInvariants}

// verdictOf compares the verdicts of one case: d is "" when the two agree,
// else what differs; exempt names the exemption class that allows the
// difference ("" when none does, and the case fails). sourcePasses reports
// whether the corpus log a mutant was made from passes the harness's
// invariants.
func verdictOf(c judged, sourcePasses bool) (d, exempt string) {
	d = compareVerdicts(c.n, c.g)
	if d == "" {
		return "", ""
	}
	return d, exemption(c, sourcePasses)
}

// exemption returns the class that exempts a disagreement, or "".
func exemption(c judged, sourcePasses bool) string {
	n, err := c.n, c.g.Err
	if !n.Accepted || err == nil {
		return ""
	}
	if dm := n.Damage; errors.Is(err, jsonl.ErrDamageNotTorn) && dm != nil && dm.DroppedAfterDamage > 0 && dm.StoredEvents < dm.LineEvents {
		return exemptDamage
	}
	if losslessRefusal(err) && nestingRefusal(err) && n.StringifyThrows {
		return exemptNesting
	}
	if losslessRefusal(err) && (n.RoundTripDiffers || n.StringifyThrows) {
		return exemptLossless
	}
	if n.InvariantError != "" && !strings.HasPrefix(c.class, "corpus/") && sourcePasses {
		return exemptInvariants
	}
	return ""
}

// losslessRefusal reports whether err is sessionflow's refusal of a record
// that is not lossless JSON (FORMAT.md §1.4).
func losslessRefusal(err error) bool {
	var le *session.LosslessError
	return errors.As(err, &le) || errors.Is(err, session.ErrNotLossless) ||
		(err != nil && strings.Contains(err.Error(), "not lossless JSON"))
}

// nestingRefusal reports whether a lossless refusal is for a value nested
// too deep.
func nestingRefusal(err error) bool {
	var le *session.LosslessError
	if errors.As(err, &le) && strings.Contains(le.Detail, "nesting") {
		return true
	}
	return strings.Contains(err.Error(), "nesting too deep")
}
