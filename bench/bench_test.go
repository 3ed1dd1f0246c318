package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
)

// TestSmoke runs every workflow measurement with tiny sizes against a real
// dev server and checks that the report holds them.
func TestSmoke(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LatencyRuns = 2
	cfg.Sessions = 4
	cfg.InFlight = 2
	cfg.AppendDuration = 300 * time.Millisecond
	cfg.AppendCallers = 2
	cfg.HistorySizes = []int{10, 1000}
	cfg.EntityMaxAppends = 3
	cfg.Store = false
	cfg.ModuleDir = ".."
	cfg.Turns = smokeTurns()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	require.NoError(t, err)

	require.Equal(t, 2, res.CreateLatency.N)
	require.Equal(t, 2, res.NoopLatency.N)
	require.Positive(t, res.CreatesPerSecond)
	require.Len(t, res.Appends, 6, "group commit, then two windows, each with one and with several callers")
	for _, a := range res.Appends {
		require.Positive(t, a.Appends)
	}
	require.Len(t, res.History, 2)
	// The number of workflow tasks depends on when the Dispose update lands
	// relative to them; the history must not grow with the log.
	require.InDelta(t, res.History[0].HistoryEvents, res.History[1].HistoryEvents, 6,
		"a resume records the same history for 10 and 1000 events, up to task timing")
	require.Less(t, res.History[1].HistoryBytes, 2*res.History[0].HistoryBytes)
	require.Equal(t, 3, res.Entity.Appends)
	require.Equal(t, 3*cfg.EntityBatch, res.Entity.Events)
	require.Equal(t, 3, res.SessionflowSameLoad.Appends)
	require.Positive(t, res.SessionflowSameLoad.HistoryBytes)

	checkSmokeTurns(t, res.Turns)

	report := Report(res)
	require.Contains(t, report, Command)
	require.Contains(t, report, TurnsBegin)
	require.Contains(t, report, "## The history-bound alternative")
	require.True(t, strings.HasPrefix(report, "# Performance\n"))
}

func TestParseBench(t *testing.T) {
	samples := map[string]map[string][]float64{}
	parseBench(`goos: linux
BenchmarkAppendSingle/none-2         	    1000	    217000 ns/op
BenchmarkAppendSingle/none-2         	    1000	    219000 ns/op
BenchmarkAppendSingle/none-2         	    1000	    215000 ns/op
BenchmarkAppendBatch256/zstd-2       	    1000	   1100000 ns/op	    228000 events/s
BenchmarkOpenRaw100MB-2              	       2	 200000000 ns/op	 516.00 MB/s
PASS
`, samples)
	require.Equal(t, 217000.0, medians(samples["ns/op"])["BenchmarkAppendSingle/none"])
	require.Equal(t, 228000.0, medians(samples["events/s"])["BenchmarkAppendBatch256/zstd"])
	require.Equal(t, 516.0, medians(samples["MB/s"])["BenchmarkOpenRaw100MB"])
}

func TestSingleRatioIsTheMedianOfThePairs(t *testing.T) {
	st := &StoreResults{SingleRatios: map[string][]float64{
		"none": {0.95, 0.70, 0.92, 0.91, 1.02},
		"zstd": {0.80},
	}}
	require.Equal(t, 0.92, st.SingleRatio(jsonl.CompressionNone))
	require.Equal(t, 0.80, st.SingleRatio(jsonl.CompressionZstd))
	require.Equal(t, []float64{0.95, 0.70, 0.92, 0.91, 1.02}, st.SingleRatios["none"], "the pairs keep their order")
	require.Zero(t, (&StoreResults{}).SingleRatio(jsonl.CompressionNone))
}

func TestStoreReportUsesThePairedRatio(t *testing.T) {
	st := &StoreResults{
		// The medians of the times alone would give 150/200 = 0.75x.
		NsPerOp:      map[string]float64{"BenchmarkRawWriteFsync": 150_000, "BenchmarkAppendSingle/none": 200_000, "BenchmarkAppendSingle/zstd": 210_000},
		MBPerSec:     map[string]float64{"BenchmarkReadSplit100MB": 2000, "BenchmarkOpenRaw100MB": 1100, "BenchmarkOpenZstd100MB": 300},
		EventsPerSec: map[string]float64{"BenchmarkAppendBatch256/none": 300_000},
		SingleRatios: map[string][]float64{"none": {0.93, 0.91, 0.95}, "zstd": {0.88, 0.87, 0.90}},
		Commands:     []string{"for i in $(seq 3); do go test; done"},
	}
	report := Report(&Results{Store: st})
	require.Contains(t, report, "| single-event append >= 0.9x the raw write+fsync loop (median of 7 paired runs) | 0.93x | met |")
	require.Contains(t, report, "**0.93x** of the raw loop's rate | >= 0.9x: met |")
	require.Contains(t, report, "0.93, 0.91, 0.95 (raw")
	require.Contains(t, report, "| raw open >= 0.5x raw read-and-split | 0.55x | met |")

	st.SingleRatios["none"] = []float64{0.85, 0.89, 0.80}
	require.Contains(t, Report(&Results{Store: st}), "| 0.85x | **missed** |")
}

func TestShellQuote(t *testing.T) {
	require.Equal(t, `go test ./jsonl -run '^$' -bench '^(A|B)$' -count 1`,
		shellQuote([]string{"go", "test", "./jsonl", "-run", "^$", "-bench", "^(A|B)$", "-count", "1"}))
	require.Equal(t, `'it'\''s'`, shellQuote([]string{"it's"}))
}
