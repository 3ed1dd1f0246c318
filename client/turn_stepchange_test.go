package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/workflows"
)

// A step whose tool call finished between two polls, the next step already
// streaming: the call's end comes from the log before the next step's text,
// so a terminal shows the tool line before the answer it led to.
func TestWatchTurnYieldsAFinishedStepsCallsBeforeTheNextStepsText(t *testing.T) {
	mk := func(typ string, seq int64, v any) session.Event {
		e, err := session.NewEvent(typ, seq, 1, v)
		require.NoError(t, err)
		return e
	}
	evs := []session.Event{
		mk("tool/call", 3, map[string]any{"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": "{}"}),
		mk("tool/result", 4, map[string]any{"turn": 1, "step": 1, "message": map[string]any{"id": "rc1", "role": "user",
			"source":  map[string]any{"kind": "tool", "callId": "c1"},
			"content": []any{map[string]any{"type": "tool-result", "toolCallId": "c1", "content": []any{}}}}}),
	}
	states := []workflows.LoopState{
		{State: "running", Turn: 1, Step: 1, NextSeq: 3, Recent: []workflows.TurnInfo{{Turn: 1, StartSeq: 0, Claimed: []string{"m1"}}},
			Calls: []workflows.CallState{{ID: "c1", Name: "read_file", State: "running"}}},
		{State: "running", Turn: 1, Step: 2, NextSeq: 6, Recent: []workflows.TurnInfo{{Turn: 1, StartSeq: 0, Claimed: []string{"m1"}}}},
		{State: "idle", Recent: []workflows.TurnInfo{{Turn: 1, EndSeq: 9, Claimed: []string{"m1"}, Reason: &session.TurnEndReason{Kind: "completed"}}}},
	}
	progress := []*agent.ModelProgress{nil, {Turn: 1, Step: 2, Chunks: 1, Text: "The f"}, nil}
	f := watchScript(t, states, progress)
	r := &sliceReader{evs: evs}
	var got []string
	for p, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: time.Millisecond, Events: r}) {
		require.NoError(t, err)
		s := p.Kind
		if p.Call != nil {
			s += " " + p.Call.ID + " " + p.Call.State
		}
		if p.Text != "" {
			s += " " + p.Text
		}
		got = append(got, s)
	}
	require.Equal(t, []string{
		"started",
		"tool-started c1 running",
		"tool-finished c1 done",
		"text The f",
		"ended",
	}, got)
}
