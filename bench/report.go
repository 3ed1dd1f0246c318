package bench

import (
	_ "embed"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/jsonl"
)

// storeNotes is the analysis of the store's profiles, kept with the
// harness so that a regenerated report keeps it.
//
//go:embed notes/store.md
var storeNotes string

// workflowNotes is the analysis of the workflow measurements' profiles.
//
//go:embed notes/workflows.md
var workflowNotes string

// Command is the command line that reproduces a report.
const Command = "go run ./bench/cmd/perf -out docs/PERFORMANCE.md"

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func kib(b float64) string {
	if b >= 1<<20 {
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	}
	if b >= 1<<10 {
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// Report renders res as docs/PERFORMANCE.md.
func Report(res *Results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	cfg := res.Config
	p("# Performance\n\n")
	p("Figures are ratios against a baseline measured in the same run, on the project's machine kind (2\n")
	p("cores, local disk). Absolute times vary with the machine and its load; the ratios are what\n")
	p("the targets are about. Every figure below comes from one run of the harness (`bench/`):\n\n")
	p("```sh\n%s\n```\n\n", Command)
	p("It runs the store benchmarks (`go test ./jsonl -bench`: the single-event append and its raw\n")
	p("loop back to back in %d processes, the median of their %d ratios; the others %d runs each,\n", PairedRuns, PairedRuns, StoreRuns)
	p("medians), then starts an\n")
	p("ephemeral Temporal dev server (CLI %s, with the dynamic config of `docs/DECISIONS.md` D8) and an\n", devserver.CLIVersion)
	p("in-process sessionflow worker\n")
	p("(`internal/app/workerapp`, default configuration but a raw store root, the baseline workflows registered through\n")
	p("`Config.Register`), and drives it through the Go client. Flags shrink or grow every size\n")
	p("(`go run ./bench/cmd/perf -h`); `-cpuprofile` profiles the harness process, worker included.\n\n")
	p("This run: %s, %s/%s, %d CPUs, %s; 1-minute load average %.2f before and %.2f after\n",
		res.Started.UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), res.LoadBefore, res.LoadAfter)
	p("(other work shares the machine); %s in all.\n\n", res.Elapsed.Round(time.Second))

	p("## Targets\n\n| target | result | |\n|---|---|---|\n")
	st := res.Store
	if st != nil {
		raw := string(jsonl.CompressionNone)
		single := st.SingleRatio(jsonl.CompressionNone)
		p("| single-event append >= 0.9x the raw write+fsync loop (median of %d paired runs) | %.2fx | %s |\n", PairedRuns, single, met(single >= 0.9))
		b256 := st.EventsPerSec["BenchmarkAppendBatch256/"+raw]
		p("| 256-event batches >= 100k events/s | %.0fk events/s | %s |\n", b256/1000, met(b256 >= 100_000))
		open := st.MBPerSec["BenchmarkOpenRaw100MB"] / st.MBPerSec["BenchmarkReadSplit100MB"]
		p("| raw open >= 0.5x raw read-and-split | %.2fx | %s |\n", open, met(open >= 0.5))
		z := st.MBPerSec["BenchmarkOpenZstd100MB"]
		p("| zstd open >= 150 MB/s | %.0f MB/s | %s |\n", z, met(z >= 150))
	}
	lat := float64(res.CreateLatency.Median) / float64(res.NoopLatency.Median)
	p("| create-to-live <= 3x a one-activity no-op workflow (medians) | %.2fx | %s |\n", lat, met(lat <= 3))
	p("| >= 50 sessions/s on one worker (%d creates, %d in flight) | %.1f/s | %s |\n", cfg.Sessions, cfg.InFlight, res.CreatesPerSecond, met(res.CreatesPerSecond >= 50))
	if len(res.History) >= 2 {
		lo, hi := res.History[0], res.History[len(res.History)-1]
		same := lo.HistoryEvents == hi.HistoryEvents
		p("| resume history identical for %d and %d events | %d vs %d events, %d vs %d bytes | %s |\n",
			lo.LogEvents, hi.LogEvents, lo.HistoryEvents, hi.HistoryEvents, lo.HistoryBytes, hi.HistoryBytes, met(same))
	}
	p("\n")

	if st != nil {
		writeStore(&b, st)
	}
	writeWorkflows(&b, res)
	if res.AppendPath != nil || res.LongAppends != nil {
		p("%s", AppendPathReport(res))
	}
	if res.Turns != nil {
		p("%s\n", TurnsReport(res.Turns))
	}
	if notes := strings.TrimSpace(workflowNotes); notes != "" {
		p("%s\n", notes)
	}
	return b.String()
}

func writeStore(b *strings.Builder, st *StoreResults) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	raw, zst := string(jsonl.CompressionNone), string(jsonl.CompressionZstd)
	p("## The store (`jsonl`)\n\nThe harness runs:\n\n```sh\n")
	for _, c := range st.Commands {
		p("%s\n", c)
	}
	p("```\n\nFor a comparison over more runs, the same benchmarks with `-count 6` and `benchstat`:\n\n")
	p("```sh\ngo install golang.org/x/perf/cmd/benchstat@latest\n")
	p("go test ./jsonl -run '^$' -bench 'AppendSingle|RawWriteFsync|AppendBatch' -benchtime 1000x -count 6 > append.txt\n")
	p("go test ./jsonl -run '^$' -bench 'Open|ReadSplit' -benchtime 2x -count 6 > open.txt   # builds a ~100 MB log once (-benchsize)\n")
	p("benchstat append.txt; benchstat open.txt\n```\n\n")
	rawLoop := st.NsPerOp["BenchmarkRawWriteFsync"]
	p("Times are medians over the runs; the single-event ratios are the medians of the ratios of\n")
	p("the %d paired runs (append and raw loop in the same process, one after the other): %s (raw\n", PairedRuns, ratios(st.SingleRatios[raw]))
	p("root) and %s (zstd root).\n\n", ratios(st.SingleRatios[zst]))
	p("| measure | baseline | result | ratio | target |\n|---|---|---|---|---|\n")
	s := st.NsPerOp["BenchmarkAppendSingle/"+raw]
	sr := st.SingleRatio(jsonl.CompressionNone)
	p("| single-event append, raw root | raw `write`+`fsync` loop of a line of the same size in the same directory: %.1f µs | %.1f µs | **%.2fx** of the raw loop's rate | >= 0.9x: %s |\n",
		rawLoop/1000, s/1000, sr, met(sr >= 0.9))
	z := st.NsPerOp["BenchmarkAppendSingle/"+zst]
	p("| single-event append, zstd root | same loop: %.1f µs | %.1f µs | %.2fx | (the target names the raw path) |\n", rawLoop/1000, z/1000, st.SingleRatio(jsonl.CompressionZstd))
	b256r, b256z := st.EventsPerSec["BenchmarkAppendBatch256/"+raw], st.EventsPerSec["BenchmarkAppendBatch256/"+zst]
	p("| 256-event batches | - | raw %.0fk events/s, zstd %.0fk events/s | - | >= 100k events/s: %s |\n", b256r/1000, b256z/1000, met(b256r >= 100_000))
	p("| 64-event batches | - | raw %.0fk events/s, zstd %.0fk events/s | - | - |\n",
		st.EventsPerSec["BenchmarkAppendBatch64/"+raw]/1000, st.EventsPerSec["BenchmarkAppendBatch64/"+zst]/1000)
	split, open := st.MBPerSec["BenchmarkReadSplit100MB"], st.MBPerSec["BenchmarkOpenRaw100MB"]
	p("| open of a 100 MB raw log (read handle, full validation) | `os.ReadFile` + `bytes.Split`: %.0f MB/s | %.0f MB/s | **%s** | >= 0.5x: %s |\n",
		split, open, ratio(open, split), met(open/split >= 0.5))
	zo := st.MBPerSec["BenchmarkOpenZstd100MB"]
	p("| open of a zstd log of 100 MB plaintext | - | %.0f MB/s of plaintext | - | >= 150 MB/s: %s |\n\n", zo, met(zo >= 150))
	p("MB/s is 10^6 bytes per second, as `go test` reports it.\n\n")
	p("%s\n\n", strings.TrimSpace(storeNotes))
}

