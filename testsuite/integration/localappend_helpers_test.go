package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
)

// localAppendResults returns the nextSeq of every local AppendBatch recorded
// in hist, in order: a local activity's input is not in history, its
// marker records the result.
func localAppendResults(t *testing.T, hist *historypb.History) []int64 {
	t.Helper()
	var out []int64
	for _, e := range hist.Events {
		m := e.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "LocalActivity" {
			continue
		}
		var data struct {
			ActivityType string `json:"ActivityType"`
		}
		require.NoError(t, json.Unmarshal(m.GetDetails()["data"].GetPayloads()[0].GetData(), &data))
		if data.ActivityType != "AppendBatch" {
			continue
		}
		var res struct {
			NextSeq int64 `json:"nextSeq"`
		}
		require.NoError(t, json.Unmarshal(m.GetDetails()["result"].GetPayloads()[0].GetData(), &res))
		out = append(out, res.NextSeq)
	}
	return out
}
