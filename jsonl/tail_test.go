package jsonl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestTailIsTheStoresViewAndStaysAsItIs: Tail returns the log from a seq
// and the next seq; the events it returned are unchanged by later appends,
// a later Tail returns the same bytes for the events both saw, and another
// process's append is seen.
func TestTailIsTheStoresViewAndStaysAsItIs(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		hd := create(t, e.store, header("tail", ""))
		tail, next, err := hd.Tail(bg, 0)
		require.NoError(t, err)
		require.Empty(t, tail)
		require.Equal(t, int64(0), next)

		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1), userMessage(t, 1, "one")}))
		first, next, err := hd.Tail(bg, 1)
		require.NoError(t, err)
		require.Equal(t, []int64{1}, seqs(first))
		require.Equal(t, int64(2), next)
		kept := string(first[0].Data)

		require.NoError(t, hd.Append(bg, []session.Event{userMessage(t, 2, "two")}))
		second, next, err := hd.Tail(bg, 1)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 2}, seqs(second))
		require.Equal(t, int64(3), next)
		require.Len(t, first, 1, "an earlier tail does not grow")
		require.Equal(t, kept, string(first[0].Data))
		require.Same(t, &first[0].Data[0], &second[0].Data[0], "the same stored event is the same bytes")

		// Another process holding the handle appends: Tail sees it.
		ho := e.newStore(nil).Attach(hd.Ref())
		require.NoError(t, ho.Append(bg, []session.Event{userMessage(t, 3, "three")}))
		third, next, err := hd.Tail(bg, 2)
		require.NoError(t, err)
		require.Equal(t, []int64{2, 3}, seqs(third))
		require.Equal(t, int64(4), next)
		require.Equal(t, kept, string(first[0].Data), "a re-read leaves an earlier tail as it was")

		_, _, err = hd.Tail(bg, 5)
		require.ErrorIs(t, err, wire.ErrInvalidArgument)
	})
}
