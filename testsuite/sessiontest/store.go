package sessiontest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Persisted writes the "persisted session" fixture of the S0 cases: create,
// append [turn/start{1}@0, turn/end{completed}@1], close.
func Persisted(t *testing.T, st *jsonl.Store, id string, cwd string) {
	t.Helper()
	WriteStored(t, st, wire.Header{ID: id, Cwd: cwd, CreatedAt: 1}, 0, []session.Event{TurnStart(t, 0, 1), TurnEnd(t, 1, 1)})
}

// WriteStored creates a session directly in the store with events.
func WriteStored(t *testing.T, st *jsonl.Store, hdr wire.Header, inherited int64, events []session.Event) {
	t.Helper()
	ctx := context.Background()
	hdr.Version = wire.FormatVersion
	h, err := st.Create(ctx, hdr, jsonl.CreateOptions{HandleID: "fixture-" + hdr.ID, InheritedEventCount: inherited})
	require.NoError(t, err)
	if len(events) > 0 {
		require.NoError(t, h.Append(ctx, events))
	} else {
		require.NoError(t, h.Flush(ctx))
	}
	require.NoError(t, h.Close(ctx))
}

// Stored reads a session's events through a read handle.
func Stored(t *testing.T, st *jsonl.Store, id string) []session.Event {
	t.Helper()
	ctx := context.Background()
	h, err := st.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	defer h.Close(ctx)
	evs, err := h.Read(ctx, 0, -1)
	require.NoError(t, err)
	return evs
}

// Types lists the types of evs, in order.
func Types(evs []session.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// RequireContiguous asserts that the seq of each event is its index.
func RequireContiguous(t *testing.T, evs []session.Event) {
	t.Helper()
	for i, e := range evs {
		require.Equal(t, int64(i), e.Seq, "seq at index %d", i)
	}
}

// probeSeq numbers the probe handles of RequireReleased and RequireErased.
var probeSeq atomic.Int64

// RequireReleased asserts that the session is stored, that no lease is held
// on it, and that a new write open succeeds at once (the probe's handle is
// closed again). A session that is not stored fails: use RequireErased for
// one that must be gone.
func RequireReleased(t *testing.T, st *jsonl.Store, id string) {
	t.Helper()
	ctx := context.Background()
	snap, err := st.Stat(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, snap, "session %q is not stored", id)
	require.False(t, snap.Pending, "session %q is still pending", id)
	lease, err := st.LeaseOf(ctx, id)
	require.NoError(t, err)
	require.Nil(t, lease, "a lease is still held on %q", id)
	h, err := st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: fmt.Sprintf("probe-%d", probeSeq.Add(1))})
	require.NoError(t, err, "a write open of %q failed", id)
	require.Equal(t, jsonl.AccessWrite, h.Access())
	require.NoError(t, h.Close(ctx))
}

// RequireErased asserts that the session left nothing behind: no log (stat
// reads nothing, a write open is refused `not found`), no lease, and the id
// can be created again (the probe's create is closed unmaterialized, so it
// is erased again).
func RequireErased(t *testing.T, st *jsonl.Store, id string) {
	t.Helper()
	ctx := context.Background()
	snap, err := st.Stat(ctx, id)
	require.NoError(t, err)
	require.Nil(t, snap, "session %q is still stored", id)
	lease, err := st.LeaseOf(ctx, id)
	require.NoError(t, err)
	require.Nil(t, lease, "a lease is still held on %q", id)
	hid := fmt.Sprintf("probe-%d", probeSeq.Add(1))
	_, err = st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: hid})
	require.ErrorIs(t, err, wire.ErrNotFound)
	require.Contains(t, err.Error(), "not found")
	c, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 1}, jsonl.CreateOptions{HandleID: hid})
	require.NoError(t, err, "the id %q is not reusable", id)
	require.NoError(t, c.Close(ctx))
	snap, err = st.Stat(ctx, id)
	require.NoError(t, err)
	require.Nil(t, snap)
}

// CorruptFirstEvent replaces the first event line of a raw log with a
// damaged record, so damage sits before the last turn/end.
func CorruptFirstEvent(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(raw), "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	lines[1] = "{\"type\":\"turn/start\",\"seq\":0,\"ti\n"
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600))
}
