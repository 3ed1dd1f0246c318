package integration

// The failures a client meets besides the session's own refusals
// (docs/API.md, Errors): an update to a disposed session, a wait pending
// when the workflow is terminated, a reused message id, a wait for the
// turn a crash interrupted after a resume, and a store refusal that is one
// failure. Through the Go client and, as a client in another language
// would, through the `temporal` CLI.

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

// An update to a disposed session is SessionDisposed in the Go client;
// a client of another SDK gets the server's NotFound ("workflow execution
// already completed") and reads the workflow's status: Completed.
func TestUpdateOfDisposedSessionIsTyped(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.agent = scriptedAgent(scripted.Text("hello"))(t)
	w.startWorker()
	id := w.id("disposed-update")
	wid := wire.WorkflowID(id)
	w.track(wid)
	c := w.client()
	_, err := c.Create(w.ctx(), wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	require.NoError(t, err)
	_, err = c.Dispose(w.ctx(), id)
	require.NoError(t, err)

	_, err = c.Followup(w.ctx(), id, wire.InputRequest{Content: json.RawMessage(`"too late"`)})
	require.ErrorIs(t, err, sfclient.ErrSessionDisposed)
	require.ErrorIs(t, err, sfclient.ErrNotRunning)
	require.EqualError(t, err, `Followup to session "`+id+`": the session is disposed: its workflow `+wid+` has completed (resume it to use it again)`)
	_, err = c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{Turn: 1})
	require.ErrorIs(t, err, sfclient.ErrSessionDisposed)

	cli := newTemporalCLI(t, w)
	out, code := cli.update(wid, wire.UpdateFollowup, `{"content":"too late"}`)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "workflow execution already completed")
	var desc struct {
		WorkflowExecutionInfo struct {
			Status string `json:"status"`
		} `json:"workflowExecutionInfo"`
	}
	require.NoError(t, json.Unmarshal([]byte(cli.must("workflow", "describe", "-o", "json", "--workflow-id", wid)), &desc))
	require.Equal(t, "WORKFLOW_EXECUTION_STATUS_COMPLETED", desc.WorkflowExecutionInfo.Status)
}

// A turn interrupted by the termination of its workflow: the wait for it
// that was pending fails typed (the server's
// AcceptedUpdateCompletedWorkflow mapped to WorkflowNotRunning); after a
// resume, the turn the repair closed is among the recent turns, and
// WaitTurn answers it by number and by message id; its message id cannot
// be reused for another message.
func TestInterruptedTurnIsRecentAfterResume(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	args, err := json.Marshal(map[string]string{"command": "sleep 30"})
	require.NoError(t, err)
	w.agent = scriptedAgent(scripted.Response{ToolCalls: []scripted.Call{
		{ID: "c1", Name: "run_command", Arguments: string(args)},
	}}, scripted.Text("after the resume"))(t)
	w.agent.EnableRunCommand = true
	w.startWorker()
	id := w.id("interrupted-recent")
	wid := wire.WorkflowID(id)
	w.track(wid)
	c := w.client()
	route := &wire.AgentOptions{Provider: "scripted", Model: "m1", SandboxMode: "danger-full-access"}
	_, err = c.Create(w.ctx(), wire.CreateSessionRequest{SessionID: id, AgentOptions: route, Meta: &wire.SessionMeta{Cwd: t.TempDir()}})
	require.NoError(t, err)
	_, err = c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"run it"`)})
	require.NoError(t, err)
	w.awaitCond("the RunTool activity pending", func() bool {
		d, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
		return err == nil && len(d.RawResponse.GetPendingActivities()) == 1 &&
			d.RawResponse.GetPendingActivities()[0].GetActivityType().GetName() == wire.RunToolActivity
	})
	waited := make(chan error, 1)
	go func() {
		_, err := c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{Turn: 1})
		waited <- err
	}()
	// The same wait from the `temporal` CLI, a client of another SDK.
	type cliOutcome struct {
		out  string
		code int
	}
	cli := newTemporalCLI(t, w)
	cliWaited := make(chan cliOutcome, 1)
	go func() {
		out, code := cli.update(wid, wire.UpdateWaitTurn, `{"turn":1}`)
		cliWaited <- cliOutcome{out, code}
	}()
	w.awaitCond("both WaitTurn updates accepted", func() bool {
		return acceptedUpdates(w.history(wid, ""), wire.UpdateWaitTurn) == 2
	})
	require.NoError(t, w.c.TerminateWorkflow(w.ctx(), wid, "", "the harness crashed"))
	err = <-waited
	require.ErrorIs(t, err, sfclient.ErrNotRunning)
	require.EqualError(t, err, `WaitTurn to session "`+id+`": not running: its workflow `+wid+
		` was terminated while the update was pending (resume the session: a resume recovers its lease and closes an interrupted turn)`)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	require.Equal(t, "AcceptedUpdateCompletedWorkflow", app.Type())
	viaCLI := <-cliWaited
	require.Equal(t, 1, viaCLI.code, viaCLI.out)
	require.Contains(t, viaCLI.out, "Workflow Update failed because the Workflow completed before the Update completed.")

	_, err = c.Resume(w.ctx(), id, wire.ResumeSessionRequest{AgentOptions: route})
	require.NoError(t, err)
	st, err := c.LoopState(w.ctx(), id)
	require.NoError(t, err)
	require.Len(t, st.Recent, 1, "%+v", st.Recent)
	got := st.Recent[0]
	require.Equal(t, int64(1), got.Turn)
	require.Equal(t, []string{"m1"}, got.Claimed)
	require.Equal(t, int64(1), got.Steps)
	require.NotNil(t, got.Reason)
	require.Equal(t, "interrupted", got.Reason.Kind)
	// The turn/end the repair stored is the seq before EndSeq.
	evs := readAll(t, w, id)
	require.Equal(t, "turn/end", evs[got.EndSeq-1].Type)
	require.JSONEq(t, `{"turn":1,"reason":{"kind":"interrupted"}}`, string(evs[got.EndSeq-1].Data))
	require.Equal(t, "turn/start", evs[got.StartSeq].Type)

	byTurn, err := c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{Turn: 1})
	require.NoError(t, err)
	require.Equal(t, got, byTurn)
	byMessage, err := c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{MessageID: "m1"})
	require.NoError(t, err)
	require.Equal(t, got, byMessage)

	_, err = c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"another message"`)})
	require.ErrorIs(t, err, sfclient.ErrInvalidArgument)
	require.EqualError(t, err, `Followup: message "m1" was already used by turn 1; message ids are unique within a session`)
	_, err = c.Dispose(w.ctx(), id)
	require.NoError(t, err)
}

