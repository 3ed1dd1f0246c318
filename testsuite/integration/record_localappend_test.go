package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths,
		recordPath{name: "append-local", run: recordAppendLocal},
		recordPath{name: "append-activity-option", run: recordAppendActivityOption},
		recordPath{name: "append-at-end", run: recordAppendAtEnd},
	)
}

// recordAppendLocal: the append-local-activity version: two appends stored
// by the local activity (a marker each, no AppendBatch activity), then a
// batch above 256 KiB (maxBatchBytes raised) stored by the AppendBatch
// activity, one more local append, Dispose.
func recordAppendLocal(t *testing.T, w *world) []fixture {
	id := w.id("rec-local")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, Options: &wire.Options{MaxBatchBytes: 1 << 20}})
	w.awaitLive(id)
	turn := liveTurn(t, 0, 1, "hello")
	w.appendEvents(id, turn[:2])
	w.appendEvents(id, turn[2:])
	big, err := session.NewEvent(wire.TypeTodoWrite, 5, 1_700_000_000_005, map[string]any{"text": strings.Repeat("x", 300<<10)})
	require.NoError(t, err)
	w.appendEvents(id, []session.Event{big})
	w.appendEvents(id, liveTurn(t, 6, 2, "after the large batch"))
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	return only("append-local", wid, run)
}

// recordAppendActivityOption: options.activityAppends: the version marker
// taken, every append stored by the AppendBatch activity.
func recordAppendActivityOption(t *testing.T, w *world) []fixture {
	id := w.id("rec-activity-appends")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, Options: &wire.Options{ActivityAppends: true}})
	w.awaitLive(id)
	turn := liveTurn(t, 0, 1, "hello")
	w.appendEvents(id, turn[:2])
	w.appendEvents(id, turn[2:])
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	return only("append-activity-option", wid, run)
}

// recordAppendAtEnd: the append-at-end version: two Appends at the end
// (AtEnd), one at a time, each stored by a group store of the local
// activity, then an Append whose caller chose its seqs after them (the
// seqs the second AtEnd's result names), Dispose.
func recordAppendAtEnd(t *testing.T, w *world) []fixture {
	id := w.id("rec-atend")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id})
	w.awaitLive(id)
	turn := liveTurn(t, 0, 1, "hello")
	first := w.appendAtEnd(id, turn[:2])
	require.Equal(t, int64(2), first.NextSeq)
	second := w.appendAtEnd(id, renumbered(turn[2:], 0))
	require.Equal(t, int64(5), second.NextSeq)
	w.appendEvents(id, liveTurn(t, second.NextSeq, 2, "after the end"))
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	return only("append-at-end", wid, run)
}

// renumbered returns a copy of events numbered from first.
func renumbered(events []session.Event, first int64) []session.Event {
	out := session.CloneEvents(events)
	for i := range out {
		out[i].Seq = first + int64(i)
	}
	return out
}
