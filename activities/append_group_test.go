package activities_test

import (
	"context"
	"encoding/json"
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

// An event of a type the workflow's own stores write, held past a group
// store's cursor and claimed by no batch, is another attempt's (a turn's
// opening, a splice, a permission fact): a group that would write after it
// is refused (SeqMismatch, not retried) with nothing written, the late
// store of an abandoned attempt; a group the log holds before it is
// answered, the store's NextSeq ending at it, which is not reported
// unclaimed.
func TestAppendBatchGroupStopsAtTheWorkflowsOwnEvents(t *testing.T) {
	for typ, data := range map[string]string{
		"turn/start":          `{"turn":1}`,
		"turn/end":            `{"turn":1,"reason":{"kind":"completed"}}`,
		"step/start":          `{"turn":1,"step":1}`,
		"step/end":            `{"turn":1,"step":1}`,
		"agent/inbox/spliced": `{"target":"next-turn","start":0,"removedCount":0,"inserted":[]}`,
		"subagent/descriptor": `{"id":"child"}`,
		"permission/preset":   `{"preset":"read-only"}`,
		"sandbox/mode":        `{"mode":"read-only"}`,
		"approval/policy":     `{"policy":"never"}`,
		"approval/rules":      `{"rules":[{"tool":"bash"}]}`,
	} {
		t.Run(typ, func(t *testing.T) {
			a := newActs(t)
			ctx := context.Background()
			info, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: "g", CreatedAt: 1}, HandleID: "w"})
			require.NoError(t, err)
			own, err := session.NewEvent(typ, 2, 9, json.RawMessage(data))
			require.NoError(t, err)
			own.Ignorable = typ == "approval/rules" // sessionflow's own, stored ignorable
			_, err = a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: append(named(t, "A", 2, 0), own)})
			require.NoError(t, err)

			res, err := a.AppendBatch(ctx, activities.AppendBatchInput{
				Ref: info.Ref, Cursor: 0, Rerun: true, Events: named(t, "A", 2, 0),
				Group: []activities.GroupSpan{{Len: 2, AtEnd: true}},
			})
			require.NoError(t, err)
			require.Equal(t, activities.AppendResult{NextSeq: 2, Placed: []int64{0}}, res)

			_, err = a.AppendBatch(ctx, activities.AppendBatchInput{
				Ref: info.Ref, Cursor: 2, Rerun: true, Events: named(t, "B", 1, 2),
				Group: []activities.GroupSpan{{Len: 1, AtEnd: true}},
			})
			typ2, nonRetryable := appType(t, err)
			require.Equal(t, "SeqMismatch", typ2)
			require.True(t, nonRetryable)
			require.Contains(t, err.Error(), "the "+typ+" stored at seq 2 past the group's cursor is no batch's: nothing is written after it")
			require.Equal(t, int64(3), a.Runtime.Store.Attach(info.Ref).NextSeq(), "nothing written")
		})
	}
}
