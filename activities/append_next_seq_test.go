package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// AppendBatch answers the seq the next append must carry: after a batch,
// after an empty batch, and after a retry of a landed batch on another
// worker's store (which appends nothing).
func TestAppendBatchReportsNextSeq(t *testing.T) {
	root := t.TempDir()
	newStore := func() *jsonl.Store {
		st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone})
		require.NoError(t, err)
		return st
	}
	a := &activities.Activities{Runtime: &activities.Runtime{Store: newStore()}}
	ctx := context.Background()
	info, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: "n", CreatedAt: 1}, HandleID: "w"})
	require.NoError(t, err)
	batch := []session.Event{
		ev(t, wire.TypeTodoWrite, 0, map[string]any{}),
		ev(t, wire.TypeTodoWrite, 1, map[string]any{}),
		ev(t, wire.TypeTodoWrite, 2, map[string]any{}),
	}
	res, err := a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: batch})
	require.NoError(t, err)
	require.Equal(t, int64(3), res.NextSeq)

	res, err = a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref})
	require.NoError(t, err)
	require.Equal(t, int64(3), res.NextSeq)

	other := &activities.Activities{Runtime: &activities.Runtime{Store: newStore()}}
	res, err = other.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: batch})
	require.NoError(t, err)
	require.Equal(t, int64(3), res.NextSeq)
	require.NoError(t, other.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}
