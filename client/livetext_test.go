package client

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// chanLive is a LiveSource whose events the test sends; fail ends the
// follow with an error at once.
type chanLive struct {
	ch   chan wire.LiveEvent
	pre  []wire.LiveEvent // yielded before fail
	fail error
}

func (l *chanLive) FollowLive(ctx context.Context, id string) iter.Seq2[wire.LiveEvent, error] {
	return func(yield func(wire.LiveEvent, error) bool) {
		for _, e := range l.pre {
			if !yield(e, nil) {
				return
			}
		}
		if l.fail != nil {
			yield(wire.LiveEvent{}, l.fail)
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-l.ch:
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}

// liveScript is a session running turn 3 (step 1) that claimed m1 until
// end is closed, then idle with the turn ended; WaitTurn answers at the
// end; DescribeWorkflow is counted and finds no model activity.
func liveScript(t *testing.T, end chan struct{}, described, queried *atomic.Int64) *fakeTemporal {
	running := wire.LoopState{State: "running", Turn: 3, Step: 1,
		Recent: []wire.TurnInfo{{Turn: 3, StartSeq: 10, Claimed: []string{"m1"}, Steps: 1}}}
	ended := wire.LoopState{State: "idle", Recent: []wire.TurnInfo{{Turn: 3, StartSeq: 10, EndSeq: 20, Claimed: []string{"m1"},
		Reason: &wire.TurnEndReason{Kind: "completed"}}}}
	return &fakeTemporal{
		query: func(wid, _, q string) (converter.EncodedValue, error) {
			queried.Add(1)
			select {
			case <-end:
				return fakeValue{ended}, nil
			default:
				return fakeValue{running}, nil
			}
		},
		describe: func(string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
			described.Add(1)
			return &workflowservice.DescribeWorkflowExecutionResponse{}, nil
		},
		update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			require.Equal(t, wire.UpdateWaitTurn, opts.UpdateName)
			return &fakeUpdate{workflowID: opts.WorkflowID, get: func() { <-end }, result: ended.Recent[0]}, nil
		},
	}
}

func liveChunk(attempt int32, off int64, text string) wire.LiveEvent {
	return wire.LiveEvent{Event: wire.LiveChunk, Turn: 3, Step: 1, Attempt: attempt, Offset: off, Text: text, Kind: wire.LiveKindText}
}

// TestWatchTurnYieldsLiveTextAsItIsWritten: with a live source, each chunk
// is yielded when it is written, long before the next poll (the interval
// is an hour) and before the message is stored; a retried attempt's reset
// restarts the text, never repeating it; the end marker and the turn's end
// complete it from the stored answer; the heartbeat details are not read
// once live text of the turn arrived.
func TestWatchTurnYieldsLiveTextAsItIsWritten(t *testing.T) {
	end := make(chan struct{})
	var described, queried atomic.Int64
	f := liveScript(t, end, &described, &queried)
	live := &chanLive{ch: make(chan wire.LiveEvent)}
	r := &sliceReader{evs: []session.Event{{Type: "turn/start", Seq: 10},
		{Type: wire.TypeAssistantMessage, Seq: 18, Data: []byte(`{"turn":3,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Hello world!"}]}}`)}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []TurnProgress
	send := func(e wire.LiveEvent) { live.ch <- e }
	for p, err := range New(f, Options{}).WatchTurn(ctx, "w1", "m1", WatchOptions{Interval: time.Hour, Events: r, Live: live}) {
		require.NoError(t, err)
		got = append(got, p)
		switch len(got) {
		case 1:
			require.Equal(t, "started", p.Kind)
			send(wire.LiveEvent{Event: wire.LiveChunk, Turn: 3, Step: 1, Attempt: 1, Text: "hmm", Kind: wire.LiveKindReasoning})
		case 2:
			require.Equal(t, TurnProgress{Kind: "reasoning", Turn: 3, Step: 1}, p)
			send(liveChunk(1, 0, "Hel"))
		case 3:
			require.Equal(t, TurnProgress{Kind: "text", Turn: 3, Step: 1, Text: "Hel"}, p)
			// Attempt 1 is lost; attempt 2 streams the text again.
			send(wire.LiveEvent{Event: wire.LiveReset, Turn: 3, Step: 1, Attempt: 2})
			send(liveChunk(2, 0, "Hello"))
		case 4:
			require.Equal(t, TurnProgress{Kind: "text", Turn: 3, Step: 1, Text: "Hello", Restart: true}, p)
			send(liveChunk(2, 5, " world"))
		case 5:
			require.Equal(t, TurnProgress{Kind: "text", Turn: 3, Step: 1, Text: " world"}, p)
			send(wire.LiveEvent{Event: wire.LiveEnd, Turn: 3, Step: 1, Attempt: 2})
			close(end)
		}
	}
	require.Len(t, got, 7)
	require.Equal(t, TurnProgress{Kind: "text", Turn: 3, Step: 1, Text: "!"}, got[5], "the stored answer completes the text")
	require.Equal(t, "ended", got[6].Kind)
	require.LessOrEqual(t, described.Load(), int64(1), "the heartbeat details are read only before live text of the turn arrived")
	require.LessOrEqual(t, queried.Load(), int64(3), "live text of the running step is yielded without a LoopState query")
	var text strings.Builder
	for _, p := range got {
		if p.Restart {
			text.Reset()
		}
		text.WriteString(p.Text)
	}
	require.Equal(t, "Hello world!", text.String())
}

// TestWatchTurnFallsBackToTheHeartbeatWithoutLiveText: a live source that
// fails (the session is not in the store the client sees, or its follow
// breaks after some text) leaves the text to the heartbeat details.
func TestWatchTurnFallsBackToTheHeartbeatWithoutLiveText(t *testing.T) {
	running := func(step int64) wire.LoopState {
		return wire.LoopState{State: "running", Turn: 3, Step: step,
			Recent: []wire.TurnInfo{{Turn: 3, StartSeq: 10, Claimed: []string{"m1"}, Steps: step}}}
	}
	ended := wire.LoopState{State: "idle", Recent: []wire.TurnInfo{{Turn: 3, StartSeq: 10, EndSeq: 20, Claimed: []string{"m1"},
		Reason: &wire.TurnEndReason{Kind: "completed"}}}}
	for _, live := range []*chanLive{
		{fail: wire.ErrNotFound},
		{pre: []wire.LiveEvent{liveChunk(1, 0, "H")}, fail: errors.New("inotify broke")},
	} {
		var got []TurnProgress
		f := watchScript(t, []wire.LoopState{running(1), running(1), ended},
			[]*wire.ModelProgress{{Turn: 3, Step: 1, Chunks: 1, Text: "Hi", Attempt: 1}, {Turn: 3, Step: 1, Chunks: 2, Text: "Hi!", Attempt: 1}, nil})
		for p, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: 5 * time.Millisecond, Live: live}) {
			require.NoError(t, err)
			got = append(got, p)
		}
		var text strings.Builder
		for _, p := range got {
			text.WriteString(p.Text)
		}
		require.Equal(t, "Hi!", text.String())
		require.Equal(t, "ended", got[len(got)-1].Kind)
	}
}

// TestLiveTextFoldsChunks: the live text of a call, as a heartbeat detail
// would carry it: overlaps dropped, a gap restarting the text at its
// offset, a reset of the same attempt voiding it, a new call starting over.
func TestLiveTextFoldsChunks(t *testing.T) {
	l := newLiveText()
	_, ok := l.progress()
	require.False(t, ok)
	l.apply(liveChunk(1, 0, "abc"))
	l.apply(liveChunk(1, 1, "bcd"))
	p, ok := l.progress()
	require.True(t, ok)
	require.Equal(t, wire.ModelProgress{Turn: 3, Step: 1, Attempt: 1, Chunks: 2, Text: "abcd"}, p)
	l.apply(liveChunk(1, 10, "k"))
	p, _ = l.progress()
	require.Equal(t, wire.ModelProgress{Turn: 3, Step: 1, Attempt: 1, Chunks: 3, TextOffset: 10, Text: "k"}, p)
	l.apply(wire.LiveEvent{Event: wire.LiveReset, Turn: 3, Step: 1, Attempt: 1})
	p, _ = l.progress()
	require.Equal(t, wire.ModelProgress{Turn: 3, Step: 1, Attempt: 1, Chunks: 3}, p)
	l.apply(wire.LiveEvent{Event: wire.LiveChunk, Turn: 3, Step: 2, Attempt: 1, Text: "x", Kind: wire.LiveKindText})
	p, _ = l.progress()
	require.Equal(t, wire.ModelProgress{Turn: 3, Step: 2, Attempt: 1, Chunks: 1, Text: "x"}, p)
}

// TestWatchTurnYieldsLiveTextWhileAQueryHangs: a LoopState query that
// takes long (a busy worker) does not hold up the live text of the step
// the watch follows.
func TestWatchTurnYieldsLiveTextWhileAQueryHangs(t *testing.T) {
	end := make(chan struct{})
	release := make(chan struct{})
	var described, queried atomic.Int64
	f := liveScript(t, end, &described, &queried)
	answer := f.query
	hanging := make(chan struct{}, 100)
	f.query = func(wid, rid, q string) (converter.EncodedValue, error) {
		if queried.Load() >= 1 {
			hanging <- struct{}{}
			// Every query after the first hangs until released (or, for a
			// watch that waits on it, past the test's deadline).
			select {
			case <-release:
			case <-time.After(6 * time.Second):
			}
		}
		return answer(wid, rid, q)
	}
	live := &chanLive{ch: make(chan wire.LiveEvent)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var texts []string
	for p, err := range New(f, Options{}).WatchTurn(ctx, "w1", "m1", WatchOptions{Interval: time.Millisecond, Live: live}) {
		require.NoError(t, err, "the live text waited for the hanging query")
		switch p.Kind {
		case "started":
			// The chunks come while a query hangs.
			go func() { <-hanging; live.ch <- liveChunk(1, 0, "one") }()
		case "text":
			texts = append(texts, p.Text)
			if len(texts) == 1 {
				go func() { live.ch <- liveChunk(1, 3, " two") }()
			} else {
				close(end)
				close(release)
			}
		}
	}
	require.Equal(t, []string{"one", " two"}, texts)
}
