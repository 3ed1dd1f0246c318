package activities_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func newActs(t *testing.T) *activities.Activities {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionZstd})
	require.NoError(t, err)
	return &activities.Activities{Runtime: &activities.Runtime{Store: st}, ReadChunk: 2}
}

func ev(t *testing.T, typ string, seq int64, data any) session.Event {
	t.Helper()
	e, err := session.NewEvent(typ, seq, 100+seq, data)
	require.NoError(t, err)
	return e
}

func appType(t *testing.T, err error) (string, bool) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	return app.Type(), app.NonRetryable()
}

// seedSession stores events under id through the activities themselves.
func seedSession(t *testing.T, a *activities.Activities, id string, events []session.Event) jsonl.HandleRef {
	t.Helper()
	ctx := context.Background()
	info, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: id, CreatedAt: 1}, HandleID: "seed-" + id})
	require.NoError(t, err)
	if len(events) > 0 {
		_, err = a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: events})
		require.NoError(t, err)
	}
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
	return info.Ref
}

func TestCreateAndOpenAreIdempotent(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	in := activities.CreateHandleInput{Header: wire.Header{ID: "c", CreatedAt: 1}, HandleID: "h1", Owner: jsonl.Owner{WorkflowID: "session/c"}}
	first, err := a.CreateHandle(ctx, in)
	require.NoError(t, err)
	again, err := a.CreateHandle(ctx, in)
	require.NoError(t, err)
	require.Equal(t, first.Ref, again.Ref)
	require.False(t, again.Materialized)
	lease, err := a.Runtime.Store.LeaseOf(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, "h1", lease.HandleID)
	require.Equal(t, "session/c", lease.Owner.WorkflowID)
	_, err = a.AppendBatch(ctx, activities.AppendBatchInput{Ref: first.Ref, Events: []session.Event{ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1})}})
	require.NoError(t, err)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: first.Ref}))
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: first.Ref}), "close is idempotent")

	open := activities.OpenHandleInput{SessionID: "c", Access: jsonl.AccessWrite, HandleID: "h2"}
	o1, err := a.OpenHandle(ctx, open)
	require.NoError(t, err)
	o2, err := a.OpenHandle(ctx, open)
	require.NoError(t, err)
	require.Equal(t, o1.Ref, o2.Ref)
	require.Equal(t, int64(1), o2.NextSeq)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: o1.Ref}))
}

func TestLateOpenAfterCloseIsRevoked(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	seedSession(t, a, "s", []session.Event{ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1})})
	ref := jsonl.HandleRef{SessionID: "s", HandleID: "late", Access: jsonl.AccessWrite}
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: ref}))
	_, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "s", Access: jsonl.AccessWrite, HandleID: "late"})
	typ, nonRetryable := appType(t, err)
	require.Equal(t, "HandleRevoked", typ)
	require.True(t, nonRetryable)
	lease, err := a.Runtime.Store.LeaseOf(ctx, "s")
	require.NoError(t, err)
	require.Nil(t, lease)
}

func TestRepairIsIdempotent(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	seedSession(t, a, "r", []session.Event{
		ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1}),
		ev(t, wire.TypeStepStart, 1, map[string]any{"turn": 1, "step": 1}),
	})
	info, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "r", Access: jsonl.AccessWrite, HandleID: "w"})
	require.NoError(t, err)
	sum, err := a.ScanLog(ctx, activities.HandleInput{Ref: info.Ref})
	require.NoError(t, err)
	require.Equal(t, int64(2), sum.EventCount)
	require.Equal(t, &activities.OpenTurnFacts{Turn: 1, Step: 1}, sum.OpenTurn)
	first, err := a.Repair(ctx, activities.RepairInput{Ref: info.Ref, Now: 5})
	require.NoError(t, err)
	require.Equal(t, 2, first.Closers)
	require.Equal(t, int64(4), first.MarkerSeq)
	require.Equal(t, int64(5), first.Scan.NextSeq)
	require.True(t, first.Scan.EndsWithMarker)
	second, err := a.Repair(ctx, activities.RepairInput{Ref: info.Ref, Now: 6})
	require.NoError(t, err)
	require.Equal(t, 0, second.Appended)
	require.Equal(t, int64(-1), second.MarkerSeq)
	require.Equal(t, int64(5), second.Scan.NextSeq)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}

func TestAppendRetryAndMismatch(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	info, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: "a", CreatedAt: 1}, HandleID: "w"})
	require.NoError(t, err)
	batch := []session.Event{ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1})}
	r1, err := a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: batch})
	require.NoError(t, err)
	r2, err := a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: batch})
	require.NoError(t, err)
	require.Equal(t, r1, r2)
	other := []session.Event{ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 2})}
	_, err = a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: other})
	typ, nonRetryable := appType(t, err)
	require.Equal(t, "SeqMismatch", typ)
	require.True(t, nonRetryable)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
	// A write through a closed handle id is refused, typed.
	_, err = a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: []session.Event{ev(t, wire.TypeTurnEnd, 1, map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}})}})
	typ, _ = appType(t, err)
	require.Equal(t, "HandleClosed", typ)
}