// A message id names one message: the same message under it again is the
// same call (answered with the turn that stored it), another message is
// refused, so WaitTurn {messageId} never has two turns to choose from.
// The rule holds for the `temporal` CLI as a client too.
func TestReusedMessageIDIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.agent = scriptedAgent(scripted.Text("one"), scripted.Text("two"))(t)
	w.startWorker()
	id := w.id("reused-message-id")
	wid := wire.WorkflowID(id)
	w.track(wid)
	c := w.client()
	_, err := c.Create(w.ctx(), wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	require.NoError(t, err)
	first, err := c.RunTurn(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"first"`)})
	require.NoError(t, err)
	require.Equal(t, int64(1), first.Ended.Turn)

	again, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"first"`)})
	require.NoError(t, err)
	require.Equal(t, int64(1), again.Turn)

	_, err = c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"second"`)})
	require.ErrorIs(t, err, sfclient.ErrInvalidArgument)
	require.EqualError(t, err, `Followup: message "m1" was already used by turn 1; message ids are unique within a session`)
	cli := newTemporalCLI(t, w)
	out, code := cli.update(wid, wire.UpdateSteer, `{"messageId":"m1","content":"second"}`)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `Steer: message \"m1\" was already used by turn 1; message ids are unique within a session`)

	second, err := c.RunTurn(w.ctx(), id, wire.InputRequest{MessageID: "m2", Content: json.RawMessage(`"second"`)})
	require.NoError(t, err)
	require.Equal(t, int64(2), second.Ended.Turn)
	info, err := c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{MessageID: "m1"})
	require.NoError(t, err)
	require.Equal(t, *first.Ended, info)
	_, err = c.Dispose(w.ctx(), id)
	require.NoError(t, err)
}

// A resume of an id the store does not hold fails SessionNotFound, and
// that failure is the whole answer: non-retryable, with no cause (a
// foreign SDK decoded the earlier cause, the store's Go error, as a
// retryable failure of type "*wire.StoreError").
func TestSessionNotFoundIsOneFailure(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.startWorker()
	id := w.id("never-stored")
	wid := wire.WorkflowID(id)
	w.track(wid)
	_, err := w.client().Resume(w.ctx(), id, wire.ResumeSessionRequest{})
	require.ErrorIs(t, err, wire.ErrNotFound)
	var e *sfclient.Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, "SessionNotFound", e.Type)

	// The failure as the server keeps it for every SDK.
	hist := w.history(wid, "")
	last := hist.GetEvents()[len(hist.GetEvents())-1]
	require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, last.GetEventType())
	f := last.GetWorkflowExecutionFailedEventAttributes().GetFailure()
	require.Equal(t, "SessionNotFound", f.GetApplicationFailureInfo().GetType())
	require.True(t, f.GetApplicationFailureInfo().GetNonRetryable())
	require.Nil(t, f.GetCause(), "the failure carries a cause: %v", f.GetCause())
}

// The message ids a run knows travel with continue-as-new: the next run
// refuses another message under an id a turn of the run before stored,
// and WaitTurn {messageId} answers that turn.
func TestMessageIDStaysUsedAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	var answers []scripted.Response
	for range 40 {
		answers = append(answers, scripted.Text("ok"))
	}
	w.agent = scriptedAgent(answers...)(t)
	w.startWorker()
	id := w.id("message-id-can")
	wid := wire.WorkflowID(id)
	w.track(wid)
	c := w.client()
	s, err := c.Create(w.ctx(), wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute, Options: &wire.Options{ContinueAsNewEvents: 100}})
	require.NoError(t, err)
	first, err := c.RunTurn(w.ctx(), id, wire.InputRequest{MessageID: "m0", Content: json.RawMessage(`"turn zero"`)})
	require.NoError(t, err)
	latest := func() string {
		d, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
		require.NoError(t, err)
		return d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	for i := 1; latest() == s.RunID; i++ {
		require.Less(t, i, 15, "the run never continued as new")
		_, err := c.RunTurn(w.ctx(), id, wire.InputRequest{MessageID: "m" + string(rune('a'+i)), Content: json.RawMessage(`"more"`)})
		require.NoError(t, err)
	}
	w.awaitLive(id)
	_, err = c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m0", Content: json.RawMessage(`"not turn zero"`)})
	require.ErrorIs(t, err, sfclient.ErrInvalidArgument)
	require.EqualError(t, err, `Followup: message "m0" was already used by turn 1; message ids are unique within a session`)
	info, err := c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{MessageID: "m0"})
	require.NoError(t, err)
	require.Equal(t, *first.Ended, info)
	_, err = c.Dispose(w.ctx(), id)
	require.NoError(t, err)
}
