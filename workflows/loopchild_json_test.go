package workflows

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// A loop child's mode is written under "mode" and under the earlier key
// "kind", so clients reading either keep working, and JSON carrying only
// the earlier key is still read.
func TestLoopChildModeUnderBothKeys(t *testing.T) {
	b, err := json.Marshal(wire.LoopChild{SessionID: "a", Mode: "resume", WorkflowID: "session/a", State: wire.ChildLive})
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(b, &keys))
	require.Equal(t, "resume", keys["mode"])
	require.Equal(t, "resume", keys["kind"])

	var old wire.LoopChild
	require.NoError(t, json.Unmarshal([]byte(`{"sessionId":"a","kind":"create","workflowId":"session/a","state":"settled","wasLive":true}`), &old))
	require.Equal(t, wire.LoopChild{SessionID: "a", Mode: "create", WorkflowID: "session/a", State: wire.ChildSettled, WasLive: true}, old)

	var again wire.LoopChild
	require.NoError(t, json.Unmarshal(b, &again))
	require.Equal(t, "resume", again.Mode)
}