func TestStoreSeedForksInsideTheActivity(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	seedSession(t, a, "p", []session.Event{
		ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1}),
		ev(t, wire.TypeTurnEnd, 1, map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}}),
		ev(t, wire.TypeTurnStart, 2, map[string]any{"turn": 2}),
	})
	info, err := a.CreateHandle(ctx, activities.CreateHandleInput{
		Header: wire.Header{ID: "k", CreatedAt: 1, IsSeeded: true, ParentSession: "p"}, HandleID: "w", InheritedEventCount: 2})
	require.NoError(t, err)
	in := activities.StoreSeedInput{Ref: info.Ref, ParentSessionID: "p", Count: 2, Now: 9}
	res, err := a.StoreSeed(ctx, in)
	require.NoError(t, err)
	require.Equal(t, activities.SeedResult{NextSeq: 3, LastTurn: 1}, res)
	again, err := a.StoreSeed(ctx, in)
	require.NoError(t, err)
	require.Equal(t, res, again)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
	h, err := a.Runtime.Store.Open(ctx, "k", jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	evs, err := h.Read(ctx, 0, -1)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	marker, err := evs[2].IsInheritedMarker()
	require.NoError(t, err)
	require.True(t, marker)
	require.Equal(t, int64(2), h.InheritedEventCount())

	_, err = a.StoreSeed(ctx, activities.StoreSeedInput{Ref: info.Ref, ParentSessionID: "p", Count: 7})
	typ, _ := appType(t, err)
	require.NotEmpty(t, typ)
}

func TestStatAndNotFound(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	res, err := a.Stat(ctx, activities.StatInput{SessionID: "none"})
	require.NoError(t, err)
	require.False(t, res.Found)
	_, err = a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "none", Access: jsonl.AccessWrite, HandleID: "w"})
	typ, nonRetryable := appType(t, err)
	require.Equal(t, "SessionNotFound", typ)
	require.True(t, nonRetryable)
	// A created session that never materialized is erased by its close.
	seedSession(t, a, "x", nil)
	res, err = a.Stat(ctx, activities.StatInput{SessionID: "x"})
	require.NoError(t, err)
	require.False(t, res.Found)
	// Flush materializes a header-only log.
	info, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: wire.Header{ID: "y", CreatedAt: 1}, HandleID: "w"})
	require.NoError(t, err)
	require.NoError(t, a.Flush(ctx, activities.HandleInput{Ref: info.Ref}))
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
	res, err = a.Stat(ctx, activities.StatInput{SessionID: "y"})
	require.NoError(t, err)
	require.True(t, res.Found)
	require.False(t, res.Snapshot.Pending)
}

func TestMapError(t *testing.T) {
	require.NoError(t, activities.MapError(nil))
	typ, nonRetryable := appType(t, activities.MapError(&fs.PathError{Op: "write", Path: "/x", Err: errors.New("EIO")}))
	require.Equal(t, "IOError", typ)
	require.False(t, nonRetryable)
	require.ErrorIs(t, activities.MapError(context.Canceled), context.Canceled)
	_, err := session.SnapshotBatch([]session.Event{{Type: "x", Seq: 0}})
	require.Error(t, err)
	typ, nonRetryable = appType(t, activities.MapError(err))
	require.Equal(t, "InvalidArgument", typ)
	require.True(t, nonRetryable)
}

func TestWithoutStore(t *testing.T) {
	a := &activities.Activities{}
	_, err := a.OpenHandle(context.Background(), activities.OpenHandleInput{SessionID: "x", Access: jsonl.AccessWrite, HandleID: "w"})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	require.Equal(t, "cannot resume: session persistence is not configured (load a dsh-session-persistence backend)", app.Message())
	typ, _ := appType(t, a.CloseHandle(context.Background(), activities.HandleInput{}))
	require.Equal(t, "PersistenceNotConfigured", typ)
}

// In an activity context the readers heartbeat and still read everything.
func TestScanLogInActivityEnvironment(t *testing.T) {
	a := newActs(t)
	a.Runtime.HeartbeatInterval = time.Millisecond
	events := make([]session.Event, 0, 9)
	for i := int64(0); i < 9; i++ {
		events = append(events, ev(t, wire.TypeTodoWrite, i, map[string]any{}))
	}
	seedSession(t, a, "hb", events)
	info, err := a.OpenHandle(context.Background(), activities.OpenHandleInput{SessionID: "hb", Access: jsonl.AccessWrite, HandleID: "w"})
	require.NoError(t, err)
	var suite sdktest.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.ScanLog, activities.HandleInput{Ref: info.Ref})
	require.NoError(t, err)
	var sum activities.LogScan
	require.NoError(t, v.Get(&sum))
	require.Equal(t, int64(9), sum.EventCount)
	require.Equal(t, wire.TypeTodoWrite, sum.LastType)
	require.Nil(t, sum.OpenTurn)
	require.NoError(t, a.CloseHandle(context.Background(), activities.HandleInput{Ref: info.Ref}))
}
