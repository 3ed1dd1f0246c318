package client

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// closedFake is a Temporal whose updates fail with updateErr (from the
// handle's Get when accepted) and whose latest run of every id has status.
func closedFake(status enumspb.WorkflowExecutionStatus, accepted bool, updateErr error) *fakeTemporal {
	return &fakeTemporal{
		update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			if accepted {
				return &fakeUpdate{workflowID: opts.WorkflowID, err: updateErr}, nil
			}
			return nil, updateErr
		},
		describe: func(string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
			return &workflowservice.DescribeWorkflowExecutionResponse{
				WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: status}}, nil
		},
	}
}

// An update to a session whose workflow completed (disposed) is
// ErrSessionDisposed, which is also ErrNotRunning; to one whose workflow
// was terminated, ErrNotRunning naming the status and the resume.
func TestUpdateOfAClosedSessionIsTyped(t *testing.T) {
	completed := serviceerror.NewNotFound("workflow execution already completed")
	c := New(closedFake(enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, false, completed), Options{})
	_, err := c.Followup(context.Background(), "s1", wire.InputRequest{Content: []byte(`"hi"`)})
	require.ErrorIs(t, err, ErrSessionDisposed)
	require.ErrorIs(t, err, ErrNotRunning)
	require.ErrorIs(t, err, completed)
	require.EqualError(t, err, `Followup to session "s1": the session is disposed: its workflow session/s1 has completed (resume it to use it again)`)

	c = New(closedFake(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, false, completed), Options{})
	_, err = c.WaitTurn(context.Background(), "s1", wire.WaitTurnRequest{Turn: 3})
	require.ErrorIs(t, err, ErrNotRunning)
	require.False(t, errors.Is(err, ErrSessionDisposed))
	require.EqualError(t, err, `WaitTurn to session "s1": not running: its workflow session/s1 was terminated (resume the session: a resume recovers its lease and closes an interrupted turn)`)

	// No execution at all: the plain NotRunning of callError.
	f := closedFake(0, false, serviceerror.NewNotFound("workflow not found"))
	f.describe = nil
	_, err = New(f, Options{}).Steer(context.Background(), "s1", wire.InputRequest{Content: []byte(`"hi"`)})
	require.ErrorIs(t, err, ErrNotRunning)
	require.EqualError(t, err, `Steer to session "s1": not running: workflow not found`)
}

// A wait accepted by a run that is then terminated fails on the server
// with AcceptedUpdateCompletedWorkflow; the client says what happened to
// the run.
func TestWaitOutlivingItsRunIsTyped(t *testing.T) {
	outlived := temporal.NewNonRetryableApplicationError("Workflow Update failed because the Workflow completed before the Update completed.", "AcceptedUpdateCompletedWorkflow", nil)
	c := New(closedFake(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, true, outlived), Options{})
	_, err := c.WaitTurn(context.Background(), "s1", wire.WaitTurnRequest{Turn: 2})
	require.ErrorIs(t, err, ErrNotRunning)
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, "WorkflowNotRunning", e.Type)
	require.EqualError(t, err, `WaitTurn to session "s1": not running: its workflow session/s1 was terminated while the update was pending (resume the session: a resume recovers its lease and closes an interrupted turn)`)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "the server's failure stays the cause")
	require.Equal(t, "AcceptedUpdateCompletedWorkflow", app.Type())

	// A session's own typed failure is left as it is.
	refusal := temporal.NewNonRetryableApplicationError("no turn", wire.ErrTypeNoSuchTurn, nil)
	c = New(closedFake(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, true, refusal), Options{})
	_, err = c.WaitTurn(context.Background(), "s1", wire.WaitTurnRequest{Turn: 2})
	require.ErrorIs(t, err, ErrNoSuchTurn)
}

// Create, Resume and LoopStart start their workflows with the summary and
// details the Temporal UI shows (wire.CreateSummary, ...).
func TestStartsCarryTheirSummary(t *testing.T) {
	var starts []temporalclient.StartWorkflowOptions
	f := &fakeTemporal{
		execute: func(opts temporalclient.StartWorkflowOptions, _ any, _ []any) (temporalclient.WorkflowRun, error) {
			starts = append(starts, opts)
			return &fakeRun{id: opts.ID, runID: "r"}, nil
		},
		update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			return &fakeUpdate{workflowID: opts.WorkflowID, result: wire.SessionInfo{SessionID: "s1"}}, nil
		},
	}
	c := New(f, Options{TaskQueue: "q"})
	_, err := c.Create(context.Background(), wire.CreateSessionRequest{SessionID: "s1", AgentOptions: &wire.AgentOptions{Provider: "p", Model: "m"}})
	require.NoError(t, err)
	_, err = c.Resume(context.Background(), "s1", wire.ResumeSessionRequest{})
	require.NoError(t, err)
	_, err = c.LoopStart(context.Background(), "l1", wire.SessionLoopInput{})
	require.NoError(t, err)
	require.Len(t, starts, 3)
	require.Equal(t, "session s1 · create · p/m", starts[0].StaticSummary)
	require.Equal(t, "**session** s1\n**workflow** CreateSession: a new session\n**model** p/m", starts[0].StaticDetails)
	require.Equal(t, "session s1 · resume", starts[1].StaticSummary)
	require.Contains(t, starts[1].StaticDetails, "**workflow** ResumeSession")
	require.Equal(t, "session loop l1", starts[2].StaticSummary)
	require.Equal(t, "**loop** l1\n**sessions start on** the loop's own task queue", starts[2].StaticDetails)
}
