package client

import (
	"context"
	"fmt"
	"io"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"

	"github.com/sessionflow/sessionflow/wire"
)

// ExportHistory writes the history of session id's latest run to w as JSON,
// in the format worker.NewWorkflowReplayer().ReplayWorkflowHistoryFromJSONFile
// and client.HistoryFromJSON read, for replay fixtures. It returns the number
// of events written.
func (c *Client) ExportHistory(ctx context.Context, id string, w io.Writer) (int, error) {
	return c.ExportWorkflowHistory(ctx, wire.WorkflowID(id), "", w)
}

// ExportWorkflowHistory is ExportHistory for any workflow id (a loop's, for
// instance) and run id (empty for the latest run; a continued-as-new
// session has one history per run).
func (c *Client) ExportWorkflowHistory(ctx context.Context, workflowID, runID string, w io.Writer) (int, error) {
	hist := &historypb.History{}
	it := c.c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return 0, callError("read the history of workflow", workflowID, err)
		}
		hist.Events = append(hist.Events, ev)
	}
	if err := EncodeHistory(w, hist); err != nil {
		return 0, fmt.Errorf("write the history of workflow %q: %w", workflowID, err)
	}
	return len(hist.Events), nil
}

// EncodeHistory writes hist as indented JSON with Temporal's proto JSON
// encoding (temporalproto, the counterpart of the decoder the SDK's replayer
// uses), followed by a newline.
func EncodeHistory(w io.Writer, hist *historypb.History) error {
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return err
	}
	return nil
}
