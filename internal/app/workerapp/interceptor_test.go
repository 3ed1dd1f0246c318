package workerapp

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestInterceptorCountsRepairClosers(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	var suite sdktest.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{newWorkerInterceptor(DefaultConfig(), m)}})
	repair := func(context.Context, activities.RepairInput) (activities.RepairResult, error) {
		return activities.RepairResult{Closers: 3, Appended: 4}, nil
	}
	other := func(context.Context, activities.RepairInput) (activities.RepairResult, error) {
		return activities.RepairResult{Closers: 5}, nil
	}
	env.RegisterActivityWithOptions(repair, activity.RegisterOptions{Name: "Repair"})
	env.RegisterActivityWithOptions(repair, activity.RegisterOptions{Name: "RepairAndMark"})
	env.RegisterActivityWithOptions(other, activity.RegisterOptions{Name: "SomethingElse"})

	_, err = env.ExecuteActivity("Repair", activities.RepairInput{})
	require.NoError(t, err)
	_, err = env.ExecuteActivity("Repair", activities.RepairInput{})
	require.NoError(t, err)
	_, err = env.ExecuteActivity("SomethingElse", activities.RepairInput{})
	require.NoError(t, err)
	assert.Equal(t, 6.0, testutil.ToFloat64(m.closers))
	// A repair scheduled under the earlier name by a run recorded before
	// the rename is counted too.
	_, err = env.ExecuteActivity("RepairAndMark", activities.RepairInput{})
	require.NoError(t, err)
	assert.Equal(t, 9.0, testutil.ToFloat64(m.closers))
}

// windowSeen runs a stand-in CreateSession under the interceptor built from
// cfg and returns the append window its request carried.
func windowSeen(t *testing.T, cfg Config, opts *wire.Options) *wire.Options {
	t.Helper()
	var suite sdktest.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{newWorkerInterceptor(cfg, nil)}})
	var seen *wire.Options
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, req workflows.CreateSessionRequest) (wire.DisposeResult, error) {
		seen = req.Options
		return wire.DisposeResult{}, nil
	}, workflow.RegisterOptions{Name: wire.CreateSessionName})
	env.ExecuteWorkflow(wire.CreateSessionName, workflows.CreateSessionRequest{SessionID: "s", Options: opts})
	require.NoError(t, env.GetWorkflowError())
	return seen
}

func TestInterceptorAppliesAppendWindow(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AppendWindow = 750 * time.Millisecond

	got := windowSeen(t, cfg, nil)
	require.NotNil(t, got)
	assert.Equal(t, int64(750), got.AppendWindowMs)

	got = windowSeen(t, cfg, &wire.Options{MaxBatchBytes: 1024})
	require.NotNil(t, got)
	assert.Equal(t, wire.Options{AppendWindowMs: 750, MaxBatchBytes: 1024}, *got)

	got = windowSeen(t, cfg, &wire.Options{AppendWindowMs: 40})
	require.NotNil(t, got)
	assert.Equal(t, int64(40), got.AppendWindowMs, "a window chosen by the caller stays")

	got = windowSeen(t, DefaultConfig(), nil)
	assert.Nil(t, got, "the default window leaves requests untouched")
}

func TestWithAppendWindowCopies(t *testing.T) {
	orig := &wire.Options{MaxAttempts: 3}
	got := withAppendWindow(orig, 10)
	assert.Equal(t, int64(10), got.AppendWindowMs)
	assert.Equal(t, int32(3), got.MaxAttempts)
	assert.Zero(t, orig.AppendWindowMs, "the caller's options are not changed")
	for _, in := range []any{
		wire.ResumeSessionRequest{},
		workflows.LiveState{},
		wire.SessionLoopInput{},
	} {
		w := &workflowInbound{parent: &workerInterceptor{appendWindowMs: 10}}
		w.Next = &recordingInbound{}
		_, err := w.ExecuteWorkflow(nil, &interceptor.ExecuteWorkflowInput{Args: []any{in}})
		require.NoError(t, err)
		var o *wire.Options
		switch v := w.Next.(*recordingInbound).args[0].(type) {
		case wire.ResumeSessionRequest:
			o = v.Options
		case workflows.LiveState:
			o = v.Options
		case wire.SessionLoopInput:
			o = v.Options
		}
		require.NotNil(t, o, "%T", in)
		assert.Equal(t, int64(10), o.AppendWindowMs, "%T", in)
	}
}

// recordingInbound records the arguments it is executed with.
type recordingInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	args []any
}

func (r *recordingInbound) ExecuteWorkflow(_ workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	r.args = in.Args
	return nil, nil
}
