package jsonl_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Group stores (Handle.AppendGroup, FORMAT.md §4.6): a group of batches
// appended at the end, some of which an earlier, unrecorded run of the
// same store may have stored in another order or grouping.

// callerBatch is caller name's batch of n todo/write events, numbered from
// 0, stamped by the caller (the same time in every run of the store).
func callerBatch(t *testing.T, name string, n int) []session.Event {
	t.Helper()
	out := make([]session.Event, n)
	for i := range out {
		e, err := session.NewEvent(wire.TypeTodoWrite, int64(i), 5000, []byte(fmt.Sprintf(`{"text":"%s %d"}`, name, i)))
		require.NoError(t, err)
		out[i] = e
	}
	return out
}

// at returns a copy of events numbered from first.
func at(events []session.Event, first int64) []session.Event {
	out := session.CloneEvents(events)
	for i := range out {
		out[i].Seq = first + int64(i)
	}
	return out
}

// atEnd is the group of AtEnd batches, numbered from cursor in order, as
// the workflow numbers them.
func atEnd(cursor int64, batches ...[]session.Event) []jsonl.GroupBatch {
	out := make([]jsonl.GroupBatch, len(batches))
	for i, b := range batches {
		out[i] = jsonl.GroupBatch{Events: at(b, cursor), AtEnd: true}
		cursor += int64(len(b))
	}
	return out
}

// groupEnv is a log holding two events (the group's cursor is 2) and the
// batches A (2 events), B (3) and C (1).
type groupEnv struct {
	e       *env
	h       wire.Header
	hd      *jsonl.Handle
	a, b, c []session.Event
}

func newGroupEnv(t *testing.T, comp jsonl.Compression, id string) *groupEnv {
	g := &groupEnv{e: newEnv(t, comp, nil), h: header(id, "")}
	g.hd = create(t, g.e.store, g.h)
	require.NoError(t, g.hd.Append(bg, at(callerBatch(t, "base", 2), 0)))
	g.a, g.b, g.c = callerBatch(t, "A", 2), callerBatch(t, "B", 3), callerBatch(t, "C", 1)
	return g
}

// texts returns the data of the log's events from seq 2.
func (g *groupEnv) texts(t *testing.T) []string {
	t.Helper()
	got := readAll(t, g.e.store, g.h.ID)
	require.Equal(t, upTo(int64(len(got))), seqs(got))
	out := make([]string, 0, len(got))
	for _, e := range got[2:] {
		out = append(out, string(e.Data))
	}
	return out
}

// want is the texts of batches stored one after the other.
func want(batches ...[]session.Event) []string {
	var out []string
	for _, b := range batches {
		for _, e := range b {
			out = append(out, string(e.Data))
		}
	}
	return out
}

// prints is the held prints of events stored from first.
func prints(t *testing.T, first int64, events []session.Event) []jsonl.HeldPrint {
	t.Helper()
	out := make([]jsonl.HeldPrint, len(events))
	for i, e := range events {
		p, err := session.Print(e)
		require.NoError(t, err)
		out[i] = jsonl.HeldPrint{Seq: first + int64(i), Print: p}
	}
	return out
}

// The log ends at the cursor: the group is written in order, by one write.
func TestAppendGroupWritesInOrder(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-fresh")
		res, err := g.hd.AppendGroup(bg, 2, atEnd(2, g.a, g.b), 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, jsonl.GroupStored{First: []int64{2, 4}, Written: 5, Next: 7}, res)
		require.Equal(t, want(g.a, g.b), g.texts(t))
		require.Equal(t, int64(7), g.hd.NextSeq())
	})
}

// An unrecorded run stored [A, B]; the retry brings [B, A]: both are found
// where they are, nothing is written.
func TestAppendGroupOtherOrderAdopts(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-swap")
		require.NoError(t, g.hd.Append(bg, append(at(g.a, 2), at(g.b, 4)...)))
		path := g.e.logPath(g.h.Cwd, g.h.ID)
		before := readFile(t, path)

		res, err := g.hd.AppendGroup(bg, 2, atEnd(2, g.b, g.a), 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, jsonl.GroupStored{First: []int64{4, 2}, Adopted: 2, Next: 7}, res)
		require.Equal(t, before, readFile(t, path), "nothing written")
		require.Equal(t, int64(7), g.hd.NextSeq())
	})
}

