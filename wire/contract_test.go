package wire_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// One declaration per stable name: the InvalidArgument of the workflows,
// the activities and the store is one string.
func TestErrorTypesAndRetryability(t *testing.T) {
	require.Equal(t, "InvalidArgument", wire.ErrTypeInvalidArgument)
	require.Equal(t, wire.Code("InvalidArgument"), wire.CodeInvalidArgument)
	require.Equal(t, "SessionAlreadyExists", wire.ErrTypeAlreadyExists)
	require.Equal(t, "TurnWaitMoved", wire.ErrTypeTurnWaitMoved)
	for _, typ := range []string{"IOError", "ProviderUnavailable"} {
		require.True(t, wire.Retryable(typ), typ)
	}
	for _, typ := range []string{"InvalidArgument", "SessionNotFound", "SeqMismatch", "ProviderRefused", "SessionNotLive", "AggregateError", "PersistenceNotConfigured"} {
		require.False(t, wire.Retryable(typ), typ)
	}
}

func TestNamesOfTheContract(t *testing.T) {
	require.Equal(t, []string{"CreateSession", "ResumeSession", "LiveSession", "SessionLoop"},
		[]string{wire.CreateSessionName, wire.ResumeSessionName, wire.LiveSessionName, wire.SessionLoopName})
	require.Equal(t, []string{"WaitReady", "Append", "Dispose", "Describe", "Abort", "WaitTurn", "Followup", "LoopState"},
		[]string{wire.UpdateWaitReady, wire.UpdateAppend, wire.UpdateDispose, wire.QueryDescribe, wire.SignalAbort, wire.UpdateWaitTurn, wire.UpdateFollowup, wire.QueryLoopState})
	require.Equal(t, []string{"CallModel", "RunTool", "ForfeitDeadOwner", "AppendBatch"},
		[]string{wire.CallModelActivity, wire.RunToolActivity, wire.ForfeitDeadOwnerName, wire.AppendBatchName})
	require.Equal(t, "session/%C3%A9", wire.WorkflowID("é"))
}

func TestCheckSessionIdentity(t *testing.T) {
	require.NoError(t, wire.CheckSessionIdentity("session/a", "a"))
	err := wire.CheckSessionIdentity("session/x", strings.Repeat("x", 300))
	require.True(t, errors.Is(err, wire.ErrIDTooLong))
	require.ErrorContains(t, err, `(the id: "`+strings.Repeat("x", 64)+`"... (300 bytes))`)
	require.EqualError(t, wire.CheckSessionIdentity("other", "a"),
		`session "a" must run under workflow id "session/a", not "other" (docs/API.md: Workflow ids)`)
	require.Equal(t, `session "a b" already exists`, wire.AlreadyExistsMessage("a b"))
}

// ParseEventLine decodes an envelope and counts its compact encoding; it
// leaves the event rules to the session.
func TestParseEventLine(t *testing.T) {
	e, n, err := wire.ParseEventLine([]byte(`{"type":"x/y", "seq":3,"time":1,"data":{"a": 1},"sourceEventSeqs":[]}`))
	require.NoError(t, err)
	require.Equal(t, wire.Event{Type: "x/y", Seq: 3, Time: 1, Data: json.RawMessage(`{"a": 1}`), SourceEventSeqs: []int64{}}, e)
	require.Equal(t, len(`{"type":"x/y","seq":3,"time":1,"data":{"a":1},"sourceEventSeqs":[]}`)+1, n)
	for _, bad := range []string{`{"type":"x","seq":0,"time":0,"data":{},"extra":1}`, `{"seq":0,"time":0,"data":{}}`, `{"type":"x","seq":0,"time":0}`, `not json`} {
		_, _, err := wire.ParseEventLine([]byte(bad))
		require.ErrorContains(t, err, "not a valid event", bad)
	}
}

// A batch reader over ParseEventLine splits under the limits and names a
// bad line.
func TestBatchReaderOf(t *testing.T) {
	line := `{"type":"t","seq":0,"time":0,"data":{}}` + "\n"
	r := wire.NewBatchReaderOf(strings.NewReader(line+"\n"+line+line+"{}\n"), wire.BatchLimits{MaxBytes: 1 << 10, MaxEvents: 2}, wire.ParseEventLine)
	b, err := r.Next()
	require.NoError(t, err)
	require.Len(t, b.Events, 2)
	require.Equal(t, int64(2*len(line)+1), b.End)
	_, err = r.Next()
	var le *wire.LineError
	require.ErrorAs(t, err, &le)
	require.Equal(t, int64(5), le.Line)
	require.ErrorContains(t, err, `line 5: not a valid event`)

	r = wire.NewBatchReaderOf(strings.NewReader(line), wire.BatchLimits{MaxBytes: 10, MaxEvents: 2}, wire.ParseEventLine)
	_, err = r.Next()
	require.ErrorIs(t, err, wire.ErrEventTooLarge)
}
