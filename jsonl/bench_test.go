package jsonl_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// benchSize is the size of the large-log fixtures of the open benchmarks.
var benchSize = flag.Int64("benchsize", 100<<20, "approximate size in bytes of the event lines of the jsonl open benchmarks' logs")

// benchWords feed the generated message texts, so that zstd sees text that
// compresses like prose rather than like a repeated string.
var benchWords = strings.Fields(`the session log is an append only sequence of events each event is one
JSON line a turn starts with a user message and ends when the assistant stops calling tools
read write edit search list run tests build deploy file directory function error retry
timeout context cancel workflow activity worker lease handle owner repair torn frame`)

// benchEvent returns an assistant/message event of about size bytes of JSON.
func benchEvent(tb testing.TB, rng *rand.Rand, seq int64, size int) session.Event {
	tb.Helper()
	var text strings.Builder
	for text.Len() < size-160 {
		text.WriteString(benchWords[rng.IntN(len(benchWords))])
		text.WriteByte(' ')
	}
	e, err := session.NewEvent(wire.TypeAssistantMessage, seq, 1_700_000_000_000+seq, durObj{
		"turn": 1 + seq/64, "step": 1, "stream": []any{},
		"message": durObj{"role": "assistant", "content": []any{durObj{"type": "text", "text": text.String()}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// benchWriter creates durID under a new root and returns its write handle,
// already materialized.
func benchWriter(b *testing.B, comp jsonl.Compression) (*jsonl.Handle, string) {
	b.Helper()
	root := b.TempDir()
	s, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: comp, Logger: durQuiet})
	if err != nil {
		b.Fatal(err)
	}
	h, err := s.Create(context.Background(), durHeader(), jsonl.CreateOptions{HandleID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close(context.Background()) })
	return h, durLogPath(b, root, comp)
}

// BenchmarkAppendSingle appends one ~256-byte event per operation through a
// write handle: lease check, write, fsync and summary refresh.
func BenchmarkAppendSingle(b *testing.B) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		b.Run(string(comp), func(b *testing.B) {
			h, _ := benchWriter(b, comp)
			rng := rand.New(rand.NewPCG(1, 2))
			events := make([]session.Event, b.N)
			for i := range events {
				events[i] = benchEvent(b, rng, int64(i), 256)
			}
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := h.Append(ctx, events[i:i+1]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawWriteFsync is the floor of BenchmarkAppendSingle: a write of
// a line of the same size and the sync an append makes (fdatasync, D129),
// in the same kind of directory.
func BenchmarkRawWriteFsync(b *testing.B) {
	line, err := benchEvent(b, rand.New(rand.NewPCG(1, 2)), 0, 256).MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	line = append(line, '\n')
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
}

func benchAppendBatch(b *testing.B, n int) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		b.Run(string(comp), func(b *testing.B) {
			h, _ := benchWriter(b, comp)
			rng := rand.New(rand.NewPCG(3, 4))
			// A pool of payloads, renumbered per batch.
			pool := make([]session.Event, n)
			for i := range pool {
				pool[i] = benchEvent(b, rng, int64(i), 256)
			}
			batch := make([]session.Event, n)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range batch {
					batch[k] = pool[k]
					batch[k].Seq = int64(i*n + k)
				}
				if err := h.Append(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkAppendBatch64 appends batches of 64 events.
func BenchmarkAppendBatch64(b *testing.B) { benchAppendBatch(b, 64) }

// BenchmarkAppendBatch256 appends batches of 256 events.
func BenchmarkAppendBatch256(b *testing.B) { benchAppendBatch(b, 256) }

// benchFixture is a large stored log built once per process.
type benchFixture struct {
	once  sync.Once
	root  string
	path  string
	plain int64 // bytes of the log's event lines
	err   error
}

var benchFixtures = map[jsonl.Compression]*benchFixture{
	jsonl.CompressionNone: {},
	jsonl.CompressionZstd: {},
}

// benchLargeLog returns a log of about -benchsize bytes of JSON lines,
// written through the store in batches of 512 events of 200 B to 2 KB. The
// log lives in a directory of the system temp dir that is kept between
// runs (building 100 MB through the store takes a while) and rebuilt when
// missing.
func benchLargeLog(b *testing.B, comp jsonl.Compression) *benchFixture {
	b.Helper()
	fx := benchFixtures[comp]
	fx.once.Do(func() {
		fx.root = filepath.Join(os.TempDir(), fmt.Sprintf("sessionflow-jsonl-bench-v1-%s-%d", comp, *benchSize))
		fx.path = durLogPath(b, fx.root, comp)
		if data, err := os.ReadFile(filepath.Join(fx.root, "plain-bytes")); err == nil {
			if _, err := os.Stat(fx.path); err == nil {
				_, fx.err = fmt.Sscan(string(data), &fx.plain)
				return
			}
		}
		fx.err = benchBuild(b, fx, comp)
	})
	if fx.err != nil {
		b.Fatal(fx.err)
	}
	return fx
}

// benchBuild writes the fixture in a scratch root and moves it into place.
func benchBuild(b *testing.B, fx *benchFixture, comp jsonl.Compression) error {
	tmp, err := os.MkdirTemp(os.TempDir(), "sessionflow-jsonl-bench-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	s, err := jsonl.NewStore(jsonl.Options{Root: tmp, Compression: comp, Logger: durQuiet})
	if err != nil {
		return err
	}
	ctx := context.Background()
	h, err := s.Create(ctx, durHeader(), jsonl.CreateOptions{HandleID: "bench-builder"})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var seq, plain int64
	for plain < *benchSize {
		batch := make([]session.Event, 512)
		for i := range batch {
			batch[i] = benchEvent(b, rng, seq, 200+rng.IntN(1800))
			line, err := batch[i].MarshalJSON()
			if err != nil {
				return err
			}
			plain += int64(len(line)) + 1
			seq++
		}
		if err := h.Append(ctx, batch); err != nil {
			return err
		}
	}
	if err := h.Close(ctx); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "plain-bytes"), []byte(fmt.Sprint(plain)), 0o600); err != nil {
		return err
	}
	_ = os.RemoveAll(fx.root)
	if err := os.Rename(tmp, fx.root); err != nil {
		return err
	}
	fx.plain = plain
	return nil
}

// benchOpenRead opens the fixture for reading once per operation, which
// reads and validates every record.
func benchOpenRead(b *testing.B, comp jsonl.Compression) {
	fx := benchLargeLog(b, comp)
	s, err := jsonl.NewStore(jsonl.Options{Root: fx.root, Compression: comp, Logger: durQuiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(fx.plain)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, err := s.Open(ctx, durID, jsonl.AccessRead, jsonl.OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenRaw100MB opens a raw log of -benchsize bytes for reading.
func BenchmarkOpenRaw100MB(b *testing.B) { benchOpenRead(b, jsonl.CompressionNone) }

// BenchmarkReadSplit100MB is the floor of BenchmarkOpenRaw100MB: read the
// same file and split it into lines, without parsing anything.
func BenchmarkReadSplit100MB(b *testing.B) {
	fx := benchLargeLog(b, jsonl.CompressionNone)
	b.SetBytes(fx.plain)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data, err := os.ReadFile(fx.path)
		if err != nil {
			b.Fatal(err)
		}
		if lines := bytes.Split(data, []byte{'\n'}); len(lines) < 2 {
			b.Fatal("the fixture has no lines")
		}
	}
}

// BenchmarkOpenZstd100MB opens a zstd log of -benchsize bytes of plaintext
// for reading; MB/s counts plaintext.
func BenchmarkOpenZstd100MB(b *testing.B) { benchOpenRead(b, jsonl.CompressionZstd) }
