package jsonl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
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
		requireCode(t, err, wire.ErrSeqMismatch)
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
		changed[3] = ev(t, wire.TypeStepEnd, 3, `{"turn":1,"step":2}`)
		err := hd.AppendRerun(bg, changed)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "rerun-other": expected 4 at index 0, got 0`)

		shifted := later(events[1:])
		shifted[0] = stepStart(t, 1, 1, 2)
		err = hd.AppendRerun(bg, shifted)
		requireCode(t, err, wire.ErrSeqMismatch)

		require.Equal(t, before, readFile(t, path))
		require.Equal(t, int64(4), hd.NextSeq())
	})
}

// opening is a turn's opening batch at seq 0: turn/start, step/start and
// the user messages of texts.
func opening(t *testing.T, texts ...string) []session.Event {
	out := []session.Event{turnStart(t, 0, 1), stepStart(t, 1, 1, 1)}
	for i, text := range texts {
		out = append(out, userMessage(t, int64(2+i), text))
	}
	return out
}

// AppendReconcile (FORMAT.md §4.6): a batch built again with other claims
// than the stored one writes nothing and gets the stored events back; the
// log is unchanged.
func TestAppendReconcileOtherContentReturnsHeld(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("reconcile-other", "")
		hd := create(t, e.store, h)
		stored := opening(t, "a", "b")
		require.NoError(t, hd.AppendRerun(bg, stored))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		held, err := hd.AppendReconcile(bg, later(opening(t, "a", "c", "d")), 16)
		require.NoError(t, err)
		require.Equal(t, lines(t, stored...), lines(t, held...), "the stored events, with their own time")
		require.Equal(t, before, readFile(t, path))
		require.Equal(t, int64(4), hd.NextSeq())

		// Held is the caller's copy.
		held[0].Type = "changed"
		require.Equal(t, "turn/start", readAll(t, e.store, h.ID)[0].Type)
	})
}

// A batch that is the head of what is stored, with more stored after it:
// the whole stored run comes back (AppendRerun accepts it silently).
func TestAppendReconcileBatchHeldWithMoreReturnsHeld(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("reconcile-more", "")
		hd := create(t, e.store, h)
		stored := opening(t, "a", "b", "c")
		require.NoError(t, hd.AppendRerun(bg, stored))

		held, err := hd.AppendReconcile(bg, later(opening(t, "a")), 16)
		require.NoError(t, err)
		require.Equal(t, lines(t, stored...), lines(t, held...))

		require.NoError(t, hd.AppendRerun(bg, later(opening(t, "a"))), "AppendRerun's rule is unchanged")
		require.Equal(t, int64(5), hd.NextSeq())
	})
}

// A stored head equal but for time: the rest is appended and nothing is
// held; an exact re-append holds nothing either.
func TestAppendReconcileStoredHeadAppendsTheRest(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("reconcile-head", "")
		hd := create(t, e.store, h)
		require.NoError(t, hd.AppendRerun(bg, opening(t, "a")))

		held, err := hd.AppendReconcile(bg, later(opening(t, "a", "b")), 16)
		require.NoError(t, err)
		require.Nil(t, held)
		got := readAll(t, e.store, h.ID)
		require.Equal(t, upTo(4), seqs(got))
		require.Equal(t, lines(t, opening(t, "a", "b")[:3]...), lines(t, got[:3]...), "the first run's events keep their time")

		held, err = hd.AppendReconcile(bg, opening(t, "a", "b"), 16)
		require.NoError(t, err)
		require.Nil(t, held)
		require.Equal(t, int64(4), hd.NextSeq())
	})
}

// More held events than the caller's bound, or a batch above the cursor:
// the seq mismatch, nothing written.
func TestAppendReconcileRefusals(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := header("reconcile-refused", "")
		hd := create(t, e.store, h)
		require.NoError(t, hd.AppendRerun(bg, opening(t, "a", "b")))
		path := e.logPath(h.Cwd, h.ID)
		before := readFile(t, path)

		held, err := hd.AppendReconcile(bg, opening(t, "c"), 3)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "reconcile-refused": expected 4 at index 0, got 0`)
		require.Nil(t, held)

		held, err = hd.AppendReconcile(bg, []session.Event{stepEnd(t, 5, 1, 1)}, 16)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.Nil(t, held)
		require.Equal(t, before, readFile(t, path))
	})
}
