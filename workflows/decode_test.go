package workflows

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

func payload(encoding, data string) converter.RawValue {
	return converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encoding)},
		Data:     []byte(data),
	})
}

func TestDecodeRequest(t *testing.T) {
	cases := []struct {
		name string
		in   converter.RawValue
		msg  string
	}{
		{"missing", converter.RawValue{}, "invalid Append request: the request is missing"},
		{"null", payload("binary/null", ""), "invalid Append request: the request is null; send a JSON object"},
		{"protobuf", payload("json/protobuf", "{}"), `invalid Append request: payload encoding "json/protobuf" is not supported; send a JSON object (encoding "json/plain")`},
		{"truncated", payload("json/plain", "{"), "invalid Append request: not valid JSON: the request ends early"},
		{"empty", payload("json/plain", ""), "invalid Append request: the request is empty; send a JSON object"},
		{"not json", payload("json/plain", "{x}"), "invalid Append request: not valid JSON at byte 2: invalid character 'x' looking for beginning of object key string"},
		{"trailing data", payload("json/plain", `{"events":[]} {}`), "invalid Append request: unexpected data after the request object"},
		{"array", payload("json/plain", `[]`), "invalid Append request: the request must be a JSON object, not an array"},
		{"wrong case", payload("json/plain", `{"Events":[]}`), `invalid Append request: unknown field "Events" (did you mean "events"? field names are case-sensitive)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var req AppendRequest
			err := decodeRequest(wire.UpdateAppend, c.in, &req)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "not an application error: %v", err)
			require.Equal(t, c.msg, app.Message())
			require.Equal(t, "InvalidArgument", app.Type())
			require.True(t, app.NonRetryable())
		})
	}

	var loop wire.SessionLoopInput
	err := decodeRequest(wire.SessionLoopName, payload("json/plain", `{"agents":[{"id":"a"},{"id":"b","modle":"x"}]}`), &loop)
	require.EqualError(t, err, `invalid SessionLoop request: unknown field "agents[1].modle" (type: InvalidArgument, retryable: false)`)

	var req CreateSessionRequest
	require.NoError(t, decodeRequest(wire.CreateSessionName, payload("json/plain", `{"sessionId":"s","setupActivity":"h","meta":{"cwd":"/w"},"options":null}`), &req))
	require.Equal(t, CreateSessionRequest{SessionID: "s", Hooks: wire.Hooks{SetupActivity: "h"}, Meta: &wire.SessionMeta{Cwd: "/w"}}, req)
}
