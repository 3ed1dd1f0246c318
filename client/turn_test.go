package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// watchScript answers LoopState with states in turn (the last one
// repeats) and DescribeWorkflow with the model progress of the same poll.
func watchScript(t *testing.T, states []wire.LoopState, progress []*wire.ModelProgress) *fakeTemporal {
	i := 0
	return &fakeTemporal{
		query: func(wid, _, q string) (converter.EncodedValue, error) {
			require.Equal(t, "session/w1", wid)
			require.Equal(t, wire.QueryLoopState, q)
			s := states[min(i, len(states)-1)]
			i++
			return fakeValue{s}, nil
		},
		describe: func(wid, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
			resp := &workflowservice.DescribeWorkflowExecutionResponse{}
			if p := progress[min(i-1, len(progress)-1)]; p != nil {
				details, err := converter.GetDefaultDataConverter().ToPayloads(*p)
				require.NoError(t, err)
				resp.PendingActivities = []*workflowpb.PendingActivityInfo{
					{ActivityType: &commonpb.ActivityType{Name: wire.RunToolActivity}, State: enumspb.PENDING_ACTIVITY_STATE_STARTED},
					{ActivityType: &commonpb.ActivityType{Name: wire.CallModelActivity}, HeartbeatDetails: details},
				}
			}
			return resp, nil
		},
	}
}

type sliceReader struct {
	evs       []session.Event
	from, to  int64
	readCalls int
}

func (r *sliceReader) ReadEvents(_ context.Context, id string, from, to int64) ([]wire.Event, error) {
	r.readCalls++
	r.from, r.to = from, to
	return session.WireEvents(r.evs), nil
}

func TestWatchTurnYieldsTextToolsAndEnd(t *testing.T) {
	running := func(step int64, calls ...wire.CallState) wire.LoopState {
		return wire.LoopState{State: "running", Turn: 3, Step: step, Calls: calls,
			Recent: []wire.TurnInfo{{Turn: 2, Claimed: []string{"old"}}, {Turn: 3, StartSeq: 10, Claimed: []string{"m1"}, Steps: step}}}
	}
	ended := wire.LoopState{State: "idle", Recent: []wire.TurnInfo{{Turn: 3, StartSeq: 10, EndSeq: 20, Claimed: []string{"m1"},
		Reason: &wire.TurnEndReason{Kind: "completed"}}}}
	states := []wire.LoopState{
		{State: "running", Turn: 2, Pending: wire.PendingInputs{NextTurn: []string{"m1"}}},
		running(1),
		running(1),
		running(1),
		running(1, wire.CallState{ID: "c1", Name: "read_file", State: "running"}, wire.CallState{ID: "c2", Name: "write_file", Index: 1, State: "pending"}),
		running(1, wire.CallState{ID: "c1", Name: "read_file", State: "done"}, wire.CallState{ID: "c2", Name: "write_file", Index: 1, State: "done", IsError: true}),
		running(2),
		ended,
	}
	progress := []*wire.ModelProgress{
		nil,
		{Turn: 3, Step: 1, Reasoning: true},
		{Turn: 3, Step: 1, Chunks: 2, Text: "Hel"},
		{Turn: 3, Step: 1, Chunks: 3, Text: "Hello"},
		nil,
		nil,
		// The window moved past what was shown: a gap.
		{Turn: 3, Step: 2, Chunks: 9, TextOffset: 4, Text: "done."},
		nil,
	}
	f := watchScript(t, states, progress)
	r := &sliceReader{evs: []session.Event{{Type: "turn/start", Seq: 10}}}
	var got []TurnProgress
	for p, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: time.Millisecond, Events: r}) {
		require.NoError(t, err)
		got = append(got, p)
	}
	kinds := make([]string, len(got))
	for i, p := range got {
		kinds[i] = p.Kind
	}
	require.Equal(t, []string{"queued", "started", "reasoning", "text", "text", "tool-started", "tool-finished", "tool-started", "tool-finished", "text", "ended"}, kinds)
	require.Equal(t, "Hel", got[3].Text)
	require.Equal(t, "lo", got[4].Text)
	require.Equal(t, "c1", got[5].Call.ID)
	require.Equal(t, "c1", got[6].Call.ID)
	require.Equal(t, "done", got[6].Call.State)
	require.Equal(t, "c2", got[7].Call.ID)
	require.Equal(t, "running", got[7].Call.State, "a call seen only done is reported started first")
	require.True(t, got[8].Call.IsError)
	require.Equal(t, TurnProgress{Kind: "text", Turn: 3, Step: 2, Text: "done.", Gap: true}, got[9])
	require.Equal(t, int64(20), got[10].Info.EndSeq)
	require.Equal(t, session.WireEvents(r.evs), got[10].Events)
	require.Equal(t, [2]int64{10, 20}, [2]int64{r.from, r.to})
}

