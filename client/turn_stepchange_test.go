package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
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
	states := []wire.LoopState{
		{State: "running", Turn: 1, Step: 1, NextSeq: 3, Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, Claimed: []string{"m1"}}},
			Calls: []wire.CallState{{ID: "c1", Name: "read_file", State: "running"}}},
		{State: "running", Turn: 1, Step: 2, NextSeq: 6, Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, Claimed: []string{"m1"}}}},
		{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, EndSeq: 9, Claimed: []string{"m1"}, Reason: &wire.TurnEndReason{Kind: "completed"}}}},
	}
	progress := []*wire.ModelProgress{nil, {Turn: 1, Step: 2, Chunks: 1, Text: "The f"}, nil}
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

// The watch's first look at the turn finds a later step already streaming
// (the earlier steps and their calls ran before the first poll): their text
// and calls come from the log before the running step's text, never after
// it, so a terminal shows the steps in order and the answer whole.
func TestWatchTurnFirstSeenOnALaterStepYieldsTheEarlierStepsFirst(t *testing.T) {
	mk := func(typ string, seq int64, v any) session.Event {
		e, err := session.NewEvent(typ, seq, 1, v)
		require.NoError(t, err)
		return e
	}
	evs := []session.Event{
		mk("assistant/message", 2, map[string]any{"turn": 1, "step": 1, "stream": []any{},
			"message": map[string]any{"id": "a1", "role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": "Let me read it."},
				map[string]any{"type": "tool-call", "id": "c1", "name": "read_file", "arguments": "{}"}}}}),
		mk("tool/call", 3, map[string]any{"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": "{}"}),
		mk("tool/result", 4, map[string]any{"turn": 1, "step": 1, "message": map[string]any{"id": "rc1", "role": "user",
			"source":  map[string]any{"kind": "tool", "callId": "c1"},
			"content": []any{map[string]any{"type": "tool-result", "toolCallId": "c1", "content": []any{}}}}}),
		mk("assistant/message", 6, map[string]any{"turn": 1, "step": 2, "stream": []any{},
			"message": map[string]any{"id": "a2", "role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": "The file says alpha."}}}}),
	}
	states := []wire.LoopState{
		{State: "running", Turn: 1, Step: 2, NextSeq: 6, Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, Claimed: []string{"m1"}}}},
		{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, EndSeq: 9, Claimed: []string{"m1"}, Reason: &wire.TurnEndReason{Kind: "completed"}}}},
	}
	progress := []*wire.ModelProgress{{Turn: 1, Step: 2, Chunks: 1, Text: "The f"}, nil}
	f := watchScript(t, states, progress)
	r := &boundedReader{evs: evs}
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
		"text Let me read it.",
		"tool-started c1 running",
		"tool-finished c1 done",
		"text The f",
		"text ile says alpha.",
		"ended",
	}, got)
}

// boundedReader reads the events of seqs [from, to) of its slice, as the
// store does (to < 0: to the end).
type boundedReader struct{ evs []session.Event }

func (r *boundedReader) ReadEvents(_ context.Context, _ string, from, to int64) ([]wire.Event, error) {
	var out []session.Event
	for _, e := range r.evs {
		if e.Seq >= from && (to < 0 || e.Seq < to) {
			out = append(out, e)
		}
	}
	return session.WireEvents(out), nil
}
