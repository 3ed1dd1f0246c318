package bench

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sessionflow/sessionflow/wire"
)

// HistoryCost is the Temporal history of the resume of a log of LogEvents
// events, from start to disposal.
type HistoryCost struct {
	LogEvents     int
	LogBytes      int64
	HistoryEvents int
	HistoryBytes  int
	ResumeLatency time.Duration
}

// history returns the events and encoded bytes of one run's history.
func (e *env) history(ctx context.Context, workflowID, runID string) ([]*historypb.HistoryEvent, int, error) {
	it := e.tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var (
		evs   []*historypb.HistoryEvent
		bytes int
	)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, 0, fmt.Errorf("history of %s/%s: %w", workflowID, runID, err)
		}
		evs = append(evs, ev)
		bytes += proto.Size(ev)
	}
	return evs, bytes, nil
}

// eachRun calls fn with the history and encoded bytes of every run of a
// workflow id, from runID along its continue-as-new links.
func (e *env) eachRun(ctx context.Context, workflowID, runID string, fn func(evs []*historypb.HistoryEvent, bytes int)) error {
	for runID != "" {
		evs, b, err := e.history(ctx, workflowID, runID)
		if err != nil {
			return err
		}
		fn(evs, b)
		runID = ""
		if n := len(evs); n > 0 {
			if a := evs[n-1].GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				runID = a.GetNewExecutionRunId()
			}
		}
	}
	return nil
}

// chain sums the histories of a workflow id's runs, from runID along its
// continue-as-new links. It returns the runs, events and bytes and the last
// run's history.
func (e *env) chain(ctx context.Context, workflowID, runID string) (runs, events, bytes int, last []*historypb.HistoryEvent, err error) {
	err = e.eachRun(ctx, workflowID, runID, func(evs []*historypb.HistoryEvent, b int) {
		runs++
		events += len(evs)
		bytes += b
		last = evs
	})
	if err != nil {
		return 0, 0, 0, nil, err
	}
	return runs, events, bytes, last, nil
}

// describeEnd says how a run's history ends: its close event, or its last
// workflow task failure while it still runs.
func describeEnd(evs []*historypb.HistoryEvent) string {
	if len(evs) == 0 {
		return "no history"
	}
	lastEv := evs[len(evs)-1]
	for i := len(evs) - 1; i >= 0; i-- {
		if a := evs[i].GetWorkflowTaskFailedEventAttributes(); a != nil {
			msg := a.GetFailure().GetMessage()
			if len(msg) > 160 {
				msg = msg[:160] + "..."
			}
			return fmt.Sprintf("workflow task failed (%s): %s; last event %s", a.GetCause(), msg, lastEv.GetEventType())
		}
	}
	if a := lastEv.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
		return fmt.Sprintf("terminated: %s", a.GetReason())
	}
	return fmt.Sprintf("last event %s", lastEv.GetEventType())
}

// resumeHistory writes logs of every size and resumes them.
func (e *env) resumeHistory(ctx context.Context, res *Results) error {
	for _, n := range e.cfg.HistorySizes {
		id := fmt.Sprintf("hist-%d", n)
		size, err := WriteRawLog(ctx, e.store, id, n)
		if err != nil {
			return err
		}
		t0 := time.Now()
		info, err := e.sf.Resume(ctx, id, wire.ResumeSessionRequest{})
		if err != nil {
			return fmt.Errorf("resume %s: %w", id, err)
		}
		lat := time.Since(t0)
		if _, err := e.sf.Dispose(ctx, id); err != nil {
			return fmt.Errorf("dispose %s: %w", id, err)
		}
		evs, b, err := e.history(ctx, info.WorkflowID, info.RunID)
		if err != nil {
			return err
		}
		e.log("  %d events: %d history events, %d bytes, resume %s", n, len(evs), b, lat.Round(time.Millisecond))
		res.History = append(res.History, HistoryCost{LogEvents: n, LogBytes: size, HistoryEvents: len(evs), HistoryBytes: b, ResumeLatency: lat})
	}
	return nil
}
