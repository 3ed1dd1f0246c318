package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// execInfo is a visibility record; sa holds Keyword search attributes.
func execInfo(t *testing.T, wid, rid, typ string, started time.Time, sa map[string]string) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	info := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: rid},
		Type:      &commonpb.WorkflowType{Name: typ},
		StartTime: timestamppb.New(started),
	}
	if sa != nil {
		fields := map[string]*commonpb.Payload{}
		for k, v := range sa {
			p, err := converter.GetDefaultDataConverter().ToPayload(v)
			require.NoError(t, err)
			fields[k] = p
		}
		info.SearchAttributes = &commonpb.SearchAttributes{IndexedFields: fields}
	}
	return info
}

// startedEvent is the first history event of a run started with input.
func startedEvent(t *testing.T, input any) *historypb.HistoryEvent {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(input)
	require.NoError(t, err)
	return &historypb.HistoryEvent{EventId: 1, Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
		WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: p}}}
}

func TestList(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	pages := [][]*workflowpb.WorkflowExecutionInfo{
		{
			execInfo(t, "session/zeta", "r-z", wire.CreateSessionName, t0, map[string]string{
				"SessionId": "zeta", "SessionPhase": "setup", "SessionCwd": "/z"}),
			execInfo(t, "session/beta", "r-b", wire.CreateSessionName, t0.Add(time.Minute), nil),
		},
		{
			execInfo(t, "session/alpha", "r-a", wire.LiveSessionName, t0.Add(2*time.Minute), nil),
			execInfo(t, "session/gamma", "r-g", wire.ResumeSessionName, t0.Add(3*time.Minute), nil),
		},
	}
	var queries []string
	f := &fakeTemporal{
		list: func(req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
			queries = append(queries, req.Query)
			if len(req.NextPageToken) == 0 {
				return &workflowservice.ListWorkflowExecutionsResponse{Executions: pages[0], NextPageToken: []byte("p2")}, nil
			}
			require.Equal(t, "p2", string(req.NextPageToken))
			return &workflowservice.ListWorkflowExecutionsResponse{Executions: pages[1]}, nil
		},
		query: func(wid, rid, q string) (converter.EncodedValue, error) {
			switch wid {
			case "session/beta":
				require.Equal(t, "r-b", rid, "the listed run is described")
				return fakeValue{wire.Description{SessionID: "beta", Phase: wire.PhaseLive}}, nil
			case "session/alpha":
				return fakeValue{wire.Description{SessionID: "alpha", Phase: wire.PhaseDisposing}}, nil
			}
			return nil, errors.New("no poller seen for task queue")
		},
		history: func(wid, rid string) temporalclient.HistoryEventIterator {
			switch wid {
			case "session/beta":
				return &fakeHistory{events: []*historypb.HistoryEvent{startedEvent(t, wire.CreateSessionRequest{SessionID: "beta", Meta: &wire.SessionMeta{Cwd: "/b"}})}}
			case "session/alpha":
				return &fakeHistory{events: []*historypb.HistoryEvent{startedEvent(t, workflows.LiveState{SessionID: "alpha",
					Handle: jsonl.HandleRef{SessionID: "alpha", HandleID: "h", Access: jsonl.AccessWrite}, Header: wire.Header{ID: "alpha", Cwd: "/a"}})}}
			}
			t.Errorf("history of %s read: a ResumeSession input has no cwd", wid)
			return &fakeHistory{}
		},
	}
	got, err := New(f, Options{}).List(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{ListQuery, ListQuery}, queries)
	require.Equal(t, "WorkflowType IN ('CreateSession', 'ResumeSession', 'LiveSession') AND ExecutionStatus = 'Running'", ListQuery)
	require.Equal(t, []ListedSession{
		{SessionID: "alpha", WorkflowID: "session/alpha", RunID: "r-a", WorkflowType: wire.LiveSessionName, StartTime: t0.Add(2 * time.Minute),
			Phase: wire.PhaseDisposing, Cwd: "/a", Source: SourceDescribe},
		{SessionID: "beta", WorkflowID: "session/beta", RunID: "r-b", WorkflowType: wire.CreateSessionName, StartTime: t0.Add(time.Minute),
			Phase: wire.PhaseLive, Cwd: "/b", Source: SourceDescribe},
		{SessionID: "gamma", WorkflowID: "session/gamma", RunID: "r-g", WorkflowType: wire.ResumeSessionName, StartTime: t0.Add(3 * time.Minute),
			Source: SourceDescribe, Error: "describe: no poller seen for task queue"},
		{SessionID: "zeta", WorkflowID: "session/zeta", RunID: "r-z", WorkflowType: wire.CreateSessionName, StartTime: t0,
			Phase: wire.PhaseSetup, Cwd: "/z", Source: SourceSearchAttributes},
	}, got)
}

func TestListFailure(t *testing.T) {
	f := &fakeTemporal{list: func(*workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		return nil, errors.New("visibility unavailable")
	}}
	_, err := New(f, Options{}).List(context.Background())
	require.ErrorContains(t, err, "list running sessions: visibility unavailable")
}
