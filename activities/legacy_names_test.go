package activities_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/sessionflow/sessionflow/activities"
)

// A RepairResult recorded before the rename carries its scan under the key
// "summary"; a workflow replaying it still reads the scan.
func TestRepairResultReadsTheEarlierSummaryKey(t *testing.T) {
	var old activities.RepairResult
	require.NoError(t, json.Unmarshal([]byte(`{"closers":1,"markerSeq":4,"appended":2,"summary":{"nextSeq":5,"lastTurn":1,"endsWithMarker":true,"header":{"type":"session","version":3,"id":"s","createdAt":1}}}`), &old))
	require.Equal(t, int64(5), old.Scan.NextSeq)
	require.Equal(t, int64(1), old.Scan.LastTurn)
	require.True(t, old.Scan.EndsWithMarker)
	require.Equal(t, "s", old.Scan.Header.ID)
	require.Equal(t, int64(4), old.MarkerSeq)

	b, err := json.Marshal(old)
	require.NoError(t, err)
	require.Contains(t, string(b), `"scan":{`)
	require.NotContains(t, string(b), `"summary"`)
	var again activities.RepairResult
	require.NoError(t, json.Unmarshal(b, &again))
	require.Equal(t, old, again)
}

type registry map[string]bool

func (r registry) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) { r[o.Name] = true }

func TestRenamedActivitiesAreRegisteredUnderTheirEarlierNames(t *testing.T) {
	r := registry{}
	activities.RegisterLegacyNames(r, &activities.Activities{})
	require.Equal(t, registry{"ReadSummary": true, "RepairAndMark": true}, r)
}
