package integration

// An update whose input is larger than the server's blob limit must not
// reach a session: the SDK echoes the request into the workflow's answer,
// and the server terminates a workflow whose answer is too large
// (docs/API.md: Update input limit, docs/DECISIONS.md D75).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

// TestOversizedUpdateKeepsTheSession sends a Steer of 3,000,000 bytes the
// way any SDK would (the raw UpdateWorkflowExecution request), once while a
// turn runs and once while the session is idle, each time delivered with a
// regular workflow task (the case in which the server terminated the run).
// The session must survive both: still running, the lease its own, nothing
// of the oversized input stored, the running turn ending and the next turns
// working. The Go client refuses such inputs itself, typed.
func TestOversizedUpdateKeepsTheSession(t *testing.T) {
	w := newWorld(t, shared, jsonl.CompressionNone)
	// The first model call of the session stalls after two chunks until it
	// is cancelled (its retry answers); every later call answers at once.
	p, err := scripted.New(scripted.Responses(
		scripted.Response{Text: "partial answer", ChunkSize: 4, Stall: &scripted.Stall{AfterChunks: 2, Attempts: 1}},
		scripted.Text("answer"), scripted.Text("answer"), scripted.Text("answer"), scripted.Text("answer"),
	))
	require.NoError(t, err)
	w.agent = workerapp.AgentConfig{Providers: provider.Set{"scripted": p}}
	r := w.startWorker()
	id := w.id("oversized-update")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	w.awaitLive(id)
	c := w.client()

	in, err := c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"tell me"`)})
	require.NoError(t, err)
	for p, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 20 * time.Millisecond}) {
		require.NoError(t, err)
		if p.Kind == sfclient.ProgressText {
			break
		}
	}
	state, err := c.LoopState(w.ctx(), id)
	require.NoError(t, err)
	require.Equal(t, "running", state.State, "turn 1 should be running")

	big := strings.Repeat("x", 3_000_000)
	r, err = w.oversizedSteer(r, wid, "big-running", big)
	requireSessionIntact(t, w, id, run.GetRunID())
	requireInFlightLimit(t, err)

	// Turn 1 ends (its model call is retried by the new worker) and the
	// next turn runs.
	info, err := c.WaitTurn(w.ctx(), id, wire.WaitTurnRequest{Turn: 1})
	require.NoError(t, err)
	require.NotNil(t, info.Reason, "turn 1 ended without a reason")
	res, err := c.RunTurn(w.ctx(), id, wire.InputRequest{MessageID: "m2", Content: json.RawMessage(`"again"`)})
	require.NoError(t, err)
	require.NotNil(t, res.Ended)
	require.Equal(t, "completed", res.Ended.Reason.Kind)

	// Idle: the same input, again on a regular workflow task.
	state, err = c.LoopState(w.ctx(), id)
	require.NoError(t, err)
	require.Equal(t, "idle", state.State)
	r, err = w.oversizedSteer(r, wid, "big-idle", big)
	requireSessionIntact(t, w, id, run.GetRunID())
	requireInFlightLimit(t, err)
	res, err = c.RunTurn(w.ctx(), id, wire.InputRequest{MessageID: "m3", Content: json.RawMessage(`"once more"`)})
	require.NoError(t, err)
	require.Equal(t, "completed", res.Ended.Reason.Kind)

	// The Go client refuses an oversized input before sending it, typed.
	for _, size := range []int{1_400_000, 10_000_000} {
		content, err := json.Marshal(strings.Repeat("y", size))
		require.NoError(t, err)
		_, err = c.Steer(w.ctx(), id, wire.InputRequest{MessageID: "too-big", Content: content})
		require.ErrorIs(t, err, sfclient.ErrInputTooLarge)
		require.Contains(t, err.Error(), "exceeds the update input limit of 1310720 bytes")
		_, err = c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "too-big", Content: content})
		require.ErrorIs(t, err, sfclient.ErrInputTooLarge)
	}
	requireSessionIntact(t, w, id, run.GetRunID())

	evs := w.storedEvents(id)
	for _, e := range evs {
		if e.Type == wire.TypeUserMessage {
			var m struct {
				ID string `json:"id"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &m))
			require.True(t, m.ID == "m1" || m.ID == "m2" || m.ID == "m3", "stored an input that was refused: %q", m.ID)
		}
	}
	_ = r
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	require.Nil(t, w.lease(id), "the lease outlived the disposed session")
}

