package jsonl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
)

// TestCrashTruncationEveryOffsetDecodedWhileRead is the raw case of
// TestCrashTruncationEveryOffset with every open decoding the log while it
// reads it, in reads of a few bytes and chunks of a few lines, so that
// every cut lands in every position of a read and of a chunk.
func TestCrashTruncationEveryOffsetDecodedWhileRead(t *testing.T) {
	for _, sizes := range [][2]int{{61, 97}, {1000, 7}} {
		jsonl.SetDecodeSizesForTest(t, sizes[0], sizes[1])
		events := durTurnLog(t)
		full, _ := durWriteLog(t, t.TempDir(), jsonl.CompressionNone, events, []int{len(events)})
		work := durScratchDir(t)
		last := 0
		for k := int64(0); k <= int64(len(full)); k++ {
			got := durResumeCut(t, work, jsonl.CompressionNone, full, k, durRawCut(full, k), events, "empty or header-less session log")
			if got >= 0 {
				require.GreaterOrEqual(t, got, last, "offset %d: fewer events survive a longer prefix", k)
				last = got
			}
		}
		require.Equal(t, len(events), last, "the uncut log keeps every event")
	}
}
