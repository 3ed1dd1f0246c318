package activities

import "go.temporal.io/sdk/activity"

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
func RegisterLegacyNames(r ActivityRegistry, a *Activities) {
	r.RegisterActivityWithOptions(a.ScanLog, activity.RegisterOptions{Name: LegacyReadSummaryName})
	r.RegisterActivityWithOptions(a.Repair, activity.RegisterOptions{Name: LegacyRepairAndMarkName})
}