func writeWorkflows(b *strings.Builder, res *Results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	cfg := res.Config
	p("## Workflows on the embedded server\n\n")
	p("### Create-to-live latency\n\n")
	p("`client.Create` until it returns the live session (CreateSession started with its WaitReady\n")
	p("update in one update-with-start request, the update answered), against `bench.Noop` (one no-op\n")
	p("activity) started and awaited; %d of each,\n", res.CreateLatency.N)
	p("sequential and interleaved, after 2 warm-up rounds. Sessions have no hooks and no seed.\n\n")
	p("| measure | baseline: no-op workflow | sessionflow create | ratio | target |\n|---|---|---|---|---|\n")
	p("| median | %s | %s | **%s** | <= 3x: %s |\n", ms(res.NoopLatency.Median), ms(res.CreateLatency.Median),
		ratio(float64(res.CreateLatency.Median), float64(res.NoopLatency.Median)), met(float64(res.CreateLatency.Median) <= 3*float64(res.NoopLatency.Median)))
	p("| p90 | %s | %s | %s | - |\n", ms(res.NoopLatency.P90), ms(res.CreateLatency.P90), ratio(float64(res.CreateLatency.P90), float64(res.NoopLatency.P90)))
	p("| mean | %s | %s | %s | - |\n\n", ms(res.NoopLatency.Mean), ms(res.CreateLatency.Mean), ratio(float64(res.CreateLatency.Mean), float64(res.NoopLatency.Mean)))

	p("### Sessions created per second on one worker\n\n")
	p("%d creates until live, %d in flight, against %d no-op workflows at the same concurrency.\n\n", cfg.Sessions, cfg.InFlight, cfg.Sessions)
	p("| baseline: no-op workflows/s | sessions created/s | ratio | target |\n|---|---|---|---|\n")
	p("| %.1f | %.1f | %s | >= 50/s: %s |\n\n", res.NoopsPerSecond, res.CreatesPerSecond, ratio(res.CreatesPerSecond, res.NoopsPerSecond), met(res.CreatesPerSecond >= 50))

	p("### Appends per second through the `Append` update\n\n")
	p("Single-event appends (64 bytes of text each) on one session for %s per configuration, each\n", cfg.AppendDuration)
	p("acknowledged once stored. One caller awaits each append (`client.Append`); %d concurrent callers\n", cfg.AppendCallers)
	p("take the next seq and submit under a lock until the update is accepted, then wait for it to be\n")
	p("stored, as `client.AppendStream` pipelines. Without a window (the default, `none`) appends are\n")
	p("group-committed: stored at once unless a store is in flight, those accepted meanwhile together by\n")
	p("the next. A window (`Options.AppendWindowMs`: %s, the former default, and %s) holds appends on a\n", cfg.CoalesceWindow, cfg.TinyWindow)
	p("workflow timer, which the server fires no sooner than about a second. Ratios are against one\n")
	p("caller with group commit.\n\n")
	p("| window | callers | appends | appends/s | ratio | median latency | p90 latency |\n|---|---|---|---|---|---|---|\n")
	var base float64
	for i, a := range res.Appends {
		if i == 0 {
			base = a.PerSecond()
		}
		window := a.Window.String()
		if a.Window == 0 {
			window = "none"
		}
		p("| %s | %d | %d | %.1f | %s | %s | %s |\n", window, a.Callers, a.Appends, a.PerSecond(), ratio(a.PerSecond(), base), ms(a.Latency.Median), ms(a.Latency.P90))
	}
	p("\n")

	p("## History cost of a resume\n\n")
	p("Raw logs of todo/write events written directly into the worker's store root (header by the\n")
	p("store, event lines appended as text), resumed through `client.Resume`, disposed, and the\n")
	p("run's whole history read with `GetWorkflowHistory` (bytes: the encoded size of every history\n")
	p("event). Ratios are against the smallest log.\n\n")
	p("| log events | log size | history events | history bytes | bytes ratio | resume until live |\n|---|---|---|---|---|---|\n")
	for _, h := range res.History {
		p("| %d | %s | %d | %d | %s | %s |\n", h.LogEvents, kib(float64(h.LogBytes)), h.HistoryEvents, h.HistoryBytes,
			ratio(float64(h.HistoryBytes), float64(res.History[0].HistoryBytes)), ms(h.ResumeLatency))
	}
	p("\n")

	en, sf := res.Entity, res.SessionflowSameLoad
	p("## The history-bound alternative\n\n")
	p("`bench.Entity` is the pattern of Temporal's agent samples: an `Append` update appends the batch\n")
	p("to a slice in workflow state, a query returns the slice, and the workflow continues as new,\n")
	p("carrying the slice, when the server suggests it. It is driven by one caller with appends of\n")
	p("%d events of %d bytes of text each (about %s encoded per append), until an append fails or\n", cfg.EntityBatch, cfg.EntityEventBytes, kib(float64(cfg.EntityBatch*(cfg.EntityEventBytes+60))))
	p("%d appends; then a sessionflow session (group commit) gets the same appends, at most %d of them\n", cfg.EntityMaxAppends, cfg.SessionflowMaxAppends)
	p("(its history grows linearly with the appends).\n")
	p("The dev server runs with Temporal's default limits (server 1.29): a payload (blob) fails above\n")
	p("2 MiB (warning at 512 KiB); a run's history is suggested to continue as new at 4 MiB or 4096\n")
	p("events, warned at 10 MiB or 10240 events and terminated at 50 MiB or 51200 events.\n\n")
	p("| measure | entity workflow | sessionflow | ratio (sessionflow / entity) |\n|---|---|---|---|\n")
	p("| appends acknowledged | %d | %d | - |\n", en.Appends, sf.Appends)
	p("| events acknowledged | %d | %d | - |\n", en.Events, sf.Events)
	can := "none"
	if en.CANAtAppend > 0 {
		can = fmt.Sprintf("after append %d (%d events)", en.CANAtAppend, en.CANAtAppend*cfg.EntityBatch)
	}
	p("| first continue-as-new | %s | - |  - |\n", can)
	p("| runs | %d | %d | - |\n", en.Runs, sf.Runs)
	p("| history events (all runs) | %d | %d | %s |\n", en.HistoryEvents, sf.HistoryEvents, ratio(float64(sf.HistoryEvents), float64(en.HistoryEvents)))
	p("| history bytes (all runs) | %s | %s | %s |\n", kib(float64(en.HistoryBytes)), kib(float64(sf.HistoryBytes)), ratio(float64(sf.HistoryBytes), float64(en.HistoryBytes)))
	p("| history bytes per appended event | %.0f | %.0f | %s |\n", en.BytesPerEvent(), sf.BytesPerEvent(), ratio(sf.BytesPerEvent(), en.BytesPerEvent()))
	p("| time per append (mean) | %s | %s | %s |\n", ms(en.PerAppend), ms(sf.PerAppend), ratio(float64(sf.PerAppend), float64(en.PerAppend)))
	p("| how it ended | %s | %s | - |\n\n", mdEscape(en.Outcome), mdEscape(sf.Outcome))
}

// ratios formats a list of ratios.
func ratios(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%.2f", v)
	}
	return strings.Join(parts, ", ")
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
