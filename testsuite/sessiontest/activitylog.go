package sessiontest

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/wire"
)

// activityLog records the activities a test environment starts and
// completes, regular and local, and runs what waits for them. The Harness
// embeds it: its exported methods and fields are the Harness's.
type activityLog struct {
	t *testing.T

	mu        sync.Mutex
	started   []activityCall
	completed []activityCall
	// localStarts counts the local activities started, by name.
	localStarts map[string]int
	// startWaiters run when an activity of their name starts.
	startWaiters map[string][]func()

	// OnStarted and OnCompleted, when set, run inside the environment's
	// listeners (so they may signal or cancel the workflow).
	OnStarted   func(name string)
	OnCompleted func(name string, err error)
}

type activityCall struct {
	name string
	args converter.EncodedValues
	err  error
}

// listen records what env starts and completes; before runs first at every
// start.
func (a *activityLog) listen(env *sdktest.TestWorkflowEnvironment, before func()) {
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		before()
		a.recordStarted(info.ActivityType.Name, args, false)
	})
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		a.recordCompleted(info.ActivityType.Name, err)
	})
	// Local activities (the live phase's appends, a turn's own stores) are
	// recorded as the regular ones are, and counted apart for LocalCount.
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		payloads, err := converter.GetDefaultDataConverter().ToPayloads(args...)
		if err != nil {
			a.t.Errorf("encoding the arguments of local activity %s: %v", info.ActivityType.Name, err)
		}
		before()
		a.recordStarted(info.ActivityType.Name, encodedArgs{payloads}, true)
	})
	env.SetOnLocalActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		a.recordCompleted(info.ActivityType.Name, err)
	})
}

// recordStarted records the start of the activity name (local: a local
// activity) and runs the hooks waiting for it.
func (a *activityLog) recordStarted(name string, args converter.EncodedValues, local bool) {
	a.mu.Lock()
	a.started = append(a.started, activityCall{name: name, args: args})
	if local {
		if a.localStarts == nil {
			a.localStarts = map[string]int{}
		}
		a.localStarts[name]++
	}
	fn := a.OnStarted
	waiters := a.startWaiters[name]
	delete(a.startWaiters, name)
	a.mu.Unlock()
	if fn != nil {
		fn(name)
	}
	for _, w := range waiters {
		w()
	}
}

// recordCompleted records the end of the activity name with its error.
func (a *activityLog) recordCompleted(name string, err error) {
	a.mu.Lock()
	a.completed = append(a.completed, activityCall{name: name, err: err})
	fn := a.OnCompleted
	a.mu.Unlock()
	if fn != nil {
		fn(name, err)
	}
}

// whenStarted runs fn at once if an activity named name has started, else
// at its first start.
func (a *activityLog) whenStarted(name string, fn func()) {
	a.mu.Lock()
	for _, c := range a.started {
		if c.name == name {
			a.mu.Unlock()
			fn()
			return
		}
	}
	if a.startWaiters == nil {
		a.startWaiters = make(map[string][]func())
	}
	a.startWaiters[name] = append(a.startWaiters[name], fn)
	a.mu.Unlock()
}

// summary describes the activities so far, for a test that missed its
// deadline.
func (a *activityLog) summary() (started int, last []string, completed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.started[max(0, len(a.started)-6):] {
		last = append(last, c.name)
	}
	return len(a.started), last, len(a.completed)
}

// StartedNames lists the activities started so far, in order.
func (a *activityLog) StartedNames() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, len(a.started))
	for i, c := range a.started {
		out[i] = c.name
	}
	return out
}

// Count returns how many times an activity was started.
func (a *activityLog) Count(name string) int {
	n := 0
	for _, s := range a.StartedNames() {
		if s == name {
			n++
		}
	}
	return n
}

// LocalCount returns how many times the local activity name was started.
func (a *activityLog) LocalCount(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.localStarts[name]
}

// StartedArg decodes the argument of the i-th start of an activity.
func (a *activityLog) StartedArg(name string, i int, out any) {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	k := 0
	for _, c := range a.started {
		if c.name != name {
			continue
		}
		if k == i {
			require.NoError(a.t, c.args.Get(out))
			return
		}
		k++
	}
	a.t.Fatalf("activity %s was not started %d times", name, i+1)
}

// ClosedHandles returns the handle ids given to CloseHandle, in order.
func (a *activityLog) ClosedHandles() []string {
	var out []string
	for i := 0; i < a.Count(wire.CloseHandleName); i++ {
		var in activities.HandleInput
		a.StartedArg(wire.CloseHandleName, i, &in)
		out = append(out, in.Ref.HandleID)
	}
	return out
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
