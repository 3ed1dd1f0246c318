package livetext_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// storedSession creates session id in st with one event and closes its
// handle.
func storedSession(t *testing.T, st *jsonl.Store, id string) {
	t.Helper()
	ctx := context.Background()
	h, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 5, Cwd: "/w"},
		jsonl.CreateOptions{HandleID: "h-" + id, Owner: jsonl.Owner{WorkflowID: "session/" + id, RunID: "r"}})
	require.NoError(t, err)
	e, err := session.NewEvent(wire.TypeTurnStart, 0, 6, wire.TurnStart{Turn: 1})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, []session.Event{e}))
	require.NoError(t, h.Close(ctx))
}

func TestASourceFollowsASessionFoundByTheStoreLookup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir()})
	require.NoError(t, err)
	storedSession(t, st, "s/1")
	src := livetext.Source{Store: st, Options: noPoll}
	n := 0
	for _, err := range src.FollowLive(ctx, "nobody") {
		require.ErrorIs(t, err, wire.ErrNotFound)
		n++
	}
	require.Equal(t, 1, n)

	dir, err := st.SessionDir(ctx, "s/1")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(st.Root(), "--w--", "s~002F1"), dir)
	out := make(chan wire.LiveEvent, 16)
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e, err := range src.FollowLive(fctx, "s/1") {
			if err != nil {
				return
			}
			out <- e
		}
	}()
	defer func() { stop(); <-done }()
	w, err := livetext.Start(dir, 1, 1, 1)
	require.NoError(t, err)
	w.Chunk("text", "via the store")
	require.Equal(t, chunk(1, 1, 1, 0, "text", "via the store"), next(t, out, time.Second))
	require.NoError(t, w.End(true))
	require.Equal(t, marker("end", 1, 1, 1), next(t, out, time.Second))
}

// TestTheStoreToleratesLiveFiles: a live file beside the log (a running
// call's, or a crashed worker's) is no damage: list, stat, inspect, read,
// open for write and migrate serve the session as without it, and a delete
// removes it with the session.
func TestTheStoreToleratesLiveFiles(t *testing.T) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionZstd, jsonl.CompressionNone} {
		t.Run(string(comp), func(t *testing.T) {
			ctx := context.Background()
			st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: comp})
			require.NoError(t, err)
			storedSession(t, st, "s1")
			dir, err := st.SessionDir(ctx, "s1")
			require.NoError(t, err)
			w, err := livetext.Start(dir, 1, 1, 1)
			require.NoError(t, err)
			w.Chunk("text", "streaming")
			// A stale, torn file of a crashed attempt too.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "live.1.1.7"), []byte(`{"live":1,"tu`), 0o600))

			list, err := st.List(ctx)
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Nil(t, list[0].Problem)
			for row, err := range st.Rows(ctx, "") {
				require.NoError(t, err)
				require.Nil(t, row.Problem)
			}
			snap, err := st.Stat(ctx, "s1")
			require.NoError(t, err)
			require.NotNil(t, snap)
			ins, err := st.Inspect(ctx, "s1")
			require.NoError(t, err)
			require.Len(t, ins.Events, 1)
			require.Zero(t, ins.TornBytes)
			evs, err := st.ReadEvents(ctx, "s1", 0, -1)
			require.NoError(t, err)
			require.Len(t, evs, 1)
			mig, err := st.Migrate(ctx, "s1", jsonl.MigrateOptions{})
			require.NoError(t, err)
			require.Equal(t, mig.From, mig.To, "a current log is not migrated")
			h, err := st.Open(ctx, "s1", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "h2", Owner: jsonl.Owner{WorkflowID: "session/s1", RunID: "r2"}})
			require.NoError(t, err)
			require.NoError(t, h.Close(ctx))

			require.NoError(t, st.Delete(ctx, "s1"))
			_, err = os.Lstat(dir)
			require.ErrorIs(t, err, os.ErrNotExist)
			ents, err := os.ReadDir(filepath.Join(st.Root(), ".deleted"))
			require.NoError(t, err)
			require.Empty(t, ents, "the delete removed the live files with the session")
			require.NoError(t, w.End(true), "a writer whose session was deleted fails nothing")
		})
	}
}

// TestAMigrationLeavesLiveFilesAlone: a format v0 session with a live file
// beside its log migrates to v3; the live file stays as it was and is not
// migrated, listed or reported.
func TestAMigrationLeavesLiveFilesAlone(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	v0, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, Format: jsonl.FormatV0})
	require.NoError(t, err)
	h, err := v0.Create(ctx, wire.Header{Version: wire.FormatVersionV0, ID: "old", CreatedAt: 5, Cwd: "/w"},
		jsonl.CreateOptions{HandleID: "h-old", Owner: jsonl.Owner{WorkflowID: "session/old", RunID: "r"}})
	require.NoError(t, err)
	e, err := session.NewEvent(wire.TypeTurnStart, 0, 6, wire.TurnStart{Turn: 1})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, []session.Event{e}))
	require.NoError(t, h.Close(ctx))
	dir, err := v0.SessionDir(ctx, "old")
	require.NoError(t, err)
	live := filepath.Join(dir, "live.1.1.1")
	body := `{"live":1,"turn":1,"step":1,"attempt":1}` + "\n" + `{"kind":"text","offset":0,"text":"x"}` + "\n"
	require.NoError(t, os.WriteFile(live, []byte(body), 0o600))

	v3, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	mig, err := v3.Migrate(ctx, "old", jsonl.MigrateOptions{})
	require.NoError(t, err)
	require.Equal(t, "session.jsonl", mig.From)
	require.Equal(t, "session.v3.jsonl", mig.To)
	b, err := os.ReadFile(live)
	require.NoError(t, err)
	require.Equal(t, body, string(b))
	list, err := v3.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Nil(t, list[0].Problem)
	evs, err := v3.ReadEvents(ctx, "old", 0, -1)
	require.NoError(t, err)
	require.Len(t, evs, 1)
}
