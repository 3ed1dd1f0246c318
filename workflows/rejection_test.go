package workflows_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// A refusal that would quote a large part of the request (an event type, a
// field name) is cut to 4096 bytes, keeping its type: the SDK sends the
// request beside it, and a rejection above the server's blob limit
// terminates the workflow (docs/API.md: Update input limit).
func TestRejectionMessagesAreBounded(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("bounded")
	sessiontest.NewFakeAgent(h)
	longType := "custom/" + strings.Repeat("t", 200_000)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{rawEvent(longType, 0, `{}`)}})
	field := strings.Repeat("é", 100_000)
	raw := converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data:     []byte(`{"content":"hi","` + field + `":1}`),
	})
	steer := h.UpdateAt(2*time.Second, "", wire.UpdateSteer, raw)
	short := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{rawEvent("custom/x", 0, `{}`)}})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "bounded", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	for _, c := range []struct {
		r      *sessiontest.Result
		prefix string
	}{
		{app, `invalid session event at index 0 (seq 0, type "custom/ttt`},
		{steer, `invalid Steer request: unknown field "ééé`},
	} {
		e := sessiontest.AppErr(t, c.r.Rejection(t))
		require.Equal(t, "InvalidArgument", e.Type())
		require.True(t, e.NonRetryable())
		require.LessOrEqual(t, len(e.Message()), 4096)
		require.Greater(t, len(e.Message()), 4000, "%s", e.Message())
		require.True(t, strings.HasPrefix(e.Message(), c.prefix), "message starts %q", e.Message()[:60])
		require.Regexp(t, `… \(\d+ bytes of the message cut\)$`, e.Message())
		require.True(t, strings.ToValidUTF8(e.Message(), "?") == e.Message(), "the cut split a character")
	}
	e := sessiontest.AppErr(t, short.Rejection(t))
	require.Equal(t, `invalid session event at index 0 (seq 0, type "custom/x"): event type "custom/x" is unknown to this build and not marked ignorable; a reader would refuse the log as an unsupported format`, e.Message())
}
