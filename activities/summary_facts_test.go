package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

// A summary counts the open turn's pending calls and, among them, those a
// tool/call recorded; after the repair it reports the end-seed marker last.
func TestReadSummaryOpenTurnFactsAndMarker(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	assistant := json.RawMessage(`{"turn":1,"step":1,"message":{"role":"assistant","content":[` +
		`{"type":"tool-call","id":"c1","name":"read","arguments":{}},{"type":"tool-call","id":"c2","name":"read","arguments":{}}]},"stream":[]}`)
	seedSession(t, a, "f", []session.Event{
		ev(t, session.TypeTurnStart, 0, map[string]any{"turn": 1}),
		ev(t, session.TypeStepStart, 1, map[string]any{"turn": 1, "step": 1}),
		ev(t, session.TypeAssistantMessage, 2, assistant),
		ev(t, session.TypeToolCall, 3, map[string]any{"turn": 1, "step": 1, "callId": "c2", "name": "read", "arguments": "{}"}),
	})
	info, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "f", Access: jsonl.AccessWrite, HandleID: "w"})
	require.NoError(t, err)
	sum, err := a.ReadSummary(ctx, activities.HandleInput{Ref: info.Ref})
	require.NoError(t, err)
	require.Equal(t, &activities.OpenTurnFacts{Turn: 1, Step: 1, PendingCalls: 2, RecordedCalls: 1}, sum.OpenTurn)
	require.Equal(t, "tool/call", sum.LastType)
	require.False(t, sum.EndsWithMarker)

	_, err = a.RepairAndMark(ctx, activities.RepairInput{Ref: info.Ref, Now: 9})
	require.NoError(t, err)
	sum, err = a.ReadSummary(ctx, activities.HandleInput{Ref: info.Ref})
	require.NoError(t, err)
	require.Nil(t, sum.OpenTurn)
	require.Equal(t, "session/end-seed", sum.LastType)
	require.True(t, sum.EndsWithMarker)
	require.Equal(t, int64(9), sum.NextSeq)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}

// A stored event the repair scan cannot read fails the summary and the
// repair with a non-retryable InvalidArgument naming the event; nothing is
// appended.
func TestSummaryAndRepairRefuseAnUnreadableEvent(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	seedSession(t, a, "u", []session.Event{
		ev(t, session.TypeTurnStart, 0, map[string]any{"turn": 1}),
		ev(t, session.TypeToolCall, 1, map[string]any{"turn": 1, "step": 1, "name": "read"}),
	})
	info, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "u", Access: jsonl.AccessWrite, HandleID: "w"})
	require.NoError(t, err)
	const want = `session "u": event 1: tool/call event (seq 1): data lacks "callId"`
	_, err = a.ReadSummary(ctx, activities.HandleInput{Ref: info.Ref})
	requireInvalid(t, err, want)
	_, err = a.RepairAndMark(ctx, activities.RepairInput{Ref: info.Ref, Now: 9})
	requireInvalid(t, err, want)
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))

	st := a.Store
	h, err := st.Open(ctx, "u", jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	evs, err := h.Read(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.NoError(t, h.Close(ctx))
}

func requireInvalid(t *testing.T, err error, msg string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %v", err)
	require.Equal(t, "InvalidArgument", app.Type())
	require.True(t, app.NonRetryable())
	require.Equal(t, msg, app.Message())
}
