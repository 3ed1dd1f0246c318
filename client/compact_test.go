package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// Compact sends the Compact update with the request and returns its
// result; a compaction that ran and failed is a result, not an error.
func TestCompactSendsTheUpdate(t *testing.T) {
	for _, want := range []wire.CompactResult{
		{CommandID: "cmd-1", Compacted: true, CompactionID: "c-1", Shadowed: 3, ShadowedTokens: 42, Tokens: 120, Window: 2000,
			Text: "Compacted 3 history items (~42 tokens)."},
		{CommandID: "cmd-1", Text: "Compaction cancelled.", Error: "Compaction cancelled."},
	} {
		var got wire.CompactRequest
		f := &fakeTemporal{update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			require.Equal(t, temporalclient.WorkflowUpdateStageCompleted, opts.WaitForStage)
			got = opts.Args[0].(wire.CompactRequest)
			return &fakeUpdate{result: want}, nil
		}}
		res, err := New(f, Options{}).Compact(context.Background(), "é", wire.CompactRequest{CommandID: "cmd-1"})
		require.NoError(t, err)
		require.Equal(t, want, res)
		require.Equal(t, wire.CompactRequest{CommandID: "cmd-1"}, got)
		require.Equal(t, []string{"update session/%C3%A9 Compact"}, f.recorded())
	}
}

// The session's refusals keep their text and class.
func TestCompactErrors(t *testing.T) {
	for _, tc := range []struct {
		typ, msg string
		want     error
	}{
		{"NoRoute", "Compact: the session's agent has no model route (agentOptions provider and model)", ErrNoRoute},
		{"SessionNotLive", `session "s1" is not live (phase disposing)`, ErrNotLive},
		{"InvalidArgument", "Compact: commandId: empty", ErrInvalidArgument},
	} {
		f := &fakeTemporal{update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			return &fakeUpdate{err: overTheWire(temporal.NewNonRetryableApplicationError(tc.msg, tc.typ, nil))}, nil
		}}
		_, err := New(f, Options{}).Compact(context.Background(), "s1", wire.CompactRequest{})
		require.EqualError(t, err, tc.msg)
		require.ErrorIs(t, err, tc.want)
		for _, other := range []error{ErrNoRoute, ErrNotLive, ErrInvalidArgument} {
			if other != tc.want {
				require.NotErrorIs(t, err, other)
			}
		}
	}

	// A session whose workflow is not running.
	f := &fakeTemporal{update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		return nil, serviceerror.NewNotFound("workflow execution not found")
	}}
	_, err := New(f, Options{}).Compact(context.Background(), "s1", wire.CompactRequest{})
	require.EqualError(t, err, `compact session "s1": not running: workflow execution not found`)
	require.ErrorIs(t, err, ErrNotRunning)
}
