package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// A summary counts the open turn's pending calls and, among them, those a
// tool/call recorded; after the repair it reports the end-seed marker last.
func TestScanLogOpenTurnFactsAndMarker(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	assistant := json.RawMessage(`{"turn":1,"step":1,"message":{"role":"assistant","content":[` +
		`{"type":"tool-call","id":"c1","name":"read","arguments":{}},{"type":"tool-call","id":"c2","name":"read","arguments":{}}]},"stream":[]}`)
	seedSession(t, a, "f", []session.Event{
		ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1}),
		ev(t, wire.TypeStepStart, 1, map[string]any{"turn": 1, "step": 1}),
		ev(t, wire.TypeAssistantMessage, 2, assistant),
		ev(t, wire.TypeToolCall, 3, map[string]any{"turn": 1, "step": 1, "callId": "c2", "name": "read", "arguments": "{}"}),
	})
	info, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "f", Access: jsonl.AccessWrite, HandleID: "w"})
	require.NoError(t, err)
	sum, err := a.ScanLog(ctx, activities.HandleInput{Ref: info.Ref})
	require.NoError(t, err)
	require.Equal(t, &activities.OpenTurnFacts{Turn: 1, Step: 1, PendingCalls: 2, RecordedCalls: 1}, sum.OpenTurn)
	require.Equal(t, "tool/call", sum.LastType)
	require.False(t, sum.EndsWithMarker)

	_, err = a.Repair(ctx, activities.RepairInput{Ref: info.Ref, Now: 9})
	require.NoError(t, err)
	sum, err = a.ScanLog(ctx, activities.HandleInput{Ref: info.Ref})
	require.NoError(t, err)
	require.Nil(t, sum.OpenTurn)
	require.Equal(t, "session/end-seed", sum.LastType)
	require.True(t, sum.EndsWithMarker)
	require.Equal(t, int64(9), sum.NextSeq)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}

// A stored event the repair scan cannot read (a tool/call without callId,
// which the store's append refuses, so it is written into the log file by
// hand) fails the summary and the repair with a non-retryable
// InvalidArgument naming the event; nothing is appended.
func TestScanAndRepairRefuseAnUnreadableEvent(t *testing.T) {
	root := t.TempDir()
	newStore := func() *jsonl.Store {
		st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone})
		require.NoError(t, err)
		return st
	}
	ctx := context.Background()
	seedSession(t, &activities.Activities{Runtime: &activities.Runtime{Store: newStore()}}, "u", []session.Event{
		ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1}),
		ev(t, wire.TypeToolCall, 1, map[string]any{"turn": 1, "step": 1, "callId": "zz", "name": "read"}),
	})
	snap, err := newStore().Stat(ctx, "u")
	require.NoError(t, err)
	raw, err := os.ReadFile(snap.Path)
	require.NoError(t, err)
	edited := strings.Replace(string(raw), `"turn":1}`, `"turn":"1"}`, 1)
	require.NotEqual(t, string(raw), edited)
	require.NoError(t, os.WriteFile(snap.Path, []byte(edited), 0o644))

	a := &activities.Activities{Runtime: &activities.Runtime{Store: newStore()}}
	info, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "u", Access: jsonl.AccessWrite, HandleID: "w"})
	require.NoError(t, err)
	const want = `session "u": event 0: turn/start event (seq 0): malformed data: must be a safe integer, got "1"`
	_, err = a.ScanLog(ctx, activities.HandleInput{Ref: info.Ref})
	requireInvalid(t, err, want)
	_, err = a.Repair(ctx, activities.RepairInput{Ref: info.Ref, Now: 9})
	requireInvalid(t, err, want)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))

	after, err := os.ReadFile(snap.Path)
	require.NoError(t, err)
	require.Equal(t, edited, string(after), "the log changed")
}

func requireInvalid(t *testing.T, err error, msg string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	require.Equal(t, "InvalidArgument", app.Type())
	require.True(t, app.NonRetryable())
	require.Equal(t, msg, app.Message())
}
