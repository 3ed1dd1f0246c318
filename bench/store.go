package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// StoreRuns is how many times each store benchmark runs; the median is
// kept.
const StoreRuns = 3

// PairedRuns is how many go test processes each run the single-event
// append and the raw write+fsync loop back to back; the append's ratio is
// the median of the ratios of the pairs, so that a change of the disk's
// fsync latency between runs moves both sides of a ratio alike.
const PairedRuns = 7

// StoreResults are the medians of the store benchmarks of one run, by
// benchmark name without the -GOMAXPROCS suffix (e.g.
// "BenchmarkAppendSingle/none").
type StoreResults struct {
	// NsPerOp, MBPerSec and EventsPerSec are the medians per benchmark.
	NsPerOp      map[string]float64
	MBPerSec     map[string]float64
	EventsPerSec map[string]float64
	// SingleRatios are, per paired run, the raw write+fsync loop's ns/op
	// over the single-event append's, by compression ("none", "zstd").
	SingleRatios map[string][]float64
	// Commands are the go test invocations that produced them.
	Commands []string
}

// SingleRatio returns the median of SingleRatios[comp]: the single-event
// append's rate as a fraction of the raw loop's.
func (r *StoreResults) SingleRatio(comp jsonl.Compression) float64 {
	return median(r.SingleRatios[string(comp)])
}

// PairedCommand is the go test invocation RunStoreBenchmarks runs
// PairedRuns times: the single-event appends, then the raw loop.
var PairedCommand = []string{"go", "test", "./jsonl", "-run", "^$", "-bench", "^(BenchmarkAppendSingle|BenchmarkRawWriteFsync)$", "-benchtime", "2000x", "-count", "1"}

// StoreCommands returns the go test invocations of the store benchmarks
// other than PairedCommand.
func StoreCommands(benchSize int64) [][]string {
	runs := strconv.Itoa(StoreRuns)
	return [][]string{
		{"go", "test", "./jsonl", "-run", "^$", "-bench", "AppendBatch", "-benchtime", "1000x", "-count", runs},
		{"go", "test", "./jsonl", "-run", "^$", "-bench", "Open|ReadSplit", "-benchtime", "2x", "-count", runs, "-benchsize", strconv.FormatInt(benchSize, 10)},
	}
}

// RunStoreBenchmarks runs the store benchmarks in moduleDir and parses
// their output.
func RunStoreBenchmarks(ctx context.Context, moduleDir string, benchSize int64) (*StoreResults, error) {
	samples := map[string]map[string][]float64{} // unit -> name -> values
	res := &StoreResults{SingleRatios: map[string][]float64{}}
	run := func(args []string) (string, error) {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = moduleDir
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String(), nil
	}
	for i := 0; i < PairedRuns; i++ {
		out, err := run(PairedCommand)
		if err != nil {
			return nil, err
		}
		pair := map[string]map[string][]float64{}
		parseBench(out, pair)
		parseBench(out, samples)
		loop := pair["ns/op"]["BenchmarkRawWriteFsync"]
		for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
			app := pair["ns/op"]["BenchmarkAppendSingle/"+string(comp)]
			if len(loop) != 1 || len(app) != 1 || app[0] == 0 {
				return nil, fmt.Errorf("%s: no single-event append and raw loop pair in\n%s", strings.Join(PairedCommand, " "), out)
			}
			res.SingleRatios[string(comp)] = append(res.SingleRatios[string(comp)], loop[0]/app[0])
		}
	}
	res.Commands = append(res.Commands, fmt.Sprintf("for i in $(seq %d); do %s; done", PairedRuns, shellQuote(PairedCommand)))
	for _, args := range StoreCommands(benchSize) {
		out, err := run(args)
		if err != nil {
			return nil, err
		}
		res.Commands = append(res.Commands, shellQuote(args))
		parseBench(out, samples)
	}
	res.NsPerOp = medians(samples["ns/op"])
	res.MBPerSec = medians(samples["MB/s"])
	res.EventsPerSec = medians(samples["events/s"])
	if len(res.NsPerOp) == 0 {
		return nil, fmt.Errorf("the store benchmarks reported nothing")
	}
	return res, nil
}

// shellQuote joins args for a shell, quoting those with characters the
// shell would interpret.
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "^$|()*? '\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// parseBench adds the values of the benchmark lines of out to samples.
func parseBench(out string, samples map[string]map[string][]float64) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			unit := f[i+1]
			if samples[unit] == nil {
				samples[unit] = map[string][]float64{}
			}
			samples[unit][name] = append(samples[unit][name], v)
		}
	}
}

func medians(m map[string][]float64) map[string]float64 {
	out := map[string]float64{}
	for k, vs := range m {
		out[k] = median(vs)
	}
	return out
}

// median returns the median of vs (the upper one of an even count), 0 for
// none; vs is not modified.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// WriteRawLog stores session id in st (a raw root) with n todo/write
// events, writing the event lines directly after the header the store
// wrote, and returns the log's size.
func WriteRawLog(ctx context.Context, st *jsonl.Store, id string, n int) (int64, error) {
	hdr := wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 1}
	h, err := st.Create(ctx, hdr, jsonl.CreateOptions{HandleID: "bench-" + id})
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", id, err)
	}
	if err := h.Flush(ctx); err != nil {
		return 0, fmt.Errorf("writing the header of %s: %w", id, err)
	}
	if err := h.Close(ctx); err != nil {
		return 0, fmt.Errorf("closing %s: %w", id, err)
	}
	snap, err := st.Stat(ctx, id)
	if err != nil || snap == nil {
		return 0, fmt.Errorf("locating %s: %v", id, err)
	}
	f, err := os.OpenFile(snap.Path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", snap.Path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	buf := make([]byte, 0, 64)
	for i := 0; i < n; i++ {
		buf = append(buf[:0], `{"type":"todo/write","seq":`...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, `,"time":1,"data":{}}`+"\n"...)
		if _, err := w.Write(buf); err != nil {
			_ = f.Close()
			return 0, fmt.Errorf("writing %s: %w", snap.Path, err)
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return 0, fmt.Errorf("writing %s: %w", snap.Path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return 0, fmt.Errorf("syncing %s: %w", snap.Path, err)
	}
	fi, err := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("closing %s: %w", snap.Path, err)
	}
	return fi.Size(), nil
}
