package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths,
		recordPath{name: "continue-as-new-threshold", run: recordContinueAsNewThreshold},
	)
}

// thresholdEvents is the recorded session's options.continueAsNewEvents:
// the smallest allowed, far below the server's suggestion (4096 events on
// the shared server).
const thresholdEvents = 100

// recordContinueAsNewThreshold: appends until the run's history reaches
// options.continueAsNewEvents: the continue-as-new-history-length version
// marker, then the run continues as new as LiveSession on its own. The
// first run is recorded; the next one takes one more append and Dispose.
func recordContinueAsNewThreshold(t *testing.T, w *world) []fixture {
	id := w.id("rec-can-threshold")
	wid := wire.WorkflowID(id)
	run := w.create(wire.CreateSessionRequest{
		SessionID: id,
		Options:   &wire.Options{ContinueAsNewEvents: thresholdEvents},
	})
	w.awaitLive(id)
	w.waitReady(id)
	seq := int64(0)
	latest := func() string {
		desc, err := w.c.DescribeWorkflow(w.ctx(), wid, "")
		require.NoError(t, err)
		return desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	for i := 0; latest() == run.GetRunID(); i++ {
		require.Less(t, i, thresholdEvents, "the run never continued as new")
		seq = w.appendEvents(id, liveTurn(t, seq, seq/5+1, "turn")).NextSeq
	}
	w.awaitLive(id)
	seq = w.appendEvents(id, liveTurn(t, seq, seq/5+1, "on the new run")).NextSeq
	require.Equal(t, seq, w.dispose(id).NextSeq)
	runs := w.runs(wid, run.GetRunID())
	require.Len(t, runs, 2, "one continue-as-new")
	first := w.history(wid, runs[0])
	n := len(first.Events)
	require.GreaterOrEqual(t, n, thresholdEvents, "continued as new before the threshold")
	require.Less(t, n, thresholdEvents+20, "continued as new well after the threshold")
	markers := 0
	for _, e := range first.Events {
		if a := e.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "Version" {
			if string(a.GetDetails()["change-id"].GetPayloads()[0].GetData()) == `"continue-as-new-history-length"` {
				markers++
			}
		}
	}
	require.Equal(t, 1, markers, "the continue-as-new-history-length version marker")
	return []fixture{{name: "continue-as-new-threshold", workflowID: wid, runID: runs[0]}}
}
