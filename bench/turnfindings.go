package bench

import (
	"fmt"
	"strings"
	"time"
)

// turnFindings are the sentences the turn measurements of tr support,
// every figure taken from tr and shown in the section's tables: what the
// notes (bench/notes/turns.md) may not quote, since they are pasted into
// every report whatever the run measured.
func turnFindings(tr *TurnResults) []string {
	var out []string
	cfg := tr.Config
	if len(cfg.Sizes) == 0 {
		return nil
	}
	sf, sa := PatternSessionflow, PatternSample
	lo, hi := cfg.Sizes[0], cfg.Sizes[len(cfg.Sizes)-1]

	a0, ok1 := tr.Point(sf, lo)
	a1, ok2 := tr.Point(sf, hi)
	z0, ok3 := tr.Point(sa, lo)
	z1, ok4 := tr.Point(sa, hi)
	if ok1 && ok2 && lo != hi {
		s := fmt.Sprintf("A sessionflow turn added %s of history (%d events) at %d messages and %s (%d events) at %d",
			kib(float64(a0.HistoryBytes)), a0.HistoryEvents, lo, kib(float64(a1.HistoryBytes)), a1.HistoryEvents, hi)
		if ok3 && ok4 {
			s += fmt.Sprintf("; a turn of the sample %s and %s, its model activity carrying the whole conversation", kib(float64(z0.HistoryBytes)), kib(float64(z1.HistoryBytes)))
		}
		out = append(out, s+".")
	}

	var pairs []medianPair
	for _, n := range cfg.Sizes {
		a, ok1 := tr.Point(sf, n)
		z, ok2 := tr.Point(sa, n)
		if ok1 && ok2 {
			pairs = append(pairs, medianPair{n: n, flow: a.Time.Median, sample: z.Time.Median})
		}
	}
	if s := compareMedians(pairs, "Time per turn, sessionflow against the sample: ", "; ",
		"sessionflow's turn was shorter at every length.",
		"sessionflow's turn was longer at every length.",
		"sessionflow's turn was shorter at %s messages and longer at %s."); s != "" {
		out = append(out, s)
	}

	if ok1 && ok3 {
		var parts []string
		if p, ok := part(a0.Parts, workflowTasks); ok {
			if q, ok := part(z0.Parts, workflowTasks); ok {
				parts = append(parts, fmt.Sprintf("the workflow tasks took %s against %s", ms(p.Median), ms(q.Median)))
			}
		}
		if len(a0.Parts) > 1 && len(z0.Parts) > 1 {
			parts = append(parts, fmt.Sprintf("the model activity %s against %s", ms(modelPart(a0.Parts).Median), ms(modelPart(z0.Parts).Median)))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("At %d messages %s.", lo, strings.Join(parts, ", ")))
		}
	}

	var worst float64
	var where string
	for _, pattern := range []string{sf, sa} {
		for _, p := range tr.BySize[pattern] {
			if p.Err != "" || p.Time.Median <= 0 {
				continue
			}
			if r := float64(p.Time.P90) / float64(p.Time.Median); r > worst {
				worst, where = r, fmt.Sprintf("%s at %d messages", pattern, p.Messages)
			}
		}
	}
	if worst > 0 {
		out = append(out, fmt.Sprintf("The widest spread of a point's turns: a p90 %.1f times its median (%s); the 1-minute load average was %.2f before the turn measurements and %.2f after them.",
			worst, where, tr.LoadBefore, tr.LoadAfter))
	}

	if g := tr.Grow; g.FailedAt > 0 {
		out = append(out, fmt.Sprintf("The sample's growth run ended at turn %d, which would have held %d messages; its %d runs wrote %s of history.",
			g.Turns+1, g.FailedAt, g.Runs, kib(float64(g.HistoryBytes))))
	}
	if l := tr.Long; l.Turns > 0 {
		out = append(out, fmt.Sprintf("sessionflow's long run did %d turns in one session in %d runs, none larger than %s.", l.Turns, l.Runs, kib(float64(l.MaxRunBytes))))
	}
	return out
}

// modelPart is the model activity among a turn's parts: the part that is
// not the workflow tasks.
func modelPart(parts []TurnPart) TurnPart {
	for _, p := range parts {
		if p.Name != workflowTasks {
			return p
		}
	}
	return TurnPart{}
}

// medianPair is the median time of both patterns at one conversation
// length.
type medianPair struct {
	n            int
	flow, sample time.Duration
}

// compareMedians is the sentence comparing the patterns' medians at each
// length: lead, each pair ("X against Y (ratio) at N messages"), sep, then
// allShorter, allLonger or mixed (with the lengths where sessionflow was
// shorter and longer); "" without pairs.
func compareMedians(pairs []medianPair, lead, sep, allShorter, allLonger, mixed string) string {
	if len(pairs) == 0 {
		return ""
	}
	var times, faster, slower []string
	for _, p := range pairs {
		times = append(times, fmt.Sprintf("%s against %s (%s) at %d messages", ms(p.flow), ms(p.sample), ratio(float64(p.flow), float64(p.sample)), p.n))
		if p.flow < p.sample {
			faster = append(faster, fmt.Sprint(p.n))
		} else {
			slower = append(slower, fmt.Sprint(p.n))
		}
	}
	s := lead + strings.Join(times, ", ") + sep
	switch {
	case len(slower) == 0:
		return s + allShorter
	case len(faster) == 0:
		return s + allLonger
	default:
		return s + fmt.Sprintf(mixed, strings.Join(faster, ", "), strings.Join(slower, ", "))
	}
}
