package integration

// Requests that do not decode, sent as raw JSON payloads the way a client in
// another language (or the temporal CLI) sends them.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// rawJSON is a request payload holding text as JSON, unchecked.
func rawJSON(text string) converter.RawValue {
	return converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data:     []byte(text),
	})
}

// requireInvalidArgument asserts a non-retryable InvalidArgument with
// exactly msg.
func requireInvalidArgument(t *testing.T, err error, msg string) {
	t.Helper()
	app := appErr(t, err)
	require.Equal(t, msg, app.Message())
	require.Equal(t, "InvalidArgument", app.Type())
	require.True(t, app.NonRetryable(), "the failure must not be retryable")
}

func TestAppendPayloadsThatDoNotDecode(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	w.startWorker()
	id := w.id("badappend")
	w.create(wire.CreateSessionRequest{SessionID: id})
	next := w.waitReady(id).NextSeq

	batch := func(event string) string { return fmt.Sprintf(`{"events":[%s]}`, event) }
	cases := []struct{ name, payload, msg string }{
		{"data not an object", batch(fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":5}`, next)),
			`invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data is not a JSON object`},
		{"negative zero", batch(fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":-0}}`, next)),
			`invalid Append request: events[0]: event is not lossless JSON: not losslessly JSON-serializable: negative zero -0`},
		{"non-finite number", batch(fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1e400,"data":{"turn":1}}`, next)),
			`invalid Append request: events[0]: event is not lossless JSON: not losslessly JSON-serializable: non-finite number 1e400`},
		{"negative seq", batch(`{"type":"turn/start","seq":-1,"time":1,"data":{"turn":1}}`),
			`invalid Append request: events[0]: event field "seq": must be a non-negative safe integer, got -1`},
		{"seq 2^53", batch(`{"type":"turn/start","seq":9007199254740992,"time":1,"data":{"turn":1}}`),
			`invalid Append request: events[0]: event field "seq": must be a safe integer, got 9007199254740992`},
		{"missing type", batch(fmt.Sprintf(`{"seq":%d,"time":1,"data":{"turn":1}}`, next)),
			`invalid Append request: events[0]: event lacks required field "type"`},
		{"second event bad", fmt.Sprintf(`{"events":[{"type":"turn/start","seq":%d,"time":1,"data":{"turn":1}},"x"]}`, next),
			`invalid Append request: events[1]: event is not a JSON object`},
		{"bare string", `"x"`,
			`invalid Append request: the request must be a JSON object, not a string`},
		{"misspelled field", fmt.Sprintf(`{"evts":[{"type":"turn/start","seq":%d,"time":1,"data":{"turn":1}}]}`, next),
			`invalid Append request: unknown field "evts"`},
		{"events not an array", `{"events":{}}`,
			`invalid Append request: field "events" must be an array, not object`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := w.update(wire.WorkflowID(id), wire.UpdateAppend, nil, rawJSON(c.payload))
			requireInvalidArgument(t, err, c.msg)
		})
	}
	// Nothing was accepted; the session goes on.
	res := w.appendEvents(id, []session.Event{turnStart(t, next, 1), turnEnd(t, next+1, 1)})
	require.Equal(t, next+2, res.NextSeq)
	w.dispose(id)
}

func TestStartPayloadsThatDoNotDecode(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	w.startWorker()
	cases := []struct{ name, workflow, payload, msg string }{
		{"create bare string", wire.CreateSessionName, `"x"`,
			`invalid CreateSession request: the request must be a JSON object, not a string`},
		{"create misspelled field", wire.CreateSessionName, `{"sessionID":"x"}`,
			`invalid CreateSession request: unknown field "sessionID" (did you mean "sessionId"? field names are case-sensitive)`},
		{"create seed event", wire.CreateSessionName, `{"sessionId":"x","seed":[{"type":"turn/start","seq":-1,"time":1,"data":{"turn":1}}]}`,
			`invalid CreateSession request: seed[0]: event field "seq": must be a non-negative safe integer, got -1`},
		{"create option too large", wire.CreateSessionName, `{"sessionId":"x","options":{"maxBatchBytes":1e400}}`,
			`invalid CreateSession request: field "options.maxBatchBytes" must be an integer that fits 64 bits, not number 1e400`},
		{"create empty id", wire.CreateSessionName, `{"sessionId":""}`,
			`create: the session id is required (sessionId is empty)`},
		{"resume empty id", wire.ResumeSessionName, `{"resumeSessionId":""}`,
			`resume: the session id is required (resumeSessionId is empty)`},
		{"unseeded inherited count", wire.CreateSessionName, `{"sessionId":"%s","seed":[],"inheritedEventCount":2}`,
			`inheritedEventCount is 2 but meta.isSeeded is not set: set meta.isSeeded to true for a seeded (forked) session, or omit inheritedEventCount`},
		{"resume misspelled field", wire.ResumeSessionName, `{"sessionId":"x"}`,
			`invalid ResumeSession request: unknown field "sessionId"`},
		{"create nested misspelled field", wire.CreateSessionName, `{"sessionId":"x","meta":{"cwd":"/w","isSeded":true}}`,
			`invalid CreateSession request: unknown field "meta.isSeded"`},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := w.id(fmt.Sprintf("badstart%d", i))
			wid := wire.WorkflowID(id)
			payload := c.payload
			if strings.Contains(payload, "%s") {
				payload = fmt.Sprintf(payload, id)
			}
			// Started alone: the run fails at once (not a workflow task
			// retried forever) with the typed failure.
			run := w.startWorkflow(wid, c.workflow, rawJSON(payload))
			requireInvalidArgument(t, run.Get(w.ctx(), nil), c.msg)

			// Started with WaitReady: the update returns it.
			op := w.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: wid, TaskQueue: w.taskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL}, c.workflow, rawJSON(payload))
			h, err := w.c.UpdateWithStartWorkflow(w.ctx(), client.UpdateWithStartWorkflowOptions{
				StartWorkflowOperation: op,
				UpdateOptions:          client.UpdateWorkflowOptions{WorkflowID: wid, UpdateName: wire.UpdateWaitReady, WaitForStage: client.WorkflowUpdateStageCompleted},
			})
			if err == nil {
				err = h.Get(w.ctx(), nil)
			}
			requireInvalidArgument(t, err, c.msg)
		})
	}
}

func TestLoopPayloadsThatDoNotDecode(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	w.startWorker()
	bad := w.startWorkflow("loop/"+w.id("badloop"), wire.SessionLoopName,
		rawJSON(`{"agents":[{"id":"main"}],"configuredAgentIdentities":{"main":{"id":"x","resum":true}}}`))
	requireInvalidArgument(t, bad.Get(w.ctx(), nil),
		`invalid SessionLoop request: unknown field "configuredAgentIdentities.main.resum"`)

	wid := "loop/" + w.id("goodloop")
	w.startWorkflow(wid, wire.SessionLoopName, rawJSON(`{}`))
	err := w.update(wid, wire.UpdateStart, nil, rawJSON(`{"craete":{"sessionId":"x"}}`))
	requireInvalidArgument(t, err, `invalid Start request: unknown field "craete"`)
	err = w.update(wid, wire.UpdateStart, nil, rawJSON(`{"create":{"sessionId":"x","seed":[{"type":"turn/start","seq":0,"time":1,"data":[]}]}}`))
	requireInvalidArgument(t, err, `invalid Start request: seed: invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data is not a JSON object`)
	require.NoError(t, w.c.CancelWorkflow(w.ctx(), wid, ""))
}
