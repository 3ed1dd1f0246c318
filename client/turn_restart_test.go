package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// answerEvent is the stored assistant/message of (turn, step) with text.
func answerEvent(t *testing.T, seq, turn, step int64, text string) session.Event {
	e, err := session.NewEvent(wire.TypeAssistantMessage, seq, 1, map[string]any{"turn": turn, "step": step, "stream": []any{},
		"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}}})
	require.NoError(t, err)
	return e
}

// A retried model call streams from offset 0 again: the watch yields its
// text with Restart (not hidden until it outgrows the discarded text),
// ignores the earlier attempt's details still pending, and at the end
// yields only the rest of the stored answer. A step no poll saw is yielded
// whole from the log.
func TestWatchTurnRestartsTheTextOfARetriedCall(t *testing.T) {
	running := func(step int64) wire.LoopState {
		return wire.LoopState{State: "running", Turn: 1, Step: step,
			Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, Claimed: []string{"m1"}, Steps: step}}}
	}
	ended := wire.LoopState{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, EndSeq: 9, Steps: 2, Claimed: []string{"m1"},
		Reason: &wire.TurnEndReason{Kind: "completed"}}}}
	states := []wire.LoopState{running(1), running(1), running(1), running(1), running(1), ended}
	progress := []*wire.ModelProgress{
		{Turn: 1, Step: 1, Attempt: 1, Text: "A long discarded draft"},
		// Attempt 2 started; attempt 1's details are still the pending ones.
		{Turn: 1, Step: 1, Attempt: 1, Text: "A long discarded draft"},
		{Turn: 1, Step: 1, Attempt: 2, Text: "Fin"},
		{Turn: 1, Step: 1, Attempt: 1, Text: "A long discarded draft, more"},
		{Turn: 1, Step: 1, Attempt: 2, Text: "Final"},
		nil,
	}
	f := watchScript(t, states, progress)
	r := &sliceReader{evs: []session.Event{answerEvent(t, 2, 1, 1, "Final answer."), answerEvent(t, 5, 1, 2, "Step two.")}}
	var texts []TurnProgress
	for p, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: time.Millisecond, Events: r}) {
		require.NoError(t, err)
		if p.Kind == ProgressText {
			texts = append(texts, p)
		}
	}
	require.Equal(t, []TurnProgress{
		{Kind: "text", Turn: 1, Step: 1, Text: "A long discarded draft"},
		{Kind: "text", Turn: 1, Step: 1, Text: "Fin", Restart: true},
		{Kind: "text", Turn: 1, Step: 1, Text: "al"},
		{Kind: "text", Turn: 1, Step: 1, Text: " answer."},
		{Kind: "text", Turn: 1, Step: 2, Text: "Step two."},
	}, texts)
}

// When the stored answer does not continue what was yielded (the retry's
// text was never seen by a poll), it is yielded whole with Restart.
func TestWatchTurnRestartsWhenTheStoredAnswerDiffers(t *testing.T) {
	running := wire.LoopState{State: "running", Turn: 1, Step: 1,
		Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, Claimed: []string{"m1"}, Steps: 1}}}
	ended := wire.LoopState{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, EndSeq: 5, Steps: 1, Claimed: []string{"m1"},
		Reason: &wire.TurnEndReason{Kind: "completed"}}}}
	f := watchScript(t, []wire.LoopState{running, ended}, []*wire.ModelProgress{{Turn: 1, Step: 1, Attempt: 1, Text: "Draft"}, nil})
	r := &sliceReader{evs: []session.Event{answerEvent(t, 2, 1, 1, "Other")}}
	var texts []TurnProgress
	for p, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: time.Millisecond, Events: r}) {
		require.NoError(t, err)
		if p.Kind == ProgressText {
			texts = append(texts, p)
		}
	}
	require.Equal(t, []TurnProgress{
		{Kind: "text", Turn: 1, Step: 1, Text: "Draft"},
		{Kind: "text", Turn: 1, Step: 1, Text: "Other", Restart: true},
	}, texts)
}
