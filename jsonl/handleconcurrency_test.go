package jsonl_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestAttachedHandleConcurrentReads reads one attached write handle from
// two goroutines while a third queries its accessors. The first operation
// of an attached handle loads its state from storage; under -race any
// unsynchronized access to that state is reported.
func TestAttachedHandleConcurrentReads(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		root := t.TempDir()
		raceStoredSession(t, root)
		a := durStore(t, root, jsonl.CompressionNone, nil)
		h, err := a.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "owner"})
		require.NoError(t, err)
		require.NoError(t, h.Append(ctx, durSeqEvents(t, 3, 1)))

		// Another process attaches the handle by reference.
		att := durStore(t, root, jsonl.CompressionNone, nil).Attach(h.Ref())
		var wg sync.WaitGroup
		got := make([][]session.Event, 2)
		errs := make([]error, 2)
		for i := range got {
			wg.Go(func() { got[i], errs[i] = att.Read(ctx, 0, -1) })
		}
		var next int64
		var materialized bool
		var header wire.Header
		wg.Go(func() {
			// Materialized first: once it is true the load has happened,
			// so what is read after it must be the loaded state.
			materialized = att.Materialized()
			next, header = att.NextSeq(), att.Header()
		})
		wg.Wait()
		for i := range got {
			require.NoError(t, errs[i], "round %d reader %d", round, i)
			durRequireEvents(t, durSeqEvents(t, 0, 4), got[i])
		}
		// Each accessor saw the state before or after the load; one that
		// saw it loaded is never followed by one that saw it unloaded.
		if materialized {
			require.Equal(t, int64(4), next, "round %d", round)
			require.Equal(t, durID, header.ID, "round %d", round)
		} else {
			require.Contains(t, []int64{0, 4}, next, "round %d", round)
		}
		require.Equal(t, int64(4), att.NextSeq())
		require.True(t, att.Materialized())
		require.NoError(t, h.Close(ctx))
	}
}

// TestHandleAccessorsDuringAppend queries a write handle's accessors while
// another goroutine appends through it: every answer is a state before or
// after an append, and -race reports no unsynchronized access.
func TestHandleAccessorsDuringAppend(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	raceStoredSession(t, root)
	h, err := durStore(t, root, jsonl.CompressionNone, nil).Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "owner"})
	require.NoError(t, err)
	const appends = 20
	batches := make([][]session.Event, appends)
	for i := range batches {
		batches[i] = durSeqEvents(t, 3+int64(i), 1)
	}
	var wg sync.WaitGroup
	var appendErr error
	wg.Go(func() {
		for _, b := range batches {
			if appendErr = h.Append(ctx, b); appendErr != nil {
				return
			}
		}
	})
	var seen []int64
	wg.Go(func() {
		for range appends {
			seen = append(seen, h.NextSeq())
		}
	})
	wg.Wait()
	require.NoError(t, appendErr)
	for i, n := range seen {
		require.True(t, n >= 3 && n <= 3+appends, "NextSeq %d out of range", n)
		if i > 0 {
			require.GreaterOrEqual(t, n, seen[i-1], "NextSeq went back")
		}
	}
	require.Equal(t, int64(3+appends), h.NextSeq())
	require.NoError(t, h.Close(ctx))
}
