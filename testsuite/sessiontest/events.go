package sessiontest

// Builders of the session events the tests drive sessions with.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Ev builds a valid event of type typ at seq, with time 1000+seq.
func Ev(t testing.TB, typ string, seq int64, data any) session.Event {
	t.Helper()
	e, err := session.NewEvent(typ, seq, 1000+seq, data)
	require.NoError(t, err)
	return e
}

// TurnStart opens turn at seq.
func TurnStart(t testing.TB, seq, turn int64) session.Event {
	return Ev(t, wire.TypeTurnStart, seq, map[string]any{"turn": turn})
}

// TurnEnd completes turn at seq.
func TurnEnd(t testing.TB, seq, turn int64) session.Event {
	return Ev(t, wire.TypeTurnEnd, seq, map[string]any{"turn": turn, "reason": map[string]any{"kind": "completed"}})
}

// AssistantText is an assistant message with one text block in step 1, in
// the shape the published harness reads (an id and a model source).
func AssistantText(t testing.TB, seq, turn int64, text string) session.Event {
	e := Ev(t, wire.TypeAssistantMessage, seq, map[string]any{
		"turn": turn, "step": 1,
		"message": map[string]any{
			"id": fmt.Sprintf("assistant-%d", seq), "role": "assistant",
			"content": []any{map[string]any{"type": "text", "text": text}},
			"source":  map[string]any{"kind": "model", "provider": "scripted", "model": "test"},
		},
	})
	e.SurfaceOp = session.AppendOp()
	return e
}

// LiveTurn is a complete turn of five events starting at seq.
func LiveTurn(t testing.TB, seq, turn int64, text string) []session.Event {
	return []session.Event{
		TurnStart(t, seq, turn),
		Ev(t, wire.TypeStepStart, seq+1, map[string]any{"turn": turn, "step": 1}),
		AssistantText(t, seq+2, turn, text),
		Ev(t, wire.TypeStepEnd, seq+3, map[string]any{"turn": turn, "step": 1}),
		TurnEnd(t, seq+4, turn),
	}
}
