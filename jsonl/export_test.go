package jsonl

import (
	"runtime"
	"testing"
)

// SetDecodeSizesForTest makes every raw open of the test decode the log
// while it reads it, in reads of piece bytes and chunks of chunk bytes, on
// at least two CPUs. The test must not run in parallel with others.
func SetDecodeSizesForTest(tb testing.TB, piece, chunk int) {
	tb.Helper()
	minBytes, oldPiece, oldChunk := pipelineMinBytes, readPieceBytes, decodeChunkBytes
	procs := runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2))
	pipelineMinBytes, readPieceBytes, decodeChunkBytes = 0, piece, chunk
	tb.Cleanup(func() {
		pipelineMinBytes, readPieceBytes, decodeChunkBytes = minBytes, oldPiece, oldChunk
		runtime.GOMAXPROCS(procs)
	})
}
