package integration

// What a person browsing the Temporal UI sees of a session (docs/API.md,
// Temporal UI): the static summary and details the client starts the
// workflow with, the current details the workflow keeps up to date, and
// each activity's summary. Read as the UI reads them: DescribeWorkflow,
// the SDK's metadata query and the history's user metadata, and with the
// `temporal` CLI (`workflow describe`, `workflow metadata`).

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/wire"
)

// metadataText decodes a user metadata payload (a JSON string).
func metadataText(t *testing.T, p *commonpb.Payload) string {
	t.Helper()
	if p == nil {
		return ""
	}
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &s))
	return s
}

// currentDetails reads a workflow's current details through the SDK's
// metadata query, as the UI does.
func (w *world) currentDetails(wid string) string {
	w.t.Helper()
	v, err := w.c.QueryWorkflow(w.ctx(), wid, "", "__temporal_workflow_metadata")
	require.NoError(w.t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(w.t, v.Get(&md))
	return md.GetCurrentDetails()
}

// activitySummaries lists the summaries of the activities scheduled in the
// history of wid, in order, by activity type.
func (w *world) activitySummaries(wid string) []string {
	w.t.Helper()
	var out []string
	for _, e := range w.history(wid, "").GetEvents() {
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			out = append(out, e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()+": "+
				metadataText(w.t, e.GetUserMetadata().GetSummary()))
		}
	}
	return out
}

// A session started through the client carries its summary and details;
// while its turn runs a command, the current details say which turn and
// which activity, and the RunTool activity is summarised with its turn,
// tool and command; once the turn has ended the details say idle and count
// it.
func TestTemporalUIShowsTheSession(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	args, err := json.Marshal(map[string]string{"command": "sleep 30"})
	require.NoError(t, err)
	w.agent = scriptedAgent(scripted.Response{ToolCalls: []scripted.Call{
		{ID: "c1", Name: "run_command", Arguments: string(args)},
	}}, scripted.Text("done"))(t)
	w.agent.EnableRunCommand = true
	w.startWorker()
	id := w.id("ui-story")
	wid := wire.WorkflowID(id)
	cwd := t.TempDir()
	w.track(wid)
	c := w.client()
	_, err = c.Create(w.ctx(), wire.CreateSessionRequest{SessionID: id, Meta: &wire.SessionMeta{Cwd: cwd},
		AgentOptions: &wire.AgentOptions{Provider: "scripted", Model: "m1", SandboxMode: "danger-full-access"}})
	require.NoError(t, err)

	desc, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
	require.NoError(t, err)
	md := desc.RawResponse.GetExecutionConfig().GetUserMetadata()
	require.Equal(t, "session "+id+" · create · scripted/m1", metadataText(t, md.GetSummary()))
	require.Equal(t, "**session** "+id+"\n**workflow** CreateSession: a new session\n**cwd** "+cwd+
		"\n**model** scripted/m1\n**permissions** sandbox danger-full-access", metadataText(t, md.GetDetails()))
	// The setup stored the permission facts the options set.
	require.Equal(t, "**live · idle** · 0 turns · next seq 3\n**session** "+id+" · **source** startup · **cwd** "+cwd+
		" · **model** scripted/m1\n**latest activity** append 3 events", w.currentDetails(wid))

	_, err = c.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"run it"`)})
	require.NoError(t, err)
	w.awaitCond("the RunTool activity pending", func() bool {
		d, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
		return err == nil && len(d.RawResponse.GetPendingActivities()) == 1 &&
			d.RawResponse.GetPendingActivities()[0].GetActivityType().GetName() == wire.RunToolActivity
	})
	details := w.currentDetails(wid)
	require.Contains(t, details, "**live · running turn 1, step 1** · 1 turn · next seq ")
	require.Contains(t, details, "\n**latest activity** turn 1 · run_command sleep 30")
	sums := w.activitySummaries(wid)
	require.Equal(t, "RunTool: turn 1 · run_command sleep 30", sums[len(sums)-1], "%q", sums)
	require.Contains(t, sums, "CallModel: turn 1 · step 1 · model m1")

	// The `temporal` CLI shows the same.
	cli := newTemporalCLI(t, w)
	out := cli.must("workflow", "describe", "--workflow-id", wid)
	require.Contains(t, out, "session "+id+" · create · scripted/m1")
	out = cli.must("workflow", "metadata", "--workflow-id", wid)
	require.Contains(t, out, "running turn 1, step 1")
	require.Contains(t, out, "turn 1 · run_command sleep 30")

	_, err = c.CancelTurn(w.ctx(), id, wire.CauseUser, false)
	require.NoError(t, err)
	details = w.currentDetails(wid)
	require.True(t, strings.HasPrefix(details, "**live · idle** · 1 turn · next seq "), details)
	require.Contains(t, details, "\n**latest activity** turn 1 · end turn (aborted)")
	w.dispose(id)
}

// After continue-as-new the next run (LiveSession) shows the session in
// its current details as the first did. (The server does not carry the
// static summary to the next run, and the SDK's continue-as-new has no
// option for it: docs/API.md, Temporal UI.)
func TestTemporalUIAfterContinueAsNew(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionZstd)
	w.startWorker()
	id := w.id("ui-can")
	wid := wire.WorkflowID(id)
	w.track(wid)
	c := w.client()
	s, err := c.Create(w.ctx(), wire.CreateSessionRequest{SessionID: id, Options: &wire.Options{ContinueAsNewEvents: 100}})
	require.NoError(t, err)
	first := s.RunID
	seq := int64(0)
	latest := func() string {
		desc, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
		require.NoError(t, err)
		return desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	for i := 0; latest() == first; i++ {
		require.Less(t, i, 100, "the run never continued as new")
		seq = w.appendEvents(id, liveTurn(t, seq, seq/5+1, "turn")).NextSeq
	}
	w.awaitLive(id)
	details := w.currentDetails(wid)
	require.True(t, strings.HasPrefix(details, "**live · idle** · "), details)
	require.Contains(t, details, "**session** "+id+" · **source** startup")
	w.dispose(id)
}
