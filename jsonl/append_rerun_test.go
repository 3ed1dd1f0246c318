package jsonl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

// later returns a copy of events with every time moved later, as a store
// run again by a later attempt of its workflow task stamps them.
func later(events []session.Event) []session.Event {
	out := session.CloneEvents(events)
	for i := range out {
		out[i].Time += 7000
	}
	return out
}

// AppendRerun (FORMAT.md §4.6): the same events with a later time are not
// written again; plain Append still refuses them.
func TestAppendRerunSameEventsLaterTimeWritesNothing(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("rerun-same", "")
		hd := create(t, e.store, h)
		events := completedTurn(t, 0, 1)
		require.NoError(t, hd.AppendRerun(bg, events))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		require.NoError(t, hd.AppendRerun(bg, later(events)))
		require.Equal(t, before, readFile(t, path))
		require.Equal(t, int64(6), hd.NextSeq())
		require.Equal(t, events[0].Time, readAll(t, e.store, h.ID)[0].Time, "the stored time stays")

		err := hd.Append(bg, later(events))
		requireCode(t, err, jsonl.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "rerun-same": expected 6 at index 0, got 0`)
		require.Equal(t, before, readFile(t, path))
	})
}

// A batch whose head is stored and whose rest is new: the rest is appended,
// each seq once.
func TestAppendRerunStoredHeadAppendsTheRest(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("rerun-head", "")
		hd := create(t, e.store, h)
		events := append(completedTurn(t, 0, 1), completedTurn(t, 6, 2)...)
		require.NoError(t, hd.AppendRerun(bg, events[:3]))

		require.NoError(t, hd.AppendRerun(bg, later(events)))
		require.Equal(t, int64(12), hd.NextSeq())
		got := readAll(t, e.store, h.ID)
		require.Equal(t, upTo(12), seqs(got))
		require.Equal(t, types(events), types(got))
		require.Equal(t, events[2].Time, got[2].Time, "stored by the first run")
		require.Equal(t, events[3].Time+7000, got[3].Time, "stored by the second")

		// A fresh store sees the same log.
		require.Equal(t, upTo(12), seqs(readAll(t, e.newStore(nil), h.ID)))
	})
}

// Any difference but time is a seq mismatch and writes nothing: in a stored
// event, or a batch that starts inside the log and does not match it.
func TestAppendRerunOtherContentIsSeqMismatch(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("rerun-other", "")
		hd := create(t, e.store, h)
		events := completedTurn(t, 0, 1)
		require.NoError(t, hd.AppendRerun(bg, events[:4]))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		changed := later(events)
		changed[3] = ev(t, session.TypeStepEnd, 3, `{"turn":1,"step":2}`)
		err := hd.AppendRerun(bg, changed)
		requireCode(t, err, jsonl.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "rerun-other": expected 4 at index 0, got 0`)

		shifted := later(events[1:])
		shifted[0] = stepStart(t, 1, 1, 2)
		err = hd.AppendRerun(bg, shifted)
		requireCode(t, err, jsonl.ErrSeqMismatch)

		require.Equal(t, before, readFile(t, path))
		require.Equal(t, int64(4), hd.NextSeq())
	})
}
