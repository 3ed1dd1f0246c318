// Command perf runs sessionflow's performance harness (package bench) and
// writes docs/PERFORMANCE.md:
//
//	go run ./bench/cmd/perf -out docs/PERFORMANCE.md
//
// The turn measurements alone (the tool rounds included), their section of
// the report and their charts:
//
//	go run ./bench/cmd/perf -turns-only -svg docs -out docs/PERFORMANCE.md
//
// The tool rounds alone, replacing only their part of the turn section
// (-round-patterns sessionflow with -cpuprofile profiles sessionflow's
// rounds alone):
//
//	go run ./bench/cmd/perf -rounds-only -out docs/PERFORMANCE.md
//
// The many-sessions measurement alone (10,000 live sessions on one worker),
// replacing only its section of the report:
//
//	go run ./bench/cmd/perf -fleet -out docs/PERFORMANCE.md
//
// The compaction measurement alone (2,000 turns of one session against the
// scripted model with a 16,000-token window), replacing only its section of
// the report, and its chart:
//
//	go run ./bench/cmd/perf -compaction -png docs -out docs/PERFORMANCE.md
//
// The live text measurement alone (100 sessions streaming at once, each
// chunk timed from the provider to a client of the worker's HTTP API and
// to the heartbeat path), replacing only its section of the report:
//
//	go run ./bench/cmd/perf -live -out docs/PERFORMANCE.md
//
// Run it from the module root. It waits for the machine's 1-minute load
// average to drop below -max-load (up to -load-wait) before measuring.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8: it
// may import bench and what bench may.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessionflow/sessionflow/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := bench.DefaultConfig()
	out := flag.String("out", "", "write the report to this file (default: stdout)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the workflow measurements (client and worker) to this file")
	maxLoad := flag.Float64("max-load", 1.5, "wait until the 1-minute load average is below this before measuring")
	loadWait := flag.Duration("load-wait", 10*time.Minute, "how long to wait for -max-load")
	sizes := flag.String("history-sizes", "10,10000,1000000", "event counts of the resumed logs")
	flag.IntVar(&cfg.LatencyRuns, "latency-runs", cfg.LatencyRuns, "sequential creates and no-op workflows compared")
	flag.IntVar(&cfg.Sessions, "sessions", cfg.Sessions, "sessions created for the throughput")
	flag.IntVar(&cfg.InFlight, "inflight", cfg.InFlight, "concurrent creates")
	flag.DurationVar(&cfg.AppendDuration, "append-duration", cfg.AppendDuration, "duration of each append-rate configuration")
	flag.IntVar(&cfg.AppendCallers, "append-callers", cfg.AppendCallers, "concurrent callers on one session")
	flag.IntVar(&cfg.EntityBatch, "entity-batch", cfg.EntityBatch, "events per append of the entity comparison")
	flag.IntVar(&cfg.EntityEventBytes, "entity-event-bytes", cfg.EntityEventBytes, "text bytes per event of the entity comparison")
	flag.IntVar(&cfg.EntityMaxAppends, "entity-max-appends", cfg.EntityMaxAppends, "cap of the entity comparison's appends")
	flag.IntVar(&cfg.SessionflowMaxAppends, "sessionflow-max-appends", cfg.SessionflowMaxAppends, "cap of the sessionflow side of the entity comparison")
	flag.BoolVar(&cfg.Store, "store", cfg.Store, "run the store benchmarks (go test ./jsonl -bench)")
	flag.Int64Var(&cfg.StoreBenchSize, "store-benchsize", cfg.StoreBenchSize, "size of the store open benchmarks' logs")
	flag.BoolVar(&cfg.Turns.Enabled, "turns", cfg.Turns.Enabled, "run the turn measurements (sessionflow against the agent-sample pattern)")
	flag.BoolVar(&cfg.TurnsOnly, "turns-only", false, "run only the turn measurements; with -out, replace the turn section of that report and keep the rest")
	svgDir := flag.String("svg", "", "write the turn charts ("+bench.HistoryChart+", "+bench.TimeChart+") into this directory")
	turnsLong := flag.Bool("turns-long", false, fmt.Sprintf("run %d turns on one sessionflow session (default %d)", bench.LongSessionTurns, cfg.Turns.SessionTurns))
	turnSizes := flag.String("turn-sizes", "10,100,1000,10000", "conversation lengths (messages) of the turn measurements")
	turnChunks := flag.String("turn-chunks", "10,100000", "response lengths (chunks) whose history per turn is compared")
	flag.IntVar(&cfg.Turns.SessionTurns, "session-turns", cfg.Turns.SessionTurns, "turns on one sessionflow session")
	flag.IntVar(&cfg.Turns.Turns, "turns-measured", cfg.Turns.Turns, "measured turns per point")
	flag.IntVar(&cfg.Turns.MessageBytes, "turn-message-bytes", cfg.Turns.MessageBytes, "text bytes per message of a built conversation")
	flag.IntVar(&cfg.Turns.GrowBatch, "grow-batch", cfg.Turns.GrowBatch, "messages each turn of the sample's growth run adds")
	flag.BoolVar(&cfg.Turns.Rounds.Enabled, "rounds", cfg.Turns.Rounds.Enabled, "run the tool-round measurements with the turn measurements")
	flag.BoolVar(&cfg.Turns.Rounds.Only, "rounds-only", false, "run only the tool-round measurements; with -out, replace the tool-round part of the turn section and keep the rest")
	roundSizes := flag.String("round-sizes", "10,1000,10000", "conversation lengths (messages) of the tool rounds of one call")
	roundParallel := flag.String("round-parallel", "1,4,16", "parallel tool calls of the tool rounds measured at the first -round-sizes")
	roundPatterns := flag.String("round-patterns", "", "measure the tool rounds of these patterns only (sessionflow, sample, nosync: sessionflow without its store's fsyncs); empty: all")
	flag.IntVar(&cfg.Turns.Rounds.Rounds, "rounds-measured", cfg.Turns.Rounds.Rounds, "measured tool rounds per point")
	serverMetrics := flag.Int("server-metrics-port", 0, "serve the dev server's Prometheus metrics (request counts by operation) on this port of 127.0.0.1; 0: none")
	flag.Func("server-config", "a dynamic config value KEY=VALUE of the dev server (repeatable), e.g. system.enableActivityEagerExecution=true", func(kv string) error {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		cfg.ServerArgs = append(cfg.ServerArgs, "--dynamic-config-value", kv)
		return nil
	})
	flag.BoolVar(&cfg.Turns.Rounds.NoSyncFloor, "rounds-nosync-floor", cfg.Turns.Rounds.NoSyncFloor, "also measure, at the first round size with one call, sessionflow's rounds with its store's fsyncs counted but not made (not durable: the floor)")
	flag.BoolVar(&cfg.Turns.Rounds.TimeOnly, "rounds-time-only", false, "time the tool rounds without reading their history (for a profile of the rounds alone)")
	flag.IntVar(&cfg.Turns.Rounds.PerConversation, "rounds-per-conversation", cfg.Turns.Rounds.PerConversation, "measured tool rounds per conversation before a new one of the point's length is opened (0: one conversation per point)")
	turnsSave := flag.String("turns-save", "", "with -turns-only: also save the turn measurements as JSON in this file")
	turnsFrom := flag.String("turns-from", "", "with -turns-only: measure nothing, render the turn section and charts from measurements saved by -turns-save")
	fleetCfg := bench.DefaultFleetConfig()
	fleet := flag.Bool("fleet", false, "run only the many-sessions measurement; with -out, replace its section of that report and keep the rest")
	flag.IntVar(&fleetCfg.Sessions, "fleet-sessions", fleetCfg.Sessions, "live sessions of the many-sessions measurement")
	flag.IntVar(&fleetCfg.InFlight, "fleet-inflight", fleetCfg.InFlight, "concurrent creates of the many-sessions measurement")
	flag.IntVar(&fleetCfg.Appends, "fleet-appends", fleetCfg.Appends, "measured appends per phase of the many-sessions measurement")
	flag.IntVar(&fleetCfg.MaxDescriptors, "fleet-max-descriptors", fleetCfg.MaxDescriptors, "the worker's store descriptor limit in the many-sessions measurement")
	flag.IntVar(&fleetCfg.SmallCache, "fleet-small-cache", fleetCfg.SmallCache, "workflow cache size of the replacement worker in the many-sessions measurement")
	compactionCfg := bench.DefaultCompactionConfig()
	compaction := flag.Bool("compaction", false, "run only the compaction measurement; with -out, replace its section of that report and keep the rest")
	flag.IntVar(&compactionCfg.Turns, "compaction-turns", compactionCfg.Turns, "turns of the compaction measurement's session")
	flag.Int64Var(&compactionCfg.Window, "compaction-window", compactionCfg.Window, "context window (tokens) of the compaction measurement's scripted model")
	flag.IntVar(&compactionCfg.MessageBytes, "compaction-message-bytes", compactionCfg.MessageBytes, "text bytes of every prompt and answer of the compaction measurement")
	flag.IntVar(&compactionCfg.SampleTurns, "compaction-sample-turns", compactionCfg.SampleTurns, "turns whose history is read at the start, in the middle and at the end of the compaction measurement")
	pngDir := flag.String("png", "", "with -compaction: write its chart ("+bench.CompactionChart+") into this directory")
	compactionSave := flag.String("compaction-save", "", "with -compaction: also save its measurements as JSON in this file")
	compactionFrom := flag.String("compaction-from", "", "with -compaction: measure nothing, render its section and chart from measurements saved by -compaction-save")
	liveCfg := bench.DefaultLiveConfig()
	live := flag.Bool("live", false, "run only the live text measurement; with -out, replace its section of that report and keep the rest")
	flag.IntVar(&liveCfg.Sessions, "live-sessions", liveCfg.Sessions, "sessions streaming at once in the live text measurement")
	flag.IntVar(&liveCfg.Chunks, "live-chunks", liveCfg.Chunks, "chunks per model call in the live text measurement")
	flag.DurationVar(&liveCfg.ChunkEvery, "live-chunk-every", liveCfg.ChunkEvery, "time between two chunks of a model call in the live text measurement")
	flag.StringVar(&cfg.TemporalAddress, "temporal-address", "", "measure against the Temporal server at this host:port (e.g. the local cluster's, go run ./cmd/cluster) instead of the embedded dev server")
	flag.StringVar(&cfg.TemporalNamespace, "temporal-namespace", "default", "the namespace on -temporal-address")
	flag.BoolVar(&cfg.AppendPathOnly, "append-path-only", false, "run only the append path comparison (entity workflow, local activity, activity); the report is that section alone")
	flag.IntVar(&cfg.LongAppends, "long-appends", 0, "drive one session through this many single-caller appends (100000 for the long-session figures); alone, or beside -append-path-only; the report is that section alone")
	flag.Parse()
	if *turnsLong {
		cfg.Turns.SessionTurns = bench.LongSessionTurns
	}
	var err error
	if cfg.Turns.Sizes, err = intList("-turn-sizes", *turnSizes, 1); err != nil {
		return err
	}
	if cfg.Turns.Chunks, err = intList("-turn-chunks", *turnChunks, 1); err != nil {
		return err
	}
	if cfg.Turns.Rounds.Sizes, err = intList("-round-sizes", *roundSizes, 0); err != nil {
		return err
	}
	if cfg.Turns.Rounds.Parallel, err = intList("-round-parallel", *roundParallel, 1); err != nil {
		return err
	}
	if cfg.Turns.Rounds.Patterns, err = patternList(*roundPatterns); err != nil {
		return err
	}
	if *serverMetrics > 0 {
		cfg.ServerArgs = append(cfg.ServerArgs, "--metrics-port", strconv.Itoa(*serverMetrics))
	}
	if cfg.Turns.Rounds.Only {
		cfg.TurnsOnly = true
		cfg.Turns.Rounds.Enabled = true
	}
	cfg.HistorySizes = nil
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return fmt.Errorf("-history-sizes: bad size %q", s)
		}
		cfg.HistorySizes = append(cfg.HistorySizes, n)
	}
	cfg.Progress = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *turnsFrom != "" {
		if !cfg.TurnsOnly {
			return errors.New("-turns-from needs -turns-only")
		}
		b, err := os.ReadFile(*turnsFrom)
		if err != nil {
			return fmt.Errorf("reading the saved measurements: %w", err)
		}
		var tr bench.TurnResults
		if err := json.Unmarshal(b, &tr); err != nil {
			return fmt.Errorf("decoding %s: %w", *turnsFrom, err)
		}
		return output(&bench.Results{Config: cfg, Turns: &tr}, true, *svgDir, *out)
	}

	if *compactionFrom != "" {
		if !*compaction {
			return errors.New("-compaction-from needs -compaction")
		}
		b, err := os.ReadFile(*compactionFrom)
		if err != nil {
			return fmt.Errorf("reading the saved measurements: %w", err)
		}
		var cr bench.CompactionResults
		if err := json.Unmarshal(b, &cr); err != nil {
			return fmt.Errorf("decoding %s: %w", *compactionFrom, err)
		}
		return writeCompaction(&cr, *pngDir, *out)
	}

	waitLoad(ctx, *maxLoad, *loadWait)

	if *compaction {
		compactionCfg.Progress = os.Stderr
		cr, err := bench.RunCompaction(ctx, compactionCfg)
		if err != nil {
			return err
		}
		if *compactionSave != "" {
			b, err := json.Marshal(cr)
			if err != nil {
				return fmt.Errorf("encoding the compaction measurements: %w", err)
			}
			if err := os.WriteFile(*compactionSave, b, 0o644); err != nil {
				return fmt.Errorf("saving the compaction measurements: %w", err)
			}
		}
		return writeCompaction(cr, *pngDir, *out)
	}

	if *live {
		liveCfg.Progress = os.Stderr
		lr, err := bench.RunLive(ctx, liveCfg)
		if err != nil {
			return err
		}
		return writeReport(*out, func(old string) string { return bench.SpliceLive(old, bench.LiveReport(lr)) })
	}

	if *fleet {
		fleetCfg.Progress = os.Stderr
		fr, err := bench.RunFleet(ctx, fleetCfg)
		if err != nil {
			return err
		}
		return writeReport(*out, func(old string) string { return bench.SpliceFleet(old, bench.FleetReport(fr)) })
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("creating the profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("starting the profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *turnsSave != "" && res.Turns != nil {
		b, err := json.MarshalIndent(res.Turns, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the turn measurements: %w", err)
		}
		if err := os.WriteFile(*turnsSave, b, 0o644); err != nil {
			return fmt.Errorf("saving the turn measurements: %w", err)
		}
	}
	if cfg.AppendPathOnly || cfg.LongAppends > 0 {
		return writeReport(*out, func(string) string { return bench.AppendPathReport(res) })
	}
	if cfg.Turns.Rounds.Only {
		if *svgDir != "" {
			fmt.Fprintln(os.Stderr, "perf: -svg ignored: the charts draw the turns too, which -rounds-only does not measure")
		}
		return writeReport(*out, func(old string) string { return bench.SpliceRounds(old, bench.RoundsReport(res.Turns.Rounds)) })
	}
	return output(res, cfg.TurnsOnly, *svgDir, *out)
}

// output writes the charts into svgDir (when set) and the report to out
// (stdout when empty); turnsOnly replaces only the turn section of out.
func output(res *bench.Results, turnsOnly bool, svgDir, out string) error {
	if svgDir != "" {
		if res.Turns == nil {
			return fmt.Errorf("-svg: no turn measurements in this run")
		}
		files, err := bench.WriteCharts(svgDir, res.Turns)
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "perf: wrote", strings.Join(files, ", "))
	}
	report := bench.Report(res)
	if out != "" {
		// A run of the other measurements keeps the many-sessions section.
		// So does it the compaction section.
		if old, err := os.ReadFile(out); err == nil {
			report = bench.SpliceFleet(report, bench.FleetSection(string(old)))
			report = bench.SpliceCompaction(report, bench.CompactionSection(string(old)))
			report = bench.SpliceLive(report, bench.LiveSection(string(old)))
		}
	}
	if turnsOnly {
		report = bench.TurnsReport(res.Turns)
		if out != "" {
			old, err := os.ReadFile(out)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("reading the report: %w", err)
			}
			report = bench.SpliceTurns(string(old), report)
		}
	}
	if out == "" {
		_, err := os.Stdout.WriteString(report)
		return err
	}
	if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	fmt.Fprintln(os.Stderr, "perf: wrote", out)
	return nil
}

