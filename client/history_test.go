package client

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sessionflow/sessionflow/wire"
)

// fabricatedHistory is the complete history of one run of a workflow type
// "Echo" that returns its string input at once, with the payloads a real
// run records.
func fabricatedHistory(t *testing.T) *historypb.History {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	input, err := dc.ToPayloads("hello")
	require.NoError(t, err)
	at := func(i int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.UTC))
	}
	tq := &taskqueuepb.TaskQueue{Name: "tq", Kind: enumspb.TASK_QUEUE_KIND_NORMAL}
	return &historypb.History{Events: []*historypb.HistoryEvent{
		{EventId: 1, EventTime: at(1), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
				WorkflowType: &commonpb.WorkflowType{Name: "Echo"}, TaskQueue: tq, Input: input,
				WorkflowTaskTimeout: durationpb.New(10 * time.Second), OriginalExecutionRunId: "run-1", FirstExecutionRunId: "run-1", Attempt: 1,
			}}},
		{EventId: 2, EventTime: at(2), EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_WorkflowTaskScheduledEventAttributes{WorkflowTaskScheduledEventAttributes: &historypb.WorkflowTaskScheduledEventAttributes{
				TaskQueue: tq, StartToCloseTimeout: durationpb.New(10 * time.Second), Attempt: 1,
			}}},
		{EventId: 3, EventTime: at(3), EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{
				ScheduledEventId: 2, Identity: "test", RequestId: "req-1",
			}}},
		{EventId: 4, EventTime: at(4), EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
			Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
				ScheduledEventId: 2, StartedEventId: 3, Identity: "test",
			}}},
		{EventId: 5, EventTime: at(5), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes{WorkflowExecutionCompletedEventAttributes: &historypb.WorkflowExecutionCompletedEventAttributes{
				Result: input, WorkflowTaskCompletedEventId: 4,
			}}},
	}}
}

// exportFabricated exports the fabricated history through the client.
func exportFabricated(t *testing.T) ([]byte, *historypb.History) {
	t.Helper()
	hist := fabricatedHistory(t)
	var gotWID, gotRID string
	f := &fakeTemporal{history: func(wid, rid string) temporalclient.HistoryEventIterator {
		gotWID, gotRID = wid, rid
		return &fakeHistory{events: hist.Events}
	}}
	var buf bytes.Buffer
	n, err := New(f, Options{}).ExportHistory(context.Background(), "s1", &buf)
	require.NoError(t, err)
	require.Equal(t, len(hist.Events), n)
	require.Equal(t, "session/s1", gotWID)
	require.Empty(t, gotRID, "the latest run")
	return buf.Bytes(), hist
}

func TestExportHistoryRoundTrip(t *testing.T) {
	out, hist := exportFabricated(t)
	back, err := temporalclient.HistoryFromJSON(bytes.NewReader(out), temporalclient.HistoryJSONOptions{})
	require.NoError(t, err)
	require.True(t, proto.Equal(hist, back), "the SDK's history decoder reads back exactly what was exported")
	require.Contains(t, string(out), `"eventType": "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"`)
	require.Equal(t, byte('\n'), out[len(out)-1])
}

// echo is the workflow of the fabricated history.
func echo(_ workflow.Context, s string) (string, error) { return s, nil }

// sleepy has Echo's name and signature but starts a timer first: a
// non-deterministic change.
func sleepy(ctx workflow.Context, s string) (string, error) {
	if err := workflow.Sleep(ctx, time.Second); err != nil {
		return "", err
	}
	return s, nil
}

func TestExportedHistoryReplays(t *testing.T) {
	out, _ := exportFabricated(t)
	path := filepath.Join(t.TempDir(), "echo.json")
	require.NoError(t, os.WriteFile(path, out, 0o600))

	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(echo, workflow.RegisterOptions{Name: "Echo"})
	require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(quiet, path))

	bad := worker.NewWorkflowReplayer()
	bad.RegisterWorkflowWithOptions(sleepy, workflow.RegisterOptions{Name: "Echo"})
	err := bad.ReplayWorkflowHistoryFromJSONFile(quiet, path)
	require.ErrorContains(t, err, "nondeterministic", "the replay checks the commands against the exported events")
}

func TestExportHistoryErrors(t *testing.T) {
	f := &fakeTemporal{history: func(string, string) temporalclient.HistoryEventIterator {
		return &fakeHistory{err: serviceerror.NewNotFound("workflow execution not found")}
	}}
	var buf bytes.Buffer
	_, err := New(f, Options{}).ExportWorkflowHistory(context.Background(), wire.WorkflowID("s1"), "run-9", &buf)
	require.ErrorIs(t, err, ErrNotRunning)
	require.Zero(t, buf.Len(), "nothing is written on failure")
}
