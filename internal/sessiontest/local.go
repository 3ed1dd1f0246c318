package sessiontest

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdktest "go.temporal.io/sdk/testsuite"
)

// localArgs are a local activity's arguments as the harness records them:
// the test environment hands them over unencoded.
type localArgs []any

// HasValues reports whether there are arguments.
func (a localArgs) HasValues() bool { return len(a) > 0 }

// Get decodes the arguments into valuePtrs through their JSON form, as a
// regular activity's encoded arguments decode.
func (a localArgs) Get(valuePtrs ...any) error {
	if len(valuePtrs) > len(a) {
		return fmt.Errorf("%d arguments, %d wanted", len(a), len(valuePtrs))
	}
	for i, p := range valuePtrs {
		b, err := json.Marshal(a[i])
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, p); err != nil {
			return err
		}
	}
	return nil
}

var _ converter.EncodedValues = localArgs(nil)

// listenLocal records the local activities (the turn's own stores) in the
// harness's started and completed lists like regular ones.
func (h *Harness) listenLocal(env *sdktest.TestWorkflowEnvironment) {
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		h.mu.Lock()
		h.started = append(h.started, activityCall{name: info.ActivityType.Name, args: localArgs(args)})
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
