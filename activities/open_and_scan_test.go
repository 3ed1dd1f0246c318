package activities_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// A write open needs a handle id; a read open does not.
func TestOpenHandleWriteNeedsHandleID(t *testing.T) {
	a := newActs(t)
	seedSession(t, a, "o", []session.Event{ev(t, wire.TypeTodoWrite, 0, map[string]any{})})
	ctx := context.Background()

	_, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "o", Access: jsonl.AccessWrite})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	require.Equal(t, "InvalidArgument", app.Type())
	require.True(t, app.NonRetryable())
	require.Equal(t, "open: a write handle id is required", app.Message())

	info, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "o", Access: jsonl.AccessRead})
	require.NoError(t, err)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}

// A reader heartbeats as it reads its chunks, not only on its timer: with a
// timer that never fires, a read still heartbeats (the SDK throttles the
// per-chunk heartbeats, so only their presence is checked).
func TestScanLogHeartbeatsPerChunk(t *testing.T) {
	a := newActs(t)
	a.Runtime.HeartbeatInterval = time.Hour // the timer never fires
	a.ReadChunk = 2
	events := make([]session.Event, 0, 9)
	for i := int64(0); i < 9; i++ {
		events = append(events, ev(t, wire.TypeTodoWrite, i, map[string]any{}))
	}
	seedSession(t, a, "chunks", events)
	info, err := a.OpenHandle(context.Background(), activities.OpenHandleInput{SessionID: "chunks", Access: jsonl.AccessRead})
	require.NoError(t, err)

	var suite sdktest.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	var beats atomic.Int64
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	v, err := env.ExecuteActivity(a.ScanLog, activities.HandleInput{Ref: info.Ref})
	require.NoError(t, err)
	var sum activities.LogScan
	require.NoError(t, v.Get(&sum))
	require.Equal(t, int64(9), sum.EventCount)
	require.Greater(t, beats.Load(), int64(0), "no heartbeat while reading chunks")
	require.NoError(t, a.CloseHandle(context.Background(), activities.HandleInput{Ref: info.Ref}))
}
