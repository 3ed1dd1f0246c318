package activities_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// slowSyncFS is the real filesystem with every fsync taking at least delay.
type slowSyncFS struct {
	jsonl.OSFS
	delay time.Duration
}

func (f slowSyncFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowSyncFile{File: file, delay: f.delay}, nil
}

type slowSyncFile struct {
	jsonl.File
	delay time.Duration
}

func (f slowSyncFile) Sync() error {
	time.Sleep(f.delay)
	return f.File.Sync()
}

// An append whose fsync outlasts several heartbeat intervals heartbeats
// while it waits, and still stores the batch.
func TestAppendBatchHeartbeatsWhileTheStoreIsSlow(t *testing.T) {
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone, FS: slowSyncFS{delay: 40 * time.Millisecond}})
	require.NoError(t, err)
	a := &activities.Activities{Runtime: &activities.Runtime{Store: st, HeartbeatInterval: time.Millisecond}}
	ctx := context.Background()
	info, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: "slow", CreatedAt: 1}, HandleID: "w"})
	require.NoError(t, err)

	var suite sdktest.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	var beats atomic.Int64
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	e, err := session.NewEvent(wire.TypeTodoWrite, 0, 100, map[string]any{})
	require.NoError(t, err)
	v, err := env.ExecuteActivity(a.AppendBatch, activities.AppendBatchInput{Ref: info.Ref, Events: []session.Event{e}})
	require.NoError(t, err)
	var res activities.AppendResult
	require.NoError(t, v.Get(&res))
	require.Equal(t, int64(1), res.NextSeq)
	require.Greater(t, beats.Load(), int64(0), "no heartbeat during a 40 ms fsync with a 1 ms interval")
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}
