package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths, recordPath{name: "fork-at-turn", run: recordForkAtTurn})
}

// recordForkAtTurn: a live session with two turns is forked at turn 1
// while it runs: the fork-at-turn version marker, ResolveFork (the parent
// read, never written), CreateHandle, StoreSeed (the prefix through turn
// 1's turn/end and the inherited end-seed marker), publication; one append
// to the fork, Dispose. The parent is left as it was.
func recordForkAtTurn(t *testing.T, w *world) []fixture {
	parent, child := w.id("rec-fork-parent"), w.id("rec-fork")
	w.create(wire.CreateSessionRequest{SessionID: parent, Meta: &wire.SessionMeta{Cwd: "/work/p"}})
	w.awaitLive(parent)
	w.appendEvents(parent, liveTurn(t, 0, 1, "one"))
	w.appendEvents(parent, liveTurn(t, 5, 2, "two"))
	run := w.create(wire.CreateSessionRequest{SessionID: child, Fork: &wire.ForkSeed{ParentSessionID: parent, AtTurn: 1}})
	w.awaitLive(child)
	info := w.waitReady(child)
	require.Equal(t, int64(6), info.NextSeq, "turn 1's five events and the marker")
	require.Equal(t, int64(5), info.InheritedEventCount)
	require.Equal(t, parent, info.Header.ParentSession)
	require.Equal(t, "/work/p", info.Header.Cwd)
	w.appendEvents(child, liveTurn(t, 6, 2, "forked"))
	w.dispose(child)
	require.NoError(t, run.Get(w.ctx(), nil))
	w.dispose(parent)
	require.Len(t, w.storedEvents(parent), 10, "the parent is untouched")
	forked := w.storedEvents(child)
	require.Len(t, forked, 11)
	inherited, err := forked[5].IsInheritedMarker()
	require.NoError(t, err)
	require.True(t, inherited)
	return only("fork-at-turn", wire.WorkflowID(child), run)
}
