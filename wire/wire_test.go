package wire_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// The shapes below are recorded in workflow histories and lease files: a
// renamed field would break replay and unlock.
func TestHandleRefAndOwnerJSON(t *testing.T) {
	b, err := json.Marshal(wire.HandleRef{SessionID: "s", HandleID: "h", Access: wire.AccessWrite})
	require.NoError(t, err)
	require.JSONEq(t, `{"sessionId":"s","handleId":"h","access":"write"}`, string(b))
	b, err = json.Marshal(wire.Owner{WorkflowID: "session/s", RunID: "r"})
	require.NoError(t, err)
	require.JSONEq(t, `{"workflowId":"session/s","runId":"r"}`, string(b))
	b, err = json.Marshal(wire.Owner{})
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(b))
}

func TestNamesOnTheWire(t *testing.T) {
	require.Equal(t, "SessionId", wire.SearchAttributeSessionID)
	require.Equal(t, "SessionPhase", wire.SearchAttributeSessionPhase)
	require.Equal(t, "SessionCwd", wire.SearchAttributeSessionCwd)
	require.Equal(t, "session/", wire.SessionWorkflowIDPrefix)
	require.Equal(t, "loop/", wire.LoopWorkflowIDPrefix)
	require.Equal(t, wire.Code("SessionNotFound"), wire.CodeNotFound)
	require.Equal(t, wire.Code("SessionAlreadyOwned"), wire.CodeAlreadyOwned)
	require.Equal(t, wire.Code("SeqMismatch"), wire.CodeSeqMismatch)
}

func TestCheckIDLength(t *testing.T) {
	require.NoError(t, wire.CheckIDLength(strings.Repeat("a", 255)))
	require.Equal(t, 255, wire.SegmentLen(strings.Repeat("é", 51)))
	require.Equal(t, 10, wire.SegmentLen("😀"))
	require.Equal(t, 10, wire.SegmentLen(".."))
	err := wire.CheckIDLength(strings.Repeat("é", 52))
	require.True(t, errors.Is(err, wire.ErrIDTooLong))
	require.Contains(t, err.Error(), "260-byte directory name")
}
