package jsonl_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

// readCountFS is the OS filesystem counting the read-only opens of the file
// named log.
type readCountFS struct {
	jsonl.OSFS
	mu    sync.Mutex
	log   string
	reads int
}

func (f *readCountFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 && filepath.Base(name) == f.log {
		f.mu.Lock()
		f.reads++
		f.mu.Unlock()
	}
	return f.OSFS.OpenFile(name, flag, perm)
}

func (f *readCountFS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// TestWriteHandleKeepsLogAcrossAppends: once a write handle holds the log,
// Append and Update extend what it holds, so a following Update or Read
// does not read the file again; an append by another process is still
// seen.
func TestWriteHandleKeepsLogAcrossAppends(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		fsys := &readCountFS{log: generationName(comp)}
		e := newEnv(t, comp, fsys)
		hd := create(t, e.store, header("kept", ""))
		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}))
		_, err := hd.Update(bg, 0, func([]session.Event, int64) ([]session.Event, error) { return nil, nil })
		require.NoError(t, err)
		before := fsys.count()

		require.NoError(t, hd.Append(bg, []session.Event{userMessage(t, 1, "one")}))
		next, err := hd.Update(bg, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Equal(t, []int64{0, 1}, seqs(tail))
			return []session.Event{stepStart(t, next, 1, 1)}, nil
		})
		require.NoError(t, err)
		require.Equal(t, int64(3), next)
		require.NoError(t, hd.Append(bg, []session.Event{assistantMessage(t, 3, 1, 1, "two")}))
		_, err = hd.Update(bg, 2, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Equal(t, []int64{2, 3}, seqs(tail))
			require.Equal(t, int64(4), next)
			return nil, nil
		})
		require.NoError(t, err)
		require.Equal(t, lines(t, readAll(t, e.newStore(nil), "kept")...), lines(t, readHandle(t, hd)...))
		require.Equal(t, before, fsys.count(), "the write handle read its own log again")

		// Another process appends: the next Update reads the file and sees it.
		ho := e.newStore(nil).Attach(hd.Ref())
		require.NoError(t, ho.Append(bg, []session.Event{stepEnd(t, 4, 1, 1)}))
		_, err = hd.Update(bg, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Equal(t, []int64{0, 1, 2, 3, 4}, seqs(tail))
			require.Equal(t, int64(5), next)
			return nil, nil
		})
		require.NoError(t, err)
		require.Greater(t, fsys.count(), before)
	})
}

// BenchmarkUpdateAfterAppend appends one ~256-byte event and then runs an
// Update that reads the last event, per operation, on a log of 4096 events:
// the pattern of a live session, whose appends and agent steps alternate.
func BenchmarkUpdateAfterAppend(b *testing.B) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		b.Run(string(comp), func(b *testing.B) {
			h, _ := benchWriter(b, comp)
			rng := rand.New(rand.NewPCG(1, 2))
			const prefix = 4096
			events := make([]session.Event, prefix+b.N)
			for i := range events {
				events[i] = benchEvent(b, rng, int64(i), 256)
			}
			ctx := context.Background()
			for i := 0; i < prefix; i += 256 {
				if err := h.Append(ctx, events[i:i+256]); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := h.Update(ctx, 0, func([]session.Event, int64) ([]session.Event, error) { return nil, nil }); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				seq := int64(prefix + i)
				if err := h.Append(ctx, events[seq:seq+1]); err != nil {
					b.Fatal(err)
				}
				_, err := h.Update(ctx, seq, func(tail []session.Event, next int64) ([]session.Event, error) {
					if len(tail) != 1 || next != seq+1 {
						return nil, fmt.Errorf("tail of %d events, next %d", len(tail), next)
					}
					return nil, nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