// The retry brings B only: B is found, A's events are reported unclaimed
// (by seq and print); A, coming later at the cursor after them, is written
// anew only if the workflow does not claim them (its business).
func TestAppendGroupSubsetReportsUnclaimed(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-subset")
		require.NoError(t, g.hd.Append(bg, append(at(g.a, 2), at(g.b, 4)...)))

		res, err := g.hd.AppendGroup(bg, 2, atEnd(2, g.b), 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, jsonl.GroupStored{First: []int64{4}, Adopted: 1, Unclaimed: prints(t, 2, g.a), Next: 7}, res)
		require.Equal(t, want(g.a, g.b), g.texts(t))
	})
}

// The retry brings [C, B, A]: A and B are found, C is written after them.
func TestAppendGroupNewBatchWrittenAfterTheHeld(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-more")
		require.NoError(t, g.hd.Append(bg, append(at(g.a, 2), at(g.b, 4)...)))

		res, err := g.hd.AppendGroup(bg, 2, atEnd(2, g.c, g.b, g.a), 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, jsonl.GroupStored{First: []int64{7, 4, 2}, Adopted: 2, Written: 1, Next: 8}, res)
		require.Equal(t, want(g.a, g.b, g.c), g.texts(t))
	})
}

// The earlier write was cut short: A whole and the first of B's three
// events. B's head is found and completed, A is found.
func TestAppendGroupCompletesAHeldHead(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-head")
		require.NoError(t, g.hd.Append(bg, append(at(g.a, 2), at(g.b[:1], 4)...)))

		res, err := g.hd.AppendGroup(bg, 2, atEnd(2, g.b, g.c, g.a), 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, jsonl.GroupStored{First: []int64{4, 7, 2}, Adopted: 2, Written: 3, Next: 8}, res)
		require.Equal(t, want(g.a, g.b, g.c), g.texts(t))
	})
}

// An AtEnd batch is matched in every field but seq: the same events at
// another time are another caller's, written anew, and the held ones
// stay unclaimed.
func TestAppendGroupMatchesTime(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-time")
		require.NoError(t, g.hd.Append(bg, at(g.a, 2)))
		a2 := later(g.a)

		res, err := g.hd.AppendGroup(bg, 2, atEnd(2, a2), 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, jsonl.GroupStored{First: []int64{4}, Written: 2, Unclaimed: prints(t, 2, g.a), Next: 6}, res)
		require.Equal(t, want(g.a, a2), g.texts(t))
	})
}

// A batch whose caller chose its seqs, beside an AtEnd one: found at its
// seqs when held there (equal but for time), written at them when they
// continue the group, refused otherwise, with nothing written.
func TestAppendGroupSeqChosenBatch(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-mixed")
		require.NoError(t, g.hd.Append(bg, append(at(g.a, 2), at(g.b, 4)...)))

		// Held: B at its seqs 4-6 (a later time is a rerun's), A by content.
		res, err := g.hd.AppendGroup(bg, 2, []jsonl.GroupBatch{{Events: later(at(g.b, 4))}, {Events: at(g.a, 5), AtEnd: true}}, 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, jsonl.GroupStored{First: []int64{4, 2}, Adopted: 2, Next: 7}, res)

		// Written: C at the end, then a batch continuing it at 8.
		res, err = g.hd.AppendGroup(bg, 7, []jsonl.GroupBatch{{Events: at(g.c, 7), AtEnd: true}, {Events: at(g.a, 8)}}, 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, jsonl.GroupStored{First: []int64{7, 8}, Written: 3, Next: 10}, res)
		require.Equal(t, want(g.a, g.b, g.c, g.a), g.texts(t))

		// Refused: a batch at seqs the log holds other events at.
		path := g.e.logPath(g.h.Cwd, g.h.ID)
		before := readFile(t, path)
		_, err = g.hd.AppendGroup(bg, 10, []jsonl.GroupBatch{{Events: at(g.c, 10), AtEnd: true}, {Events: at(g.b, 8)}}, 64, 64, nil)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.Equal(t, before, readFile(t, path))
	})
}

// The bounds: a cursor past the log's end, more held events than maxTail,
// more unclaimed than maxUnclaimed are SeqMismatch, nothing written.
func TestAppendGroupRefusals(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-bounds")
		require.NoError(t, g.hd.Append(bg, append(at(g.a, 2), at(g.b, 4)...)))
		path := g.e.logPath(g.h.Cwd, g.h.ID)
		before := readFile(t, path)

		_, err := g.hd.AppendGroup(bg, 8, atEnd(8, g.c), 64, 64, nil)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "group-bounds": the group follows seq 8, the log ends at 7`)
		_, err = g.hd.AppendGroup(bg, 2, atEnd(2, g.a, g.b), 4, 64, nil)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "group-bounds": 5 events are stored past seq 2, more than the 4 a group store matches`)
		_, err = g.hd.AppendGroup(bg, 2, atEnd(2, g.a), 64, 2, nil)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "group-bounds": 3 events stored past seq 2 are no batch's, more than 2`)
		require.Equal(t, before, readFile(t, path))
	})
}