// writeCompaction writes the compaction chart into pngDir (when set) and
// the compaction section into out (stdout when empty), keeping the rest of
// out.
func writeCompaction(cr *bench.CompactionResults, pngDir, out string) error {
	if pngDir != "" {
		path, err := bench.WriteCompactionChart(pngDir, cr)
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "perf: wrote", path)
	}
	return writeReport(out, func(old string) string { return bench.SpliceCompaction(old, bench.CompactionReport(cr)) })
}

// intList parses a comma-separated list of integers of at least least.
func intList(name, s string, least int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			return nil, fmt.Errorf("%s: bad value %q", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// patternList parses -round-patterns: a comma-separated list of
// "sessionflow", "sample" and "nosync" (sessionflow without its store's
// fsyncs, measured at the first size with one call).
func patternList(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case "":
		case "sessionflow":
			out = append(out, bench.PatternSessionflow)
		case "sample":
			out = append(out, bench.PatternSample)
		case "nosync":
			out = append(out, bench.PatternSessionflowNoSync)
		default:
			return nil, fmt.Errorf("-round-patterns: unknown pattern %q (want sessionflow, sample or nosync)", f)
		}
	}
	return out, nil
}

// waitLoad polls the load average until it is below limit or wait has
// passed.
func waitLoad(ctx context.Context, limit float64, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		l := bench.LoadAverage()
		if l < 0 || l < limit {
			fmt.Fprintf(os.Stderr, "perf: load average %.2f\n", l)
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "perf: load average still %.2f after %s; measuring anyway\n", l, wait)
			return
		}
		fmt.Fprintf(os.Stderr, "perf: load average %.2f >= %.2f, waiting\n", l, limit)
		select {
		case <-ctx.Done():
			return
		case <-time.After(15 * time.Second):
		}
	}
}

// writeReport replaces the report in out (stdout when empty) by what render
// makes of its current content.
func writeReport(out string, render func(old string) string) error {
	if out == "" {
		_, err := os.Stdout.WriteString(render(""))
		return err
	}
	old, err := os.ReadFile(out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading the report: %w", err)
	}
	if err := os.WriteFile(out, []byte(render(string(old))), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	fmt.Fprintln(os.Stderr, "perf: wrote", out)
	return nil
}
