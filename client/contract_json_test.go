package client

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// What the client sends, the workflow decodes: a request with plain events
// encodes to the JSON of the workflow's request with session events, and
// the workflow's decoder reads it back (docs/DECISIONS.md D83).
func TestClientRequestsDecodeAsTheWorkflowsRequests(t *testing.T) {
	seed := testEvents(t, 0, 3, 4)
	seed[1].SourceEventSeqs = []int64{}
	created := 5
	sent := wire.CreateSessionRequest{SessionID: "s", Seed: session.WireEvents(seed), Meta: &wire.SessionMeta{Cwd: "/w"},
		Hooks: wire.Hooks{SetupActivity: "setup"}, Options: &wire.Options{MaxBatchBytes: created}}
	decoded := workflows.CreateSessionRequest{SessionID: "s", Seed: seed, Meta: &wire.SessionMeta{Cwd: "/w"},
		Hooks: wire.Hooks{SetupActivity: "setup"}, Options: &wire.Options{MaxBatchBytes: created}}
	require.JSONEq(t, mustJSON(t, decoded), mustJSON(t, sent))

	dc := converter.GetDefaultDataConverter()
	p, err := dc.ToPayload(sent)
	require.NoError(t, err)
	var got workflows.CreateSessionRequest
	require.NoError(t, dc.FromPayload(p, &got))
	require.Equal(t, decoded, got)

	p, err = dc.ToPayload(wire.AppendRequest{Events: session.WireEvents(seed)})
	require.NoError(t, err)
	var app workflows.AppendRequest
	require.NoError(t, dc.FromPayload(p, &app))
	require.Equal(t, seed, app.Events)
}

// List reads a LiveSession run's cwd from its start input through
// wire.LiveStateHeader.
func TestLiveStateHeaderReadsTheLiveState(t *testing.T) {
	st := workflows.LiveState{SessionID: "s", NextSeq: 4, Header: wire.Header{Version: 3, ID: "s", Cwd: "/work"}}
	var h wire.LiveStateHeader
	require.NoError(t, json.Unmarshal([]byte(mustJSON(t, st)), &h))
	require.Equal(t, "/work", h.Header.Cwd)
	require.Equal(t, "s", h.SessionID)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