// TestWatchTurnAsksAgainWhenNoWorkerAnswers: a LoopState query that times
// out (no worker polls while one restarts) does not end the watch; the next
// answered query goes on with it. Any other query failure ends it.
func TestWatchTurnAsksAgainWhenNoWorkerAnswers(t *testing.T) {
	ended := wire.LoopState{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, Claimed: []string{"m1"},
		Reason: &wire.TurnEndReason{Kind: "completed"}}}}
	answers := []error{context.DeadlineExceeded, serviceerror.NewDeadlineExceeded("query timed out"), nil}
	i := 0
	f := &fakeTemporal{query: func(_, _, _ string) (converter.EncodedValue, error) {
		err := answers[min(i, len(answers)-1)]
		i++
		if err != nil {
			return nil, err
		}
		return fakeValue{ended}, nil
	}}
	var kinds []string
	for p, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: time.Millisecond}) {
		require.NoError(t, err)
		kinds = append(kinds, p.Kind)
	}
	require.Equal(t, []string{"started", "ended"}, kinds)
	require.Equal(t, 3, i)

	f = &fakeTemporal{query: func(_, _, _ string) (converter.EncodedValue, error) {
		return nil, serviceerror.NewNotFound("workflow not found")
	}}
	var errs []error
	for _, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: time.Millisecond}) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorContains(t, errs[0], "workflow not found")
}

func TestWatchTurnUnknownMessage(t *testing.T) {
	f := watchScript(t, []wire.LoopState{{State: "idle"}}, []*wire.ModelProgress{nil})
	var errs []error
	for _, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "gone", WatchOptions{Interval: time.Millisecond}) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], ErrInvalidArgument)
	require.EqualError(t, errs[0], `message "gone" of session "w1" is neither pending nor claimed by a recent turn (discarded by a cancel, or older than the recent turns)`)
}

func TestAnswerText(t *testing.T) {
	msg := func(seq int64, text string) session.Event {
		e, err := session.NewEvent("assistant/message", seq, 1, map[string]any{"turn": 1, "step": 1, "stream": []any{},
			"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}}})
		require.NoError(t, err)
		return e
	}
	require.Equal(t, "second", AnswerText(session.WireEvents([]session.Event{msg(0, "first"), msg(1, "second")})))
	require.Equal(t, "", AnswerText(nil))
}

// Tool calls that ran between two polls are yielded from the ended turn's
// events, once.
func TestWatchTurnReplaysMissedToolCalls(t *testing.T) {
	mk := func(typ string, seq int64, v any) session.Event {
		e, err := session.NewEvent(typ, seq, 1, v)
		require.NoError(t, err)
		return e
	}
	result := func(seq int64, id string, code string) session.Event {
		d := map[string]any{"turn": 1, "step": 1, "message": map[string]any{"id": "r" + id, "role": "user",
			"source":  map[string]any{"kind": "tool", "callId": id},
			"content": []any{map[string]any{"type": "tool-result", "toolCallId": id, "isError": code != "", "content": []any{}}}}}
		if code != "" {
			d["error"] = map[string]any{"name": "E", "code": code}
		}
		return mk("tool/result", seq, d)
	}
	evs := []session.Event{
		mk("tool/call", 0, map[string]any{"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": "{}"}),
		result(1, "c1", ""),
		mk("tool/call", 2, map[string]any{"turn": 1, "step": 1, "callId": "c2", "name": "read_file", "arguments": "{}"}),
		result(3, "c2", "OUTSIDE_CWD"),
		mk("tool/call", 4, map[string]any{"turn": 1, "step": 1, "callId": "c3", "name": "write_file", "arguments": "{}"}),
		result(5, "c3", "ABORTED_BEFORE_DISPATCH"),
		mk("tool/call", 6, map[string]any{"turn": 1, "step": 1, "callId": "c4", "name": "list_dir", "arguments": "{"}),
		result(7, "c4", "MAX_TOKENS_NOT_RUN"),
	}
	states := []wire.LoopState{
		{State: "running", Turn: 1, Step: 1, Recent: []wire.TurnInfo{{Turn: 1, Claimed: []string{"m1"}}},
			Calls: []wire.CallState{{ID: "c1", Name: "read_file", State: "running"}}},
		{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, EndSeq: 8, Claimed: []string{"m1"}, Reason: &wire.TurnEndReason{Kind: "aborted"}}}},
	}
	f := watchScript(t, states, []*wire.ModelProgress{nil})
	var got []string
	for p, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: time.Millisecond, Events: &sliceReader{evs: evs}}) {
		require.NoError(t, err)
		s := p.Kind
		if p.Call != nil {
			s += " " + p.Call.ID + " " + p.Call.Name + " " + p.Call.State + " " + p.Call.Code
		}
		got = append(got, s)
	}
	require.Equal(t, []string{
		"started",
		"tool-started c1 read_file running ",
		"tool-finished c1 read_file done ",
		"tool-started c2 read_file running ",
		"tool-finished c2 read_file done OUTSIDE_CWD",
		"tool-finished c3 write_file skipped ABORTED_BEFORE_DISPATCH",
		"tool-finished c4 list_dir skipped MAX_TOKENS_NOT_RUN",
		"ended",
	}, got)
}
