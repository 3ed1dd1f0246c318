package workflows

import "go.temporal.io/sdk/workflow"

// sentName returns name, or legacy in a run recorded before wireNamesChange.
// The version is taken once per run, at its first use.
func sentName(ctx workflow.Context, name, legacy string) string {
	if workflow.GetVersion(ctx, wireNamesChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return legacy
	}
	return name
}

// signalChannels returns the channels of a signal received under each of
// names (its current and its legacy name).
func signalChannels(ctx workflow.Context, names ...string) []workflow.ReceiveChannel {
	chs := make([]workflow.ReceiveChannel, len(names))
	for i, n := range names {
		chs[i] = workflow.GetSignalChannel(ctx, n)
	}
	return chs
}
