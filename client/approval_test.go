package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Decide sends the Decide update with the request as it is and returns
// the decision recorded.
func TestDecideSendsTheUpdate(t *testing.T) {
	req := wire.DecideRequest{CallID: "c1", Outcome: "allowed-once", Remember: &wire.ApprovalRule{Tool: "run_command", CommandPrefix: "go test"}}
	var got wire.DecideRequest
	f := &fakeTemporal{update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		require.Equal(t, temporalclient.WorkflowUpdateStageCompleted, opts.WaitForStage)
		got = opts.Args[0].(wire.DecideRequest)
		return &fakeUpdate{result: wire.DecideResult{ID: "ap-1", CallID: "c1", Outcome: "allowed-once"}}, nil
	}}
	res, err := New(f, Options{}).Decide(context.Background(), "s1", req)
	require.NoError(t, err)
	require.Equal(t, wire.DecideResult{ID: "ap-1", CallID: "c1", Outcome: "allowed-once"}, res)
	require.Equal(t, req, got)
	require.Equal(t, []string{"update session/s1 Decide"}, f.recorded())
}

// A Decide that names no approval, or has an outcome a caller cannot give,
// is refused before anything is sent.
func TestDecideRefusesBadRequestsBeforeSending(t *testing.T) {
	f := &fakeTemporal{}
	c := New(f, Options{})
	for _, tc := range []struct {
		req  wire.DecideRequest
		want string
	}{
		{wire.DecideRequest{Outcome: "rejected"}, "decide: name the approval by its id or its call's id"},
		{wire.DecideRequest{ID: "ap-1", Outcome: "cancelled"}, `decide: the outcome must be "allowed-once" or "rejected", got "cancelled"`},
		{wire.DecideRequest{ID: "ap-1"}, `decide: the outcome must be "allowed-once" or "rejected", got ""`},
		{wire.DecideRequest{CallID: "c1", Outcome: "rejected", Remember: &wire.ApprovalRule{Tool: "run_command"}},
			`decide: a rule is remembered only with the outcome "allowed-once"`},
	} {
		_, err := c.Decide(context.Background(), "s1", tc.req)
		require.EqualError(t, err, tc.want)
		require.ErrorIs(t, err, ErrInvalidArgument)
	}
	require.Empty(t, f.recorded(), "a refused request was sent")
}

// The session's refusals of a Decide keep their text and class; an
// approval already settled says which outcome stands, whether the details
// hold the outcome or an object with it.
func TestDecideErrors(t *testing.T) {
	decide := func(err error) error {
		f := &fakeTemporal{update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			return &fakeUpdate{err: overTheWire(err)}, nil
		}}
		_, err = New(f, Options{}).Decide(context.Background(), "s1", wire.DecideRequest{CallID: "c1", Outcome: "allowed-once"})
		return err
	}
	all := []error{ErrNoSuchApproval, ErrApprovalSettled, ErrInvalidArgument, ErrNotLive}
	for _, tc := range []struct {
		err     error
		want    error
		msg     string
		outcome string
	}{
		{temporal.NewNonRetryableApplicationError(`Decide: session "s1" has asked no approval of call "c1"`, "NoSuchApproval", nil),
			ErrNoSuchApproval, `Decide: session "s1" has asked no approval of call "c1"`, ""},
		{temporal.NewNonRetryableApplicationError(`Decide: the approval of call "c1" is settled: rejected`, "ApprovalSettled", nil, "rejected"),
			ErrApprovalSettled, `Decide: the approval of call "c1" is settled: rejected`, "rejected"},
		{temporal.NewNonRetryableApplicationError(`Decide: the approval of call "c1" is settled: allowed-once`, "ApprovalSettled", nil,
			wire.DecideResult{ID: "ap-1", CallID: "c1", Outcome: "allowed-once"}),
			ErrApprovalSettled, `Decide: the approval of call "c1" is settled: allowed-once`, "allowed-once"},
		{temporal.NewNonRetryableApplicationError(`Decide: settled`, "ApprovalSettled", nil),
			ErrApprovalSettled, `Decide: settled`, ""},
		{temporal.NewNonRetryableApplicationError(`Decide: the rule's tool "write_file" is not the call's ("run_command")`, "InvalidArgument", nil),
			ErrInvalidArgument, `Decide: the rule's tool "write_file" is not the call's ("run_command")`, ""},
		{temporal.NewNonRetryableApplicationError(`session "s1" is not live (phase disposing)`, "SessionNotLive", nil),
			ErrNotLive, `session "s1" is not live (phase disposing)`, ""},
	} {
		err := decide(tc.err)
		require.EqualError(t, err, tc.msg)
		require.ErrorIs(t, err, tc.want)
		for _, other := range all {
			if other != tc.want {
				require.NotErrorIs(t, err, other)
			}
		}
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, tc.outcome, e.Outcome)
		require.Equal(t, "s1", e.SessionID)
	}

	// A session whose workflow is not running.
	f := &fakeTemporal{update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		return nil, serviceerror.NewNotFound("workflow execution not found")
	}}
	_, err := New(f, Options{}).Decide(context.Background(), "s1", wire.DecideRequest{ID: "ap-1", Outcome: "rejected"})
	require.EqualError(t, err, `decide an approval of session "s1": not running: workflow execution not found`)
	require.ErrorIs(t, err, ErrNotRunning)
}

