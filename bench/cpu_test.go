package bench

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with a space and a parenthesis; utime 250 and stime
	// 30 ticks (fields 14 and 15).
	line := "4242 (temporal (dev)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 30 0 0 20 0 12 0 100 0 0"
	got, err := parseStatCPU(line)
	require.NoError(t, err)
	require.Equal(t, 2800*time.Millisecond, got)

	_, err = parseStatCPU("4242 (short) S 1 2 3")
	require.Error(t, err)
}

func TestReadCPUCountsThisProcessWork(t *testing.T) {
	c0 := readCPU(os.Getpid())
	require.True(t, c0.ok)
	// Busy until getrusage counts 300 ms of CPU, however loaded the
	// machine; /proc (read as the server's clock) must see about as much,
	// at its 10 ms resolution.
	var d cpuTimes
	for d.self < 300*time.Millisecond {
		for i := 0; i < 1_000_000; i++ {
			sink += i
		}
		d = readCPU(os.Getpid()).since(c0)
		require.True(t, d.ok)
	}
	require.InDelta(t, d.self.Seconds(), d.server.Seconds(), 0.05)
}

// sink keeps the busy loop from being optimized away.
var sink int
