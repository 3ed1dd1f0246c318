package provider_test

import (
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

// BenchmarkAssembler100kChunks folds a response of 100,000 four-byte text
// deltas and a finish chunk, and builds its content and record.
func BenchmarkAssembler100kChunks(b *testing.B) {
	const n = 100_000
	deltas := make([]provider.Chunk, n)
	for i := range deltas {
		deltas[i] = provider.Chunk{Type: provider.ChunkText, Delta: "tok "}
	}
	b.ReportAllocs()
	for b.Loop() {
		a := provider.NewAssembler()
		for i, c := range deltas {
			if err := a.Push(c, int64(1_700_000_000_000+i/10)); err != nil {
				b.Fatal(err)
			}
		}
		if err := a.Push(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishStop}, 1_700_000_010_000); err != nil {
			b.Fatal(err)
		}
		content := a.Content()
		record := a.Record()
		if len(content) != 1 || len(content[0].Text) != 4*n || len(record) != n+3 {
			b.Fatalf("%d blocks, %d recorded chunks", len(content), len(record))
		}
	}
}
