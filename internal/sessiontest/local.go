package sessiontest

// Local activities (the live phase's appends) in the harness's record of
// started and completed activities, beside the regular ones.

import (
	"context"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdktest "go.temporal.io/sdk/testsuite"
)

// localStarts counts, per harness, the local activities started by name.
var localStarts sync.Map // *Harness -> *localCount

type localCount struct {
	mu sync.Mutex
	n  map[string]int
}

// listenLocal records the local activities env starts and completes in
// h.started and h.completed as the regular ones are, and counts them apart
// for localCount.
func (h *Harness) listenLocal(env *sdktest.TestWorkflowEnvironment) {
	lc, _ := localStarts.LoadOrStore(h, &localCount{n: map[string]int{}})
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		payloads, err := converter.GetDefaultDataConverter().ToPayloads(args...)
		if err != nil {
			h.T.Errorf("encoding the arguments of local activity %s: %v", info.ActivityType.Name, err)
		}
		c := lc.(*localCount)
		c.mu.Lock()
		c.n[info.ActivityType.Name]++
		c.mu.Unlock()
		h.mu.Lock()
		h.started = append(h.started, activityCall{name: info.ActivityType.Name, args: encodedArgs{payloads}})
		fn := h.OnStarted
		waiters := h.startWaiters[info.ActivityType.Name]
		delete(h.startWaiters, info.ActivityType.Name)
		h.mu.Unlock()
		if fn != nil {
			fn(info.ActivityType.Name)
		}
		for _, w := range waiters {
			w()
		}
	})
	env.SetOnLocalActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		h.mu.Lock()
		h.completed = append(h.completed, activityCall{name: info.ActivityType.Name, err: err})
		fn := h.OnCompleted
		h.mu.Unlock()
		if fn != nil {
			fn(info.ActivityType.Name, err)
		}
	})
}

// LocalCount returns how many times the local activity name was started.
func (h *Harness) LocalCount(name string) int {
	lc, ok := localStarts.Load(h)
	if !ok {
		return 0
	}
	c := lc.(*localCount)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
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
