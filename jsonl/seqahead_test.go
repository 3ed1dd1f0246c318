package jsonl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestAppendPastTheEndIsSeqMismatch pins that a batch whose first seq lies
// beyond the end of the log is refused whole: a store that resumed at
// max(cursor, first seq) would store it after a hole and lose the events in
// between without a word. The refusal is SeqMismatch naming the expected
// seq, the file stays byte for byte what it was, the cursor does not move,
// and the batch at the right seq is stored afterwards. It holds for a
// handle that wrote the log, for one attached by another process (its
// cursor comes from the file), and for a created session with no log yet.
func TestAppendPastTheEndIsSeqMismatch(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("seq-ahead", "/w")
		hd := create(t, e.store, h)
		require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		for _, first := range []int64{7, 12} {
			err := hd.Append(bg, []session.Event{turnStart(t, first, 2), turnEnd(t, first+1, 2)})
			requireCode(t, err, wire.ErrSeqMismatch)
			var sm *session.SeqMismatchError
			require.ErrorAs(t, err, &sm)
			require.Equal(t, int64(6), sm.Expected)
			require.Equal(t, int64(0), sm.Index)
			require.Equal(t, first, sm.Got)
			require.Equal(t, before, readFile(t, path), "a refused batch leaves the file as it was")
			require.Equal(t, int64(6), hd.NextSeq())
		}
		require.EqualError(t, hd.Append(bg, []session.Event{turnStart(t, 7, 2)}),
			`append seq mismatch for "seq-ahead": expected 6 at index 0, got 7`)

		// Another process attaching the handle learns its cursor from the
		// file, and refuses the same way.
		other := e.newStore(nil).Attach(hd.Ref())
		err := other.Append(bg, []session.Event{turnStart(t, 7, 2)})
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "seq-ahead": expected 6 at index 0, got 7`)
		require.Equal(t, before, readFile(t, path))

		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 6, 2), turnEnd(t, 7, 2)}))
		require.Equal(t, upTo(8), seqs(readAll(t, e.newStore(nil), h.ID)))
		require.NoError(t, hd.Close(bg))

		// A created session with no log yet starts at 0: a first batch at
		// 1 materializes nothing.
		h2 := header("seq-ahead-new", "/w")
		hd2 := create(t, e.store, h2)
		err = hd2.Append(bg, []session.Event{turnStart(t, 1, 1)})
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "seq-ahead-new": expected 0 at index 0, got 1`)
		require.False(t, hd2.Materialized())
		noSuchFile(t, e.logPath(h2.Cwd, h2.ID))
		require.NoError(t, hd2.Append(bg, []session.Event{turnStart(t, 0, 1)}))
		require.Equal(t, upTo(1), seqs(readAll(t, e.newStore(nil), h2.ID)))
		require.NoError(t, hd2.Close(bg))
	})
}
