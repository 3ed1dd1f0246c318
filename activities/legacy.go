package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/sessionflow/sessionflow/wire"
)

// ActivityRegistry is the part of a Temporal worker (worker.Worker,
// worker.Registry, the SDK's test environments) that registers activities.
type ActivityRegistry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// RegisterLegacyNames registers a's activities that were renamed under
// their earlier names too (LegacyReadSummaryName for ScanLog,
// LegacyRepairAndMarkName for Repair), so that a workflow run started before
// the rename, which schedules the earlier types, still finds a worker.
// Register a itself as well (RegisterActivity(a)), which registers the
// current names.
//
// The earlier names are registered through functions of their own: the SDK
// maps a function registered under another name to that name wherever a
// workflow schedules it, so registering a.ScanLog itself as ReadSummary
// would make every new run schedule ReadSummary again.
func RegisterLegacyNames(r ActivityRegistry, a *Activities) {
	readSummary := func(ctx context.Context, in HandleInput) (LogScan, error) { return a.ScanLog(ctx, in) }
	repairAndMark := func(ctx context.Context, in RepairInput) (RepairResult, error) { return a.Repair(ctx, in) }
	r.RegisterActivityWithOptions(readSummary, activity.RegisterOptions{Name: wire.LegacyReadSummaryName})
	r.RegisterActivityWithOptions(repairAndMark, activity.RegisterOptions{Name: wire.LegacyRepairAndMarkName})
}
