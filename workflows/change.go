package workflows

import "go.temporal.io/sdk/workflow"

// change is a versioned change of a workflow's command sequence, asked of
// workflow.GetVersion once per run, the first time the run reaches a
// command the change affects (so a run that never reaches one records no
// marker), and remembered for the rest of the run.
type change struct {
	asked bool
	taken bool
}

// takenIn reports whether the run takes the change id (version 1), asking
// workflow.GetVersion the first time.
func (c *change) takenIn(ctx workflow.Context, id string) bool {
	if !c.asked {
		c.taken = workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1) >= 1
		c.asked = true
	}
	return c.taken
}
