package livetext_test

import (
	"testing"

	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/provider"
)

// BenchmarkModelChunk is the model activity's work per streamed chunk: the
// assembler's push (what it did before live text) and the push with the
// chunk handed to the live file (what it does now). Run with
//
//	go test ./livetext -run '^$' -bench ModelChunk -benchtime 200000x -count 5
func BenchmarkModelChunk(b *testing.B) {
	chunk := provider.Chunk{Type: provider.ChunkText, Delta: "a token or two "}
	b.Run("push", func(b *testing.B) {
		a := provider.NewAssembler()
		b.ReportAllocs()
		for b.Loop() {
			if err := a.Push(chunk, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("push+live", func(b *testing.B) {
		a := provider.NewAssembler()
		w, err := livetext.Start(b.TempDir(), 1, 1, 1)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := a.Push(chunk, 1); err != nil {
				b.Fatal(err)
			}
			w.Chunk("text", chunk.Delta)
		}
		b.StopTimer()
		if err := w.End(true); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(w.Dropped()), "dropped")
	})
}
