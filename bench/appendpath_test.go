package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAppendPathReportSplitsTheSingleCallerAppend(t *testing.T) {
	at := func(msec float64) time.Duration { return time.Duration(msec * float64(time.Millisecond)) }
	res := &Results{
		Config:  Config{EntityBatch: 8, EntityEventBytes: 512, AppendCallers: 16, AppendDuration: 8 * time.Second, AppendPathOnly: true},
		Started: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC),
		AppendPath: &AppendPathResult{
			Entity:          EntityResult{Appends: 788, Events: 6304, HistoryBytes: 6304 * 664, PerAppend: at(7.0)},
			Local:           EntityResult{Appends: 100, Events: 800, HistoryBytes: 800 * 703, PerAppend: at(8.2), Syncs: 100, SyncTime: at(0.4)},
			Activity:        EntityResult{Appends: 100, Events: 800, HistoryBytes: 800 * 1351, PerAppend: at(18.5), Syncs: 100, SyncTime: at(0.3)},
			EntitySame:      EntityResult{Appends: 100, PerAppend: at(6.5)},
			EntityLocalNoop: EntityResult{Appends: 100, PerAppend: at(7.3)},
		},
	}
	got := AppendPathReport(res)
	require.Contains(t, got, "The server:\nthe embedded dev server with its state in memory")
	require.Contains(t, got, "| the worker store's fsyncs per append (mean time, one caller) | - | 1.0, 0.4 ms | 1.0, 0.3 ms | - | - |\n")
	require.Contains(t, got, "Where a single-caller append's time goes (100 appends each, means)")
	require.Contains(t, got, "| entity workflow | 6.5 ms | - |\n"+
		"| entity workflow + a no-op local activity | 7.3 ms | +0.8 ms |\n"+
		"| sessionflow, local activity storing the batch | 8.2 ms | +1.7 ms |\n"+
		"| of which the store's fsync | 0.4 ms | - |\n")

	res.Config.TemporalAddress = "127.0.0.1:7233"
	require.Contains(t, AppendPathReport(res), "The server:\nthe Temporal server at 127.0.0.1:7233 (`-temporal-address`)")

	res.AppendPath.EntityLocalNoop = EntityResult{}
	require.NotContains(t, AppendPathReport(res), "Where a single-caller append's time goes", "no split without its baseline")
}
