package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// TestFleetSmoke runs the many-sessions measurement with tiny sizes against
// a real dev server: every session is created and appended to, the store
// stays within its descriptor limit, and the report holds the figures.
func TestFleetSmoke(t *testing.T) {
	t.Cleanup(func() { worker.SetStickyWorkflowCacheSize(10_000) }) // the SDK's default, for the next test
	cfg := DefaultFleetConfig()
	cfg.Sessions = 6
	cfg.InFlight = 3
	cfg.Appends = 8
	cfg.MaxDescriptors = 4
	cfg.SmallCache = 2
	cfg.ModuleDir = ".."
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := RunFleet(ctx, cfg)
	require.NoError(t, err)
	require.Equal(t, 6, res.Created)
	require.Equal(t, 7, res.Histories)
	require.Zero(t, res.TaskTimeouts)
	require.Equal(t, 8, res.Single.N)
	require.Equal(t, 8, res.Fleet.N)
	require.Equal(t, 8, res.Evicted.N)
	require.Positive(t, res.EvictedDistinct)
	require.LessOrEqual(t, res.PeakStoreFDs, 4)
	require.Positive(t, res.PeakStoreFDs, "the appends opened leases and logs")
	require.LessOrEqual(t, res.Single.P50, res.Single.P99)

	section := FleetReport(res)
	require.True(t, strings.HasPrefix(section, FleetBegin+"\n## Many live sessions on one worker\n"))
	require.True(t, strings.HasSuffix(section, FleetEnd+"\n"))
	require.Contains(t, section, "| one live session |")
}

func TestSpliceFleet(t *testing.T) {
	section := FleetBegin + "\nnew\n" + FleetEnd + "\n"
	require.Equal(t, "# P\n\n"+section, SpliceFleet("# P\n", section), "appended at the end")
	old := "# P\n" + FleetBegin + "\nold\n" + FleetEnd + "\n## Next\n"
	require.Equal(t, "# P\n"+section+"## Next\n", SpliceFleet(old, section), "replaced in place")
	require.Equal(t, old, SpliceFleet(old, ""), "nothing to splice keeps the report")
	require.Equal(t, FleetBegin+"\nold\n"+FleetEnd+"\n", FleetSection(old))
	require.Empty(t, FleetSection("# P\n"))
}
