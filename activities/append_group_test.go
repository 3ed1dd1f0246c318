package activities_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// named is caller name's batch of n events numbered from first, stamped
// at one time.
func named(t *testing.T, name string, n int, first int64) []session.Event {
	t.Helper()
	out := make([]session.Event, n)
	for i := range out {
		e, err := session.NewEvent(wire.TypeTodoWrite, first+int64(i), 7, map[string]any{"text": fmt.Sprintf("%s %d", name, i)})
		require.NoError(t, err)
		out[i] = e
	}
	return out
}

// A group store (AppendBatchInput.Group): an unrecorded attempt stored
// [A, B] through the handle; the retry's group [C, B] finds B, writes C
// after it and reports A's events by seq and print. A malformed group is
// refused as invalid.
func TestAppendBatchGroupAdoptsAndReportsUnclaimed(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	info, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: "g", CreatedAt: 1}, HandleID: "w"})
	require.NoError(t, err)
	_, err = a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: append(named(t, "A", 2, 0), named(t, "B", 1, 2)...)})
	require.NoError(t, err)

	res, err := a.AppendBatch(ctx, activities.AppendBatchInput{
		Ref: info.Ref, Cursor: 0, Rerun: true,
		Events: append(named(t, "C", 2, 0), named(t, "B", 1, 2)...),
		Group:  []activities.GroupSpan{{Len: 2, AtEnd: true}, {Len: 1, AtEnd: true}},
	})
	require.NoError(t, err)
	var unclaimed []jsonl.HeldPrint
	for _, e := range named(t, "A", 2, 0) {
		p, err := session.Print(e)
		require.NoError(t, err)
		unclaimed = append(unclaimed, jsonl.HeldPrint{Seq: e.Seq, Print: p})
	}
	require.Equal(t, activities.AppendResult{NextSeq: 5, Placed: []int64{3, 2}, Unclaimed: unclaimed}, res)

	_, err = a.AppendBatch(ctx, activities.AppendBatchInput{
		Ref: info.Ref, Cursor: 5, Events: named(t, "D", 2, 5),
		Group: []activities.GroupSpan{{Len: 1, AtEnd: true}},
	})
	typ, nonRetryable := appType(t, err)
	require.Equal(t, "InvalidArgument", typ)
	require.True(t, nonRetryable)
	require.ErrorContains(t, err, "group store: its batches hold 1 events, 2 are given")
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}
