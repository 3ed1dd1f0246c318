package soak

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// tick builds the soak's event at seq with nonce n.
func tick(t *testing.T, seq, n int64) session.Event {
	ev, err := session.NewEvent(EventType, seq, 1767225600000+seq, map[string]any{"seq": seq, "nonce": n})
	require.NoError(t, err)
	ev.Ignorable = true
	return ev
}

// checkRunner returns a runner over a store root holding session id with
// the given events.
func checkRunner(t *testing.T, id string, stored []session.Event) *runner {
	ctx := context.Background()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	h, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 1767225600000},
		jsonl.CreateOptions{HandleID: "h1", Owner: jsonl.Owner{WorkflowID: "session/" + id, RunID: "r1"}})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, stored))
	require.NoError(t, h.Close(ctx))
	r := &runner{cfg: Config{Progress: io.Discard}, rep: &report{out: io.Discard}, reader: st}
	r.cycles = &cycler{r: r}
	r.turns = &turnDriver{r: r}
	r.sessions = []*tracked{{id: id, lost: map[int64]bool{}, dups: map[int64]bool{}}}
	return r
}

// The check counts an acknowledged event the store does not hold, and one
// it holds with other content, as lost; a log that holds exactly what was
// acknowledged (and more) passes.
func TestCheckFindsLostEvents(t *testing.T) {
	stored := []session.Event{tick(t, 0, 1), tick(t, 1, 2), tick(t, 2, 3)}

	ok := checkRunner(t, "s", stored)
	ok.sessions[0].ack(stored[:2])
	require.EqualValues(t, 2, ok.check(context.Background(), true))
	require.Empty(t, ok.rep.snapshot())
	require.Empty(t, ok.sessions[0].lost)

	r := checkRunner(t, "s", stored)
	r.sessions[0].ack([]session.Event{tick(t, 0, 1), tick(t, 1, 99), tick(t, 2, 3), tick(t, 3, 4)})
	r.check(context.Background(), true)
	require.Equal(t, map[int64]bool{1: true, 3: true}, r.sessions[0].lost)
	require.Len(t, r.rep.snapshot(), 1)
	require.Contains(t, r.rep.snapshot()[0], "2 acknowledged events lost")
	sum := r.finish(Summary{Sessions: 1})
	require.Equal(t, 2, sum.Lost)
	require.False(t, sum.OK())
}

// storeHolds accepts a batch after a seq mismatch only when the store holds
// exactly it, and tells a batch that has not landed from a store that holds
// something else.
func TestStoreHoldsBatch(t *testing.T) {
	stored := []session.Event{tick(t, 0, 1), tick(t, 1, 2), tick(t, 2, 3)}
	r := checkRunner(t, "s", stored)
	ctx := context.Background()

	held, detail := r.storeHolds(ctx, "s", stored[1:])
	require.True(t, held)
	require.Empty(t, detail)

	held, detail = r.storeHolds(ctx, "s", []session.Event{tick(t, 3, 4)})
	require.False(t, held)
	require.Empty(t, detail, "a batch that starts at the end of the log has not landed")

	held, detail = r.storeHolds(ctx, "s", []session.Event{tick(t, 1, 2), tick(t, 2, 7)})
	require.False(t, held)
	require.Contains(t, detail, "holds another event at index 2")

	held, detail = r.storeHolds(ctx, "s", []session.Event{tick(t, 5, 4)})
	require.False(t, held)
	require.Contains(t, detail, "acknowledged events are missing")
}
