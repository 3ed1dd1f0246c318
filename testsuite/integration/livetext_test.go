package integration

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

// liveFilesOf lists the live files of a session's directory.
func liveFilesOf(t *testing.T, w *world, id string) []string {
	t.Helper()
	dir, err := w.store.SessionDir(w.ctx(), id)
	require.NoError(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if livetext.IsLiveFile(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// A kill -9 of the worker while the model streams leaves its live file
// behind, with no end marker; the next worker's attempt replaces it, a
// follower sees the reset, and WatchTurn with the live source restarts
// the text and never repeats it; once the message is stored, the end
// comes and no live file is left.
func TestCrashMidStreamLiveText(t *testing.T) {
	t.Parallel()
	workerBin, _ := workerBinaries(t)
	w := newWorld(t, shared, jsonl.CompressionZstd)
	text := strings.Repeat("abcdefghij", 6)
	answer := scripted.Response{Text: text, ChunkSize: 3, DelayMs: 100}
	stalled := scriptFile(t, answer.WithStall(3))
	script := scriptFile(t, answer)
	first := w.startProc(workerBin, "--provider-script", stalled, "--log-level", "warn")
	id := w.id("crash-live")
	run, in := w.startTurn(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Options: crashOptions}, "stream it")

	src := livetext.Source{Store: w.store}
	events := make(chan wire.LiveEvent, 256)
	go func() {
		for e, err := range src.FollowLive(w.ctx(), id) {
			if err != nil {
				return
			}
			events <- e
		}
	}()
	next := func() wire.LiveEvent {
		select {
		case e := <-events:
			return e
		case <-time.After(30 * time.Second):
			t.Fatal("no live event")
		}
		return wire.LiveEvent{}
	}
	shown := ""
	for len(shown) < 9 {
		e := next()
		require.Equal(t, wire.LiveEvent{Event: "chunk", Turn: 1, Step: 1, Attempt: 1, Offset: int64(len(shown)), Text: e.Text, Kind: "text"}, e)
		shown += e.Text
	}
	require.Equal(t, text[:9], shown)
	require.Equal(t, []string{"turn/start", "step/start", "user/message"}, eventTypes(readAll(t, w, id)),
		"the text is live before anything of the stream is stored")
	first.kill()
	require.Equal(t, []string{"live.1.1.1"}, liveFilesOf(t, w, id), "the killed worker's live file stays, stale")

	w.startProc(workerBin, "--provider-script", script, "--log-level", "warn")
	var got []sfclient.TurnProgress
	for p, err := range w.client().WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 50 * time.Millisecond, Events: w.store, Live: src}) {
		require.NoError(t, err)
		got = append(got, p)
	}
	require.Equal(t, sfclient.ProgressEnded, got[len(got)-1].Kind)
	require.Equal(t, "completed", got[len(got)-1].Info.Reason.Kind)
	watched := ""
	for _, p := range got {
		if p.Restart {
			watched = ""
		}
		watched += p.Text
	}
	require.Equal(t, text, watched, "the watch's text adds up to the stored answer")

	// The follower: a reset naming the next attempt, its text from 0, the end.
	e := next()
	require.Equal(t, "reset", e.Event)
	require.Equal(t, int64(1), e.Turn)
	require.GreaterOrEqual(t, e.Attempt, int32(2))
	live := ""
	for {
		e := next()
		if e.Event == "end" {
			require.Equal(t, wire.LiveEvent{Event: "end", Turn: 1, Step: 1, Attempt: e.Attempt}, e)
			break
		}
		require.Equal(t, "chunk", e.Event)
		require.Equal(t, int64(len(live)), e.Offset, "no chunk twice")
		live += e.Text
	}
	require.Equal(t, text, live)
	require.Empty(t, liveFilesOf(t, w, id), "no live file is left once the message is stored")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
}