// ownTypes are the barrier types the activity passes: the types the
// session workflow's own stores write.
var ownTypes = []string{"turn/start", "turn/end", "step/start", "step/end", "agent/inbox/spliced"}

// turnOpening is a turn's opening batch numbered from first, as the
// workflow stores it: turn/start, step/start, the claimed user/message.
func turnOpening(t *testing.T, first int64) []session.Event {
	t.Helper()
	var out []session.Event
	for i, e := range []struct{ typ, data string }{
		{"turn/start", `{"turn":1}`},
		{"step/start", `{"turn":1,"step":1}`},
		{"user/message", `{"id":"m-1","role":"user","content":[{"type":"text","text":"hi"}]}`},
	} {
		ev, err := session.NewEvent(e.typ, first+int64(i), 6000, json.RawMessage(e.data))
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// A late store of an abandoned run (its cursor 2) lands after another run
// opened a turn at 2: its batch, not held, would be written inside the
// running turn. The turn's opening is no batch's and of a barrier type:
// the store is refused and writes nothing, for an AtEnd batch and for one
// whose caller chose the seqs after the turn's opening.
func TestAppendGroupRefusesToWriteAfterABarrier(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-barrier")
		require.NoError(t, g.hd.Append(bg, turnOpening(t, 2)))
		path := g.e.logPath(g.h.Cwd, g.h.ID)
		before := readFile(t, path)

		_, err := g.hd.AppendGroup(bg, 2, atEnd(2, g.a), 64, 64, ownTypes)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.EqualError(t, err, `append seq mismatch for "group-barrier": the turn/start stored at seq 2 past the group's cursor is no batch's: nothing is written after it`)
		_, err = g.hd.AppendGroup(bg, 2, []jsonl.GroupBatch{{Events: at(g.a, 5)}}, 64, 64, ownTypes)
		requireCode(t, err, wire.ErrSeqMismatch)
		require.Equal(t, before, readFile(t, path), "nothing written")

		// An append held before the turn, the group's other batch not held:
		// refused too.
		g2 := newGroupEnv(t, comp, "group-barrier-2")
		require.NoError(t, g2.hd.Append(bg, append(at(g2.a, 2), turnOpening(t, 4)...)))
		_, err = g2.hd.AppendGroup(bg, 2, atEnd(2, g2.a, g2.b), 64, 64, ownTypes)
		require.EqualError(t, err, `append seq mismatch for "group-barrier-2": the turn/start stored at seq 4 past the group's cursor is no batch's: nothing is written after it`)
		require.Equal(t, int64(7), g2.hd.NextSeq())

		// Without barrier types, today's store: written after the turn.
		res, err := g.hd.AppendGroup(bg, 2, atEnd(2, g.a), 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, []int64{5}, res.First)
	})
}

// A run whose earlier, unrecorded attempt stored [A, a turn's opening]
// brings A again: A is found, nothing is written, and the group's view of
// the log ends at the turn's opening (Next), which is not reported
// unclaimed: the run's own turn reconciles it. Unclaimed events before the
// barrier are reported as before.
func TestAppendGroupHeldBeforeABarrierEndsThere(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		g := newGroupEnv(t, comp, "group-before-barrier")
		require.NoError(t, g.hd.Append(bg, append(append(at(g.a, 2), at(g.b, 4)...), turnOpening(t, 7)...)))
		path := g.e.logPath(g.h.Cwd, g.h.ID)
		before := readFile(t, path)

		res, err := g.hd.AppendGroup(bg, 2, atEnd(2, g.b), 64, 64, ownTypes)
		require.NoError(t, err)
		require.Equal(t, jsonl.GroupStored{First: []int64{4}, Adopted: 1, Unclaimed: prints(t, 2, g.a), Next: 7}, res)
		require.Equal(t, before, readFile(t, path), "nothing written")

		// Without barrier types, today's report: the opening unclaimed too.
		res, err = g.hd.AppendGroup(bg, 2, atEnd(2, g.b), 64, 64, nil)
		require.NoError(t, err)
		require.Equal(t, 10, int(res.Next))
		require.Len(t, res.Unclaimed, 5)
	})
}
