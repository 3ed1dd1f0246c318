package sessiontest

// Local activities (the live phase's appends, a turn's own stores) in the
// harness's record of started and completed activities, beside the regular
// ones.

import (
	"context"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdktest "go.temporal.io/sdk/testsuite"
)

// listenLocal records the local activities env starts and completes as the
// regular ones are, and counts them apart for LocalCount.
func (h *Harness) listenLocal(env *sdktest.TestWorkflowEnvironment) {
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		payloads, err := converter.GetDefaultDataConverter().ToPayloads(args...)
		if err != nil {
			h.T.Errorf("encoding the arguments of local activity %s: %v", info.ActivityType.Name, err)
		}
		h.recordStarted(info.ActivityType.Name, encodedArgs{payloads}, true)
	})
	env.SetOnLocalActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		h.recordCompleted(info.ActivityType.Name, err)
	})
}

// LocalCount returns how many times the local activity name was started.
func (h *Harness) LocalCount(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.localStarts[name]
}

// encodedArgs are a local activity's arguments as the regular activities'
// listener receives them.
type encodedArgs struct{ payloads *commonpb.Payloads }

// HasValues reports whether there are arguments.
func (e encodedArgs) HasValues() bool { return len(e.payloads.GetPayloads()) > 0 }

// Get decodes the arguments into the pointers given.
func (e encodedArgs) Get(valuePtrs ...any) error {
	return converter.GetDefaultDataConverter().FromPayloads(e.payloads, valuePtrs...)
}