// SetPermissions sends the update with the request as it is and returns
// the permissions in effect; while a turn runs it is refused as
// TurnRunning.
func TestSetPermissions(t *testing.T) {
	on, rules, timeout := true, []wire.ApprovalRule{{Tool: "write_file", PathPrefix: "src"}}, int64(60000)
	req := wire.SetPermissionsRequest{ApprovalPolicy: "ask", NetworkAccess: &on, Rules: &rules, ApprovalTimeoutMs: &timeout}
	want := wire.Permissions{SandboxMode: "workspace-write", NetworkAccess: true, ApprovalPolicy: "ask", Preset: "workspace-write", Rules: rules, ApprovalTimeoutMs: 60000}
	var got wire.SetPermissionsRequest
	f := &fakeTemporal{update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		got = opts.Args[0].(wire.SetPermissionsRequest)
		return &fakeUpdate{result: want}, nil
	}}
	res, err := New(f, Options{}).SetPermissions(context.Background(), "s1", req)
	require.NoError(t, err)
	require.Equal(t, want, res)
	require.Equal(t, req, got)
	require.Equal(t, []string{"update session/s1 SetPermissions"}, f.recorded())

	f = &fakeTemporal{update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		return &fakeUpdate{err: overTheWire(temporal.NewNonRetryableApplicationError(`agent "s1" is running turn 2; set permissions between turns`, "TurnRunning", nil))}, nil
	}}
	_, err = New(f, Options{}).SetPermissions(context.Background(), "s1", wire.SetPermissionsRequest{ApprovalPolicy: "never"})
	require.EqualError(t, err, `agent "s1" is running turn 2; set permissions between turns`)
	require.ErrorIs(t, err, ErrTurnRunning)
	require.NotErrorIs(t, err, ErrInvalidArgument)
}

// PendingApprovals reads the LoopState query's approvals.
func TestPendingApprovals(t *testing.T) {
	pending := []wire.PendingApproval{
		{ID: "ap-1", CallID: "c1", Tool: "run_command", Turn: 2, Step: 1, Reason: "run_command requires approval in this session",
			Arguments: `{"command":"go test ./..."}`, AskedAtMs: 1000, DeadlineMs: 61000},
		{ID: "ap-2", CallID: "c2", Tool: "write_file", Turn: 2, Step: 1, Arguments: `{"path":"a`, Truncated: true, AskedAtMs: 1001},
	}
	states := []wire.LoopState{{State: "running", Turn: 2, Step: 1, Approvals: pending}, {State: "idle"}}
	i := 0
	f := &fakeTemporal{query: func(wid, _, q string) (converter.EncodedValue, error) {
		require.Equal(t, "session/s1", wid)
		require.Equal(t, wire.QueryLoopState, q)
		i++
		return fakeValue{states[i-1]}, nil
	}}
	c := New(f, Options{})
	got, err := c.PendingApprovals(context.Background(), "s1")
	require.NoError(t, err)
	require.Equal(t, pending, got)
	got, err = c.PendingApprovals(context.Background(), "s1")
	require.NoError(t, err)
	require.Empty(t, got)

	f = &fakeTemporal{query: func(string, string, string) (converter.EncodedValue, error) {
		return nil, serviceerror.NewNotFound("workflow execution not found")
	}}
	_, err = New(f, Options{}).PendingApprovals(context.Background(), "s1")
	require.ErrorIs(t, err, ErrNotRunning)
}

