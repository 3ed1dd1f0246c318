package scripted_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
)

// BenchmarkScripted100kChunks streams a response of 100,000 four-character
// text deltas and its finish chunk.
func BenchmarkScripted100kChunks(b *testing.B) {
	const n = 100_000
	p, err := scripted.New(scripted.Responses(scripted.Text(strings.Repeat("tok ", n)).WithChunkSize(4)))
	if err != nil {
		b.Fatal(err)
	}
	req := provider.Request{SessionID: "bench"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		count := 0
		for c, err := range p.Stream(ctx, req) {
			if err != nil {
				b.Fatal(err)
			}
			if len(c.Delta) > 4 {
				b.Fatalf("delta %q", c.Delta)
			}
			count++
		}
		if count != n+1 {
			b.Fatalf("%d chunks", count)
		}
	}
}
