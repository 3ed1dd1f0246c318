package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLiveSmoke runs the live text measurement with tiny sizes against a
// real dev server: every chunk reaches the live follower and the watch,
// and the report holds the figures.
func TestLiveSmoke(t *testing.T) {
	cfg := DefaultLiveConfig()
	cfg.Sessions = 3
	cfg.Chunks = 5
	cfg.ChunkEvery = 20 * time.Millisecond
	cfg.ModuleDir = ".."
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := RunLive(ctx, cfg)
	require.NoError(t, err)
	require.Equal(t, 3, res.Turns)
	require.Equal(t, 15, res.Sent)
	require.Equal(t, 15, res.Live.N, "the follower saw every chunk")
	require.Equal(t, 15, res.HTTP.N, "the HTTP API's live streams delivered every chunk")
	require.Equal(t, 3, res.HTTPStreams, "one live stream per session was open at once")
	require.Zero(t, res.HTTPOrderErrors, "no chunk came out of order or twice")
	require.Equal(t, 15, res.Watch.N, "the watch with the live source saw every chunk")
	require.Equal(t, 15, res.Heartbeat.N, "the watch saw every chunk, at the latest in the stored answer")
	require.LessOrEqual(t, res.HeartbeatLive.N, res.Heartbeat.N)
	require.LessOrEqual(t, res.Live.P50, res.Live.P99)
	require.Positive(t, res.Live.P50)

	section := LiveReport(res)
	require.True(t, strings.HasPrefix(section, LiveBegin+"\n## Live text: from the provider's chunk to a reader\n"))
	require.True(t, strings.HasSuffix(section, LiveEnd+"\n"))
	require.Contains(t, section, "| live (livetext follower) | 15 |")
	require.Contains(t, section, "| HTTP API (`/v1/sessions/{id}/live`, loopback) | 15 |")
}

func TestStamps(t *testing.T) {
	at := time.Unix(0, 1733200000123456789)
	text := "x" + stamp(at) + stamp(at.Add(time.Millisecond)) + "[12]" + "[" + "abcdefghijklmnopqrs" + "]"
	require.Equal(t, []time.Time{at, at.Add(time.Millisecond)}, stamps(text))
	require.Len(t, stamp(at), stampLen)
}

func TestSpliceLive(t *testing.T) {
	section := LiveBegin + "\nnew\n" + LiveEnd + "\n"
	require.Equal(t, "# P\n\n"+section, SpliceLive("# P\n", section), "appended at the end")
	old := "# P\n" + LiveBegin + "\nold\n" + LiveEnd + "\n## Next\n"
	require.Equal(t, "# P\n"+section+"## Next\n", SpliceLive(old, section), "replaced in place")
	require.Equal(t, section, LiveSection(old[:0]+"x"+section))
}