// WatchTurn yields each approval of the watched turn once, with its
// call's state, after the calls' progress; a call that runs to ask, waits
// and runs again once approved is started once; a call rejected while it
// waited is finished without a start.
func TestWatchTurnYieldsApprovals(t *testing.T) {
	recent := []wire.TurnInfo{{Turn: 3, StartSeq: 10, Claimed: []string{"m1"}, Steps: 1}}
	ask1 := wire.PendingApproval{ID: "ap-1", CallID: "c1", Tool: "run_command", Turn: 3, Step: 1, Arguments: `{"command":"make"}`}
	ask2 := wire.PendingApproval{ID: "ap-2", CallID: "c2", Tool: "write_file", Turn: 3, Step: 1, Arguments: `{"path":"a.txt"}`}
	old := wire.PendingApproval{ID: "ap-0", CallID: "c0", Tool: "run_command", Turn: 2, Step: 1}
	call := func(id, name, state string) wire.CallState { return wire.CallState{ID: id, Name: name, State: state} }
	states := []wire.LoopState{
		{State: "running", Turn: 3, Step: 1, Recent: recent, Calls: []wire.CallState{call("c1", "run_command", "running"), call("c2", "write_file", "pending")}},
		{State: "running", Turn: 3, Step: 1, Recent: recent, Calls: []wire.CallState{call("c1", "run_command", "awaiting-approval"), call("c2", "write_file", "pending")},
			Approvals: []wire.PendingApproval{old, ask1}},
		{State: "running", Turn: 3, Step: 1, Recent: recent, Calls: []wire.CallState{call("c1", "run_command", "awaiting-approval"), call("c2", "write_file", "awaiting-approval")},
			Approvals: []wire.PendingApproval{ask1, ask2}},
		{State: "running", Turn: 3, Step: 1, Recent: recent, Calls: []wire.CallState{call("c1", "run_command", "running"), call("c2", "write_file", "done")}},
		{State: "running", Turn: 3, Step: 1, Recent: recent, Calls: []wire.CallState{call("c1", "run_command", "done"), call("c2", "write_file", "done")}},
		{State: "idle", Recent: []wire.TurnInfo{{Turn: 3, StartSeq: 10, EndSeq: 20, Claimed: []string{"m1"}, Steps: 1, Reason: &wire.TurnEndReason{Kind: "completed"}}}},
	}
	f := watchScript(t, states, []*wire.ModelProgress{nil})
	var got []string
	for p, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: time.Millisecond}) {
		require.NoError(t, err)
		s := p.Kind
		if p.Approval != nil {
			s += " " + p.Approval.ID + " " + p.Approval.Arguments
		}
		if p.Call != nil {
			s += " " + p.Call.ID + " " + p.Call.State
		}
		got = append(got, s)
	}
	require.Equal(t, []string{
		"started",
		"tool-started c1 running",
		`approval ap-1 {"command":"make"} c1 awaiting-approval`,
		`approval ap-2 {"path":"a.txt"} c2 awaiting-approval`,
		"tool-finished c2 done",
		"tool-finished c1 done",
		"ended",
	}, got)
}

// An ApprovalSettled error read through errors.As gives the outcome that
// stands; other errors are left alone.
func TestSettledOutcomeLeavesOtherErrors(t *testing.T) {
	plain := errors.New("boom")
	require.Equal(t, plain, settledOutcome(plain))
	require.NoError(t, settledOutcome(nil))
	e := &Error{Type: "NoSuchApproval", Message: "x", Err: overTheWire(temporal.NewNonRetryableApplicationError("x", "NoSuchApproval", nil, "rejected"))}
	require.Same(t, e, settledOutcome(e))
	require.Empty(t, e.Outcome, "only a settled approval has an outcome")
}

// A call last seen waiting for its approval and found finished in the
// ended turn's events (rejected between two polls) is finished without a
// start, as the polls report it.
func TestWatchTurnReplaysARejectedCallWithoutAStart(t *testing.T) {
	mk := func(typ string, seq int64, v any) session.Event {
		e, err := session.NewEvent(typ, seq, 1, v)
		require.NoError(t, err)
		return e
	}
	evs := []session.Event{
		mk("tool/call", 0, map[string]any{"turn": 1, "step": 1, "callId": "c1", "name": "run_command", "arguments": `{"command":"make"}`}),
		mk("tool/result", 1, map[string]any{"turn": 1, "step": 1, "message": map[string]any{"id": "r1", "role": "user",
			"source":  map[string]any{"kind": "tool", "callId": "c1"},
			"content": []any{map[string]any{"type": "tool-result", "toolCallId": "c1", "isError": true, "content": []any{}}}},
			"error": map[string]any{"name": "E", "code": "APPROVAL_REJECTED"}}),
	}
	states := []wire.LoopState{
		{State: "running", Turn: 1, Step: 1, Recent: []wire.TurnInfo{{Turn: 1, Claimed: []string{"m1"}}},
			Calls:     []wire.CallState{{ID: "c1", Name: "run_command", State: "awaiting-approval"}},
			Approvals: []wire.PendingApproval{{ID: "ap-1", CallID: "c1", Tool: "run_command", Turn: 1, Step: 1}}},
		{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, EndSeq: 2, Claimed: []string{"m1"}, Reason: &wire.TurnEndReason{Kind: "completed"}}}},
	}
	f := watchScript(t, states, []*wire.ModelProgress{nil})
	var got []string
	for p, err := range New(f, Options{}).WatchTurn(context.Background(), "w1", "m1", WatchOptions{Interval: time.Millisecond, Events: &sliceReader{evs: evs}}) {
		require.NoError(t, err)
		s := p.Kind
		if p.Call != nil {
			s += " " + p.Call.ID + " " + p.Call.State + " " + p.Call.Code
		}
		got = append(got, s)
	}
	require.Equal(t, []string{"started", "approval c1 awaiting-approval ", "tool-finished c1 done APPROVAL_REJECTED", "ended"}, got)
}
