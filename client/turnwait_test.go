package client

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

func endedTurn(msg string) wire.TurnInfo {
	return wire.TurnInfo{Turn: 4, StartSeq: 30, EndSeq: 36, Steps: 1, Claimed: []string{msg},
		Reason: &wire.TurnEndReason{Kind: "completed"}}
}

// A wait the session gave up to continue as new is sent again; the next
// answer is returned.
func TestWaitTurnSendsAgainWhenMoved(t *testing.T) {
	var mu sync.Mutex
	var sent []wire.WaitTurnRequest
	f := &fakeTemporal{update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		require.Equal(t, "session/w1", opts.WorkflowID)
		require.Equal(t, "WaitTurn", opts.UpdateName)
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, opts.Args[0].(wire.WaitTurnRequest))
		if len(sent) == 1 {
			return &fakeUpdate{err: overTheWire(temporal.NewApplicationError(`agent "w1" continues as new; wait for the turn again`, "TurnWaitMoved"))}, nil
		}
		return &fakeUpdate{result: endedTurn("m1")}, nil
	}}
	info, err := New(f, Options{}).WaitTurn(context.Background(), "w1", wire.WaitTurnRequest{MessageID: "m1"})
	require.NoError(t, err)
	require.Equal(t, endedTurn("m1"), info)
	require.Equal(t, []wire.WaitTurnRequest{{MessageID: "m1"}, {MessageID: "m1"}}, sent)
}

// The workflow's refusals keep their class.
func TestWaitTurnErrors(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want error
	}{{"NoSuchTurn", ErrNoSuchTurn}, {"LifecycleDisposed", ErrLifecycleDisposed}} {
		f := &fakeTemporal{update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			return &fakeUpdate{err: overTheWire(temporal.NewNonRetryableApplicationError("refused", tc.typ, nil))}, nil
		}}
		_, err := New(f, Options{}).WaitTurn(context.Background(), "w1", wire.WaitTurnRequest{Turn: 9})
		require.ErrorIs(t, err, tc.want)
		require.Len(t, f.recorded(), 1, "a refusal is not sent again")
	}
}

// RunTurn sends one Followup that waits, with a message id of its own
// when the caller gives none, and returns the ended turn.
func TestRunTurnWaitsForTheTurn(t *testing.T) {
	var got wire.InputRequest
	f := &fakeTemporal{update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		require.Equal(t, "Followup", opts.UpdateName)
		got = opts.Args[0].(wire.InputRequest)
		e := endedTurn(got.MessageID)
		return &fakeUpdate{result: wire.InputResult{MessageID: got.MessageID, Target: "next-turn", SplicedSeq: -1, Ended: &e}}, nil
	}}
	res, err := New(f, Options{}).RunTurn(context.Background(), "w1", wire.InputRequest{Content: json.RawMessage(`"hi"`)})
	require.NoError(t, err)
	require.True(t, got.Wait)
	require.True(t, strings.HasPrefix(got.MessageID, "msg-"), got.MessageID)
	require.Equal(t, `"hi"`, string(got.Content))
	require.Equal(t, got.MessageID, res.MessageID)
	require.Equal(t, "completed", res.Ended.Reason.Kind)
	require.Equal(t, []string{"update session/w1 Followup"}, f.recorded())

	// A Followup whose wait moved is followed by a WaitTurn of its message.
	var names []string
	f = &fakeTemporal{update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		names = append(names, opts.UpdateName)
		if opts.UpdateName == "Followup" {
			return &fakeUpdate{err: overTheWire(temporal.NewApplicationError("moved", "TurnWaitMoved"))}, nil
		}
		require.Equal(t, wire.WaitTurnRequest{MessageID: "mine"}, opts.Args[0])
		return &fakeUpdate{result: endedTurn("mine")}, nil
	}}
	res, err = New(f, Options{}).RunTurn(context.Background(), "w1", wire.InputRequest{MessageID: "mine", Content: json.RawMessage(`"hi"`)})
	require.NoError(t, err)
	require.Equal(t, []string{"Followup", "WaitTurn"}, names)
	require.Equal(t, "mine", res.MessageID)
	require.Equal(t, int64(4), res.Ended.Turn)
}

// WatchTurn sees the end when its WaitTurn completes, without waiting for
// the next poll.
func TestWatchTurnEndsWithTheWait(t *testing.T) {
	running := wire.LoopState{State: "running", Turn: 4, Step: 1, Recent: []wire.TurnInfo{{Turn: 4, StartSeq: 30, Claimed: []string{"m1"}, Steps: 1}}}
	ended := wire.LoopState{State: "idle", Recent: []wire.TurnInfo{endedTurn("m1")}}
	firstPoll := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	done := false
	f := &fakeTemporal{
		query: func(_, _, _ string) (converter.EncodedValue, error) {
			mu.Lock()
			defer mu.Unlock()
			once.Do(func() { close(firstPoll) })
			if done {
				return fakeValue{ended}, nil
			}
			return fakeValue{running}, nil
		},
		update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			require.Equal(t, "WaitTurn", opts.UpdateName)
			require.Equal(t, wire.WaitTurnRequest{MessageID: "m1"}, opts.Args[0])
			return &fakeUpdate{result: endedTurn("m1"), get: func() {
				<-firstPoll
				mu.Lock()
				done = true
				mu.Unlock()
			}}, nil
		},
	}
	f.describe = func(string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
		return &workflowservice.DescribeWorkflowExecutionResponse{}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var kinds []string
	for p, err := range New(f, Options{}).WatchTurn(ctx, "w1", "m1", WatchOptions{Interval: time.Hour}) {
		require.NoError(t, err)
		kinds = append(kinds, p.Kind)
	}
	require.Equal(t, []string{"started", "ended"}, kinds)
	require.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}
