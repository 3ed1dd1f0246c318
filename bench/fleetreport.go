package bench

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// Markers around the many-sessions section of the report, so that a run of
// the other measurements keeps it and a run of this one replaces only it.
const (
	FleetBegin = "<!-- fleet:begin -->"
	FleetEnd   = "<!-- fleet:end -->"
)

// FleetReport renders the many-sessions section of docs/PERFORMANCE.md.
func FleetReport(r *FleetResults) string {
	var b strings.Builder
	c := r.Config
	n := float64(r.Created)
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("%s\n## Many live sessions on one worker\n\n", FleetBegin)
	p("Measured by `go run ./bench/cmd/perf -fleet -out docs/PERFORMANCE.md` on %s (%s, %d-minute run; 1-minute load average %.1f before, %.1f after; %d cores shared with other work). ",
		r.Started.UTC().Format("2006-01-02"), "the embedded dev server; the worker and the client in the measuring process", int(r.Elapsed.Minutes()+0.5), r.LoadBefore, r.LoadAfter, runtime.NumCPU())
	p("One worker, store descriptor limit %d (`--max-store-descriptors`), process descriptor limit %d. ", c.MaxDescriptors, r.NoFileLimit)
	p("%d sessions created through the client, %d at a time, and left live (%s, %.1f sessions/s).\n\n",
		r.Created, c.InFlight, r.CreateElapsed.Round(time.Second), n/r.CreateElapsed.Seconds())

	p("### Footprint per live session\n\n")
	p("Process figures with one live session, with %d just created, and with %d after the appends over random sessions (the last column divides the growth from one session to the third column by %d); the Go heap after a collection. The process holds the worker and the client.\n\n", r.Created+1, r.Created+1, r.Created)
	p("| | one session | %d created | after the appends | per added session |\n|---|---:|---:|---:|---:|\n", r.Created+1)
	per := func(a, b int64) string { return fmt.Sprintf("%.1f KiB", float64(b-a)/n/1024) }
	p("| resident memory (RSS) | %s | %s | %s | %s |\n", mib(r.One.RSS), mib(r.Created0.RSS), mib(r.All.RSS), per(r.One.RSS, r.All.RSS))
	p("| Go heap in use | %s | %s | %s | %s |\n", mib(r.One.HeapInuse), mib(r.Created0.HeapInuse), mib(r.All.HeapInuse), per(r.One.HeapInuse, r.All.HeapInuse))
	p("| goroutines | %d | %d | %d | %.2f |\n", r.One.Goroutines, r.Created0.Goroutines, r.All.Goroutines, float64(r.All.Goroutines-r.One.Goroutines)/n)
	p("| open descriptors | %d | %d | %d | %.3f |\n", r.One.FDs, r.Created0.FDs, r.All.FDs, float64(r.All.FDs-r.One.FDs)/n)
	p("\nAfter the appends the store kept %d descriptors open (%.3f per live session).\n", r.StoreOpen, float64(r.StoreOpen)/(n+1))
	p("\nMost descriptors the store kept open at any 100 ms sample of the run: %d, against its limit of %d. Most descriptors the process had open at any sample until the worker was replaced: %d (the store's, the gRPC connections of the worker and the client, the dev server's pipes).\n\n", r.PeakStoreFDs, c.MaxDescriptors, r.PeakFDs)

	p("### Append latency\n\n")
	p("%d single-event appends, one caller, after as many for warm-up, in three phases of the same run: on one session before the others exist; over sessions drawn at random from the %d with all of them live (the first append of a session publishes its log, and past %d sessions appended to the store closes the descriptors of the least recently used); and over random sessions after the worker is stopped and replaced by one whose workflow cache holds %d executions (`--workflow-cache-size`), so that each of the %d sessions appended to first replays its history.\n\n",
		c.Appends, r.Created, c.MaxDescriptors/2, c.SmallCache, r.EvictedDistinct)
	p("| phase | p50 | p99 | max | mean | p99 / one session's |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(name string, l Latencies) {
		p("| %s | %s | %s | %s | %s | %.2fx |\n", name, ms(l.P50), ms(l.P99), ms(l.Max), ms(l.Mean), durRatio(l.P99, r.Single.P99))
	}
	row("one live session", r.Single)
	row(fmt.Sprintf("%d live sessions", r.Created+1), r.Fleet)
	row(fmt.Sprintf("%d live sessions, cache of %d, new worker", r.Created+1, c.SmallCache), r.Evicted)

	p("\n### Failures\n\n")
	p("Every create and every append succeeded and returned the cursor the session's own count predicts (an evicted session that lost its place would fail that check). The histories of all %d sessions, read at the end: %d workflow task timeouts, %d workflow task failures (%d of them the server's \"premature end of stream\" on a history read after an eviction while an update's speculative task is pending, temporalio/temporal#7741: the SDK fails that task and the next, with the whole history, goes on), %d activity failures or timeouts.\n\n",
		r.Histories, r.TaskTimeouts, r.TaskFailures, r.PrematureEnd, r.ActivityFails)
	for _, f := range r.Failures {
		p("- %s\n", f)
	}
	if len(r.Failures) > 0 {
		p("\n")
	}
	p("Targets: %d live sessions with no error: %s; descriptors bounded by the limit: %s; p99 append at %d sessions <= 3x one session's: %.2fx (%s).\n%s\n",
		r.Created, pass(r.Histories == r.Created+1 && r.TaskTimeouts == 0 && r.TaskFailures == r.PrematureEnd),
		pass(r.PeakStoreFDs <= c.MaxDescriptors), r.Created, durRatio(r.Fleet.P99, r.Single.P99), pass(durRatio(r.Fleet.P99, r.Single.P99) <= 3), FleetEnd)
	return b.String()
}

func pass(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func durRatio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// SpliceFleet replaces the many-sessions section of report with section; a
// report without one gets it at its end. An empty section keeps report.
func SpliceFleet(report, section string) string {
	if section == "" {
		return report
	}
	if i := strings.Index(report, FleetBegin); i >= 0 {
		if j := strings.Index(report[i:], FleetEnd); j >= 0 {
			end := i + j + len(FleetEnd)
			if end < len(report) && report[end] == '\n' {
				end++
			}
			return report[:i] + section + report[end:]
		}
	}
	if report == "" {
		return section
	}
	if !strings.HasSuffix(report, "\n") {
		report += "\n"
	}
	return report + "\n" + section
}

// FleetSection returns the many-sessions section of report, or "".
func FleetSection(report string) string {
	i := strings.Index(report, FleetBegin)
	if i < 0 {
		return ""
	}
	j := strings.Index(report[i:], FleetEnd)
	if j < 0 {
		return ""
	}
	return report[i:i+j+len(FleetEnd)] + "\n"
}