// oversizedSteer stops the worker r, signals Abort to the live session
// (ignored once live, so the next workflow task is a regular one), sends a
// Steer of content as a raw UpdateWorkflowExecution request, and starts a
// new worker once the server either refused the update or admitted it. It
// returns the new worker and the update's error.
func (w *world) oversizedSteer(r *workerapp.Running, wid, updateID, content string) (*workerapp.Running, error) {
	t := w.t
	t.Helper()
	require.NoError(t, r.Stop())
	require.NoError(t, w.c.SignalWorkflow(w.ctx(), wid, "", wire.SignalAbort, wire.AbortRequest{Reason: "regular task"}))
	text, err := json.Marshal(content)
	require.NoError(t, err)
	args, err := converter.GetDefaultDataConverter().ToPayloads(wire.InputRequest{MessageID: updateID, Content: text})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(w.ctx(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := w.c.WorkflowService().UpdateWorkflowExecution(ctx, &workflowservice.UpdateWorkflowExecutionRequest{
			Namespace:         shared.namespace,
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid},
			Request: &updatepb.Request{
				Meta:  &updatepb.Meta{UpdateId: updateID, Identity: clientIdentity},
				Input: &updatepb.Input{Name: wire.UpdateSteer, Args: args},
			},
			WaitPolicy: &updatepb.WaitPolicy{LifecycleStage: enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED},
		})
		done <- err
	}()
	// Start the worker only once the server has decided: refused (the call
	// returned), or admitted (the update is known), so that the update
	// travels with the regular task the signal scheduled.
	var updErr error
	returned := false
	w.awaitCond("the server refusing or admitting update "+updateID, func() bool {
		select {
		case updErr = <-done:
			returned = true
			return true
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		_, err := w.c.WorkflowService().PollWorkflowExecutionUpdate(pctx, &workflowservice.PollWorkflowExecutionUpdateRequest{
			Namespace:  shared.namespace,
			UpdateRef:  &updatepb.UpdateRef{WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid}, UpdateId: updateID},
			WaitPolicy: &updatepb.WaitPolicy{LifecycleStage: enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED},
		})
		var nf *serviceerror.NotFound
		return !errors.As(err, &nf)
	})
	next := w.startWorker()
	if !returned {
		select {
		case updErr = <-done:
		case <-ctx.Done():
			t.Fatalf("the oversized update %s got no answer: %v", updateID, ctx.Err())
		}
	}
	return next, updErr
}

// requireInFlightLimit asserts that err is the server's refusal of an
// update beyond the in-flight payload limit the servers run with.
func requireInFlightLimit(t *testing.T, err error) {
	t.Helper()
	var re *serviceerror.ResourceExhausted
	require.ErrorAs(t, err, &re, "the oversized update was not refused by the server")
	require.Contains(t, re.Message, "limit on total payload size of in-flight updates has been reached (1572864 bytes)")
}

// requireSessionIntact asserts that session id still runs in run runID,
// live, and that its lease is held by that run.
func requireSessionIntact(t *testing.T, w *world, id, runID string) {
	t.Helper()
	wid := wire.WorkflowID(id)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, w.status(wid), "session %s no longer runs", id)
	require.Equal(t, wire.PhaseLive, w.describe(id).Phase)
	l := w.lease(id)
	require.NotNil(t, l, "session %s holds no lease", id)
	require.Equal(t, wid, l.Owner.WorkflowID)
	require.Equal(t, runID, l.Owner.RunID, "the lease is not held by the session's run")
}
