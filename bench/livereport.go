package bench

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// Markers around the live text section of the report, so that a run of the
// other measurements keeps it and a run of this one replaces only it.
const (
	LiveBegin = "<!-- live:begin -->"
	LiveEnd   = "<!-- live:end -->"
)

// LiveReport renders the live text section of docs/PERFORMANCE.md: every
// figure in it comes from r.
func LiveReport(r *LiveResults) string {
	var b strings.Builder
	c := r.Config
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("%s\n## Live text: from the provider's chunk to a reader\n\n", LiveBegin)
	p("Measured by `go run ./bench/cmd/perf -live -out docs/PERFORMANCE.md` on %s UTC (the embedded dev server; the worker, with its HTTP API on loopback as `worker --http` serves it, the followers and the clients in the measuring process; %s in all; 1-minute load average %.2f before, %.2f after; %d cores shared with other work). ",
		r.Started.UTC().Format("2006-01-02 15:04"), r.Elapsed.Round(time.Second), r.LoadBefore, r.LoadAfter, runtime.NumCPU())
	p("%d sessions stream one turn each at the same time; each turn's model call streams %d text chunks, one every %s, from a scripted provider that writes into each chunk the time it made it (%d chunks in all, %d turns completed). ",
		c.Sessions, c.Chunks, c.ChunkEvery, r.Sent, r.Turns)
	p("A chunk's latency is the time from then (the model activity receiving it from the provider) to the moment a reader first has its text, on four paths measured side by side on the same turns:\n\n")
	interval := c.WatchInterval
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	p("- **HTTP API**: the worker's `GET /v1/sessions/{id}/live` (package `httpapi`, default options), the Server-Sent Events stream the web view reads, one per session (%d open at once), each read by its own HTTP connection over loopback and opened before its turn started; %d chunks came out of offset order or twice;\n", r.HTTPStreams, r.HTTPOrderErrors)
	p("- **live**: `livetext.Source` over a store of the root (as a process beside the worker would open it) follows each session's live file, woken by inotify: the route's own source, without HTTP;\n")
	p("- **live through WatchTurn**: a second `client.WatchTurn` of each turn, with `WatchOptions.Live` (`livetext.Source`), as `starter turn` and `starter chat` watch when they know the root. It yields live text only for the turn a `LoopState` answer named as the one that claimed its message, so its first text waits for that answer; *after each watch's first text* leaves that first progress out;\n")
	p("- **heartbeat**: `client.WatchTurn` without a live source, every %s (its default poll): the model activity's heartbeat details through `DescribeWorkflow`, and at the turn's end the stored answer's rest; *heartbeat, before the answer was stored* counts only the chunks the watch yielded before the assistant/message's time in the log (what the heartbeat details showed; the others came from the stored answer).\n\n", interval)
	p("| path | chunks seen | p50 | p99 | max | mean |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(name string, l Latencies) {
		p("| %s | %d | %s | %s | %s | %s |\n", name, l.N, ms(l.P50), ms(l.P99), ms(l.Max), ms(l.Mean))
	}
	row("HTTP API (`/v1/sessions/{id}/live`, loopback)", r.HTTP)
	row("live (livetext follower)", r.Live)
	row("live through WatchTurn (Live set)", r.Watch)
	row("live through WatchTurn, after each watch's first text", r.WatchAfterFirst)
	row("heartbeat (WatchTurn, polls and the stored answer)", r.Heartbeat)
	row("heartbeat, before the answer was stored", r.HeartbeatLive)
	p("\nAgainst the baselines of the same run: the heartbeat path's p50 is %.0fx the HTTP API's (p99: %.0fx); the HTTP API's p50 is %.2fx the follower's (p99: %.2fx): the HTTP hop adds %s at the median and %s at p99.\n",
		durRatio(r.Heartbeat.P50, r.HTTP.P50), durRatio(r.Heartbeat.P99, r.HTTP.P99), durRatio(r.HTTP.P50, r.Live.P50), durRatio(r.HTTP.P99, r.Live.P99),
		ms(r.HTTP.P50-r.Live.P50), ms(r.HTTP.P99-r.Live.P99))
	p("\nThe model activity's own cost: a streamed chunk takes %.0f ns of its work with the live file (the assembler's push and the hand-over to the writer, whose flusher goroutine makes the unsynced write(2)) against %.0f ns for the push alone (`testing.Benchmark` in the same run; `go test ./livetext -run '^$' -bench ModelChunk` measures the same), against the %s between this run's chunks.\n", r.PushLiveNs, r.PushNs, c.ChunkEvery)
	all := r.HTTP.N == r.Sent && r.HTTPOrderErrors == 0
	p("\nTargets (issue #28), from the provider's chunk to a client reading the HTTP stream, %d sessions streaming at once: p50 <= 100 ms: %s (%s); p99 <= 250 ms: %s (%s); every chunk delivered once and in order: %s (%d of %d).\n%s\n",
		c.Sessions, pass(all && r.HTTP.P50 <= 100*time.Millisecond), ms(r.HTTP.P50), pass(all && r.HTTP.P99 <= 250*time.Millisecond), ms(r.HTTP.P99),
		pass(all), r.HTTP.N, r.Sent, LiveEnd)
	return b.String()
}

// SpliceLive replaces the live text section of report with section; a
// report without one gets it at its end. An empty section keeps report.
func SpliceLive(report, section string) string {
	if section == "" {
		return report
	}
	if i := strings.Index(report, LiveBegin); i >= 0 {
		if j := strings.Index(report[i:], LiveEnd); j >= 0 {
			end := i + j + len(LiveEnd)
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

// LiveSection returns the live text section of report, or "".
func LiveSection(report string) string {
	i := strings.Index(report, LiveBegin)
	if i < 0 {
		return ""
	}
	j := strings.Index(report[i:], LiveEnd)
	if j < 0 {
		return ""
	}
	return report[i:i+j+len(LiveEnd)] + "\n"
}
