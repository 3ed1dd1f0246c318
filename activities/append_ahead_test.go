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

// opening is a turn's opening batch from seq first: turn/start of turn,
// step/start, stamped at now.
func opening(t *testing.T, turn, first, now int64) []session.Event {
	t.Helper()
	ts, err := session.NewEvent(wire.TypeTurnStart, first, now, map[string]any{"turn": turn})
	require.NoError(t, err)
	ss, err := session.NewEvent(wire.TypeStepStart, first+1, now, map[string]any{"turn": turn, "step": 1})
	require.NoError(t, err)
	return []session.Event{ts, ss}
}

// prints are events by seq and print.
func prints(t *testing.T, events []session.Event) []jsonl.HeldPrint {
	t.Helper()
	out := make([]jsonl.HeldPrint, len(events))
	for i, e := range events {
		p, err := session.Print(e)
		require.NoError(t, err)
		out[i] = jsonl.HeldPrint{Seq: e.Seq, Print: p}
	}
	return out
}

// AppendedRun: the events before the batch's own turn/start (equal but
// for time), or all of them, unless one is of a type the workflow's own
// stores write; only for a batch that opens a turn.
func TestAppendedRun(t *testing.T) {
	batch := opening(t, 1, 0, 50)
	x := named(t, "X", 2, 0)
	got, err := activities.AppendedRun(batch[0], x)
	require.NoError(t, err)
	require.Equal(t, prints(t, x), got, "all of them")

	held := append(session.CloneEvents(x), opening(t, 1, 2, 9)...)
	got, err = activities.AppendedRun(batch[0], held)
	require.NoError(t, err)
	require.Equal(t, prints(t, x), got, "up to the turn's own turn/start, stamped earlier")

	got, err = activities.AppendedRun(batch[0], opening(t, 1, 0, 9))
	require.NoError(t, err)
	require.Nil(t, got, "the turn's own opening first: reconciled as D77 says")

	for name, own := range map[string][]session.Event{
		"another turn's turn/start": append(session.CloneEvents(x), opening(t, 2, 2, 9)...),
		"a splice": append(session.CloneEvents(x), ev(t, wire.TypeInboxSpliced, 2, map[string]any{
			"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []any{}})),
		"a permission fact": {ev(t, wire.TypeSandboxMode, 0, map[string]any{"mode": "read-only"})},
		"a step/end":        {ev(t, wire.TypeStepEnd, 0, map[string]any{"turn": 1, "step": 1})},
	} {
		got, err := activities.AppendedRun(batch[0], own)
		require.NoError(t, err, name)
		require.Nil(t, got, name)
	}

	got, err = activities.AppendedRun(batch[1], x)
	require.NoError(t, err)
	require.Nil(t, got, "a batch that does not open a turn")
}

// An Ahead store (AppendBatchInput.Ahead) of a turn's opening over an
// append stored where it goes: nothing written, the append reported by
// seq and print; stored after it, the batch is written. Without Ahead the
// same store reports the events as held, as before.
func TestAppendBatchAheadReportsAnAppend(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	info, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: "ahead", CreatedAt: 1}, HandleID: "w"})
	require.NoError(t, err)
	x := named(t, "X", 2, 0)
	_, err = a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: x})
	require.NoError(t, err)

	turn := activities.AppendBatchInput{Ref: info.Ref, Events: opening(t, 1, 0, 50), Rerun: true, Reconcile: true}
	res, err := a.AppendBatch(ctx, turn)
	require.NoError(t, err)
	require.Len(t, res.Held, 2, "without Ahead: held, as before")
	require.Nil(t, res.Ahead)

	turn.Ahead = true
	res, err = a.AppendBatch(ctx, turn)
	require.NoError(t, err)
	require.Equal(t, activities.AppendResult{NextSeq: 2, Ahead: prints(t, x)}, res)

	turn.Events = opening(t, 1, 2, 50)
	res, err = a.AppendBatch(ctx, turn)
	require.NoError(t, err)
	require.Equal(t, activities.AppendResult{NextSeq: 4}, res)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}
