package client

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/wire"
)

// Fork starts CreateSession under the new id with a ForkSeed naming the
// turn, in the JSON other SDKs send.
func TestForkStartsCreateSessionNamingTheTurn(t *testing.T) {
	for _, c := range []struct {
		name   string
		atTurn int64
		fork   string
	}{
		{"at turn 2", 2, `{"parentSessionId":"p","count":0,"atTurn":2}`},
		{"at the last turn", 0, `{"parentSessionId":"p","count":0,"atLastTurn":true}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var started temporalclient.StartWorkflowOptions
			var args []any
			f := &fakeTemporal{
				execute: func(opts temporalclient.StartWorkflowOptions, _ any, a []any) (temporalclient.WorkflowRun, error) {
					started, args = opts, a
					return &fakeRun{id: opts.ID, runID: "run-1"}, nil
				},
				update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
					return &fakeUpdate{result: wire.SessionInfo{SessionID: "f"}}, nil
				},
			}
			_, err := New(f, Options{TaskQueue: "tq"}).Fork(context.Background(), ForkRequest{ParentID: "p", NewID: "f", AtTurn: c.atTurn})
			require.NoError(t, err)
			require.Equal(t, "session/f", started.ID)
			require.Len(t, args, 1)
			req := args[0].(wire.CreateSessionRequest)
			require.Equal(t, "f", req.SessionID)
			b, err := json.Marshal(req.Fork)
			require.NoError(t, err)
			require.JSONEq(t, c.fork, string(b))
			require.Equal(t, &wire.SessionMeta{ParentSession: "p", IsSeeded: true}, req.Meta)
			require.Zero(t, req.InheritedEventCount, "the workflow resolves it")
		})
	}
}

func TestForkRefusesBeforeStarting(t *testing.T) {
	for _, c := range []struct {
		req ForkRequest
		msg string
	}{
		{ForkRequest{ParentID: "p"}, "fork: the new session id is required"},
		{ForkRequest{NewID: "f"}, "fork: the parent session id is required"},
		{ForkRequest{ParentID: "p", NewID: "p"}, "fork: the new session id must differ from the parent's"},
		{ForkRequest{ParentID: "p", NewID: "f", AtTurn: -1}, "fork: the turn must be 1 or more (0: the last completed turn), got -1"},
	} {
		f := &fakeTemporal{}
		_, err := New(f, Options{}).Fork(context.Background(), c.req)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, c.msg)
		require.Empty(t, f.recorded())
	}
}
