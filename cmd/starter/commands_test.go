package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func TestLifecycleInputErrorsWithoutServer(t *testing.T) {
	isolateEnv(t)
	dialed := stubDial(t, nil)
	dir := t.TempDir()
	badSeed := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(badSeed, []byte(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`+"\n"+`{"seq":1}`+"\n"), 0o600))
	seedFile := func(name, line string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(line+"\n"), 0o600))
		return path
	}
	inheritedSeed := seedFile("inherited.jsonl", `{"type":"session/end-seed","seq":0,"time":1,"data":{"inherited":true}}`)
	inheritedYesSeed := seedFile("inherited-yes.jsonl", `{"type":"session/end-seed","seq":0,"time":1,"data":{"inherited":"yes"}}`)
	emptyTurnSeed := seedFile("empty-turn.jsonl", `{"type":"turn/start","seq":0,"time":1,"data":{}}`)
	stringTurnSeed := seedFile("string-turn.jsonl", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":"1"}}`)
	zeroTurnSeed := seedFile("zero-turn.jsonl", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":0}}`)
	noIDSeed := seedFile("no-id.jsonl", `{"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","name":"x","arguments":{}}]},"stream":[]},"surfaceOp":"append"}`)
	badLoop := filepath.Join(dir, "loop.json")
	require.NoError(t, os.WriteFile(badLoop, []byte(`{"agnets":[]}`), 0o600))

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create"}, "--id is required"},
		{[]string{"create", "--id", "a", "--fork-through", "3"}, "--fork-through needs --parent"},
		{[]string{"create", "--id", "a", "--parent", "p", "--fork-through", "-1"}, "--fork-through must be a seq (0 or more), got -1"},
		{[]string{"create", "--id", "a", "--parent", "p", "--fork-through", "2", "--seed", badSeed}, "--seed and --fork-through are mutually exclusive"},
		{[]string{"create", "--id", "a", "--parent", "a"}, "--parent must name another session than --id"},
		{[]string{"create", "--id", "a", "--seed", filepath.Join(dir, "absent.jsonl")}, "--seed: open"},
		{[]string{"create", "--id", "a", "--seed", badSeed}, "--seed " + badSeed + " line 2: not a valid event"},
		{[]string{"create", "--id", "a", "--fork-through", "x"}, `invalid argument "x" for "--fork-through"`},
		{[]string{"create", "--id", "a", "--seed", inheritedSeed}, "--seed " + inheritedSeed + `: invalid session event at index 0 (seq 0, type "session/end-seed"): unseeded Session contains an inherited end-seed marker`},
		{[]string{"create", "--id", "a", "--seed", inheritedYesSeed}, "--seed " + inheritedYesSeed + `: invalid session event at index 0 (seq 0, type "session/end-seed"): session/end-seed event (seq 0): malformed data`},
		{[]string{"create", "--id", "a", "--seed", emptyTurnSeed}, `invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data lacks "turn"`},
		{[]string{"create", "--id", "a", "--seed", stringTurnSeed}, `invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): malformed data`},
		{[]string{"create", "--id", "a", "--seed", zeroTurnSeed}, `turn/start event (seq 0): data.turn must be a safe integer >= 1, got 0`},
		{[]string{"create", "--id", "a", "--parent", "p", "--seed", noIDSeed}, `invalid session event at index 0 (seq 0, type "assistant/message"): crash repair could not read it: assistant/message event (seq 0): tool-call block 0 lacks "id"`},
		{[]string{"resume"}, "--id is required"},
		{[]string{"fork", "--new-id", "b"}, "--id is required"},
		{[]string{"fork", "--id", "a"}, "--new-id is required: it names the new session"},
		{[]string{"fork", "--id", "a", "--new-id", "a"}, "--new-id must name another session than --id"},
		{[]string{"fork", "--id", "a", "--new-id", "b", "--at-turn", "-2"}, "--at-turn must be a turn (1 or more), got -2"},
		{[]string{"append"}, "--id is required"},
		{[]string{"append", "--id", "a", "--max-batch-bytes", "0"}, "--max-batch-bytes must be between 1 and 1048576, got 0"},
		{[]string{"append", "--id", "a", "--max-batch-bytes", "1048577"}, "--max-batch-bytes must be between 1 and 1048576"},
		{[]string{"append", "--id", "a", "--batch-events", "0"}, "--batch-events must be at least 1"},
		{[]string{"dispose"}, "--id is required"},
		{[]string{"cancel", "--reason", "x"}, "--id is required"},
		{[]string{"compact", "--command-id", "c"}, "--id is required"},
		{[]string{"compact", "--id", "a", "extra"}, `unexpected argument "extra"`},
		{[]string{"describe"}, "--id is required"},
		{[]string{"describe", "--id", "a", "--timeout", "-5s"}, "--timeout must not be negative"},
		{[]string{"list", "extra"}, `unexpected argument "extra"`},
		{[]string{"loop"}, `"starter loop" needs a subcommand`},
		{[]string{"loop", "start"}, "--id is required"},
		{[]string{"loop", "start", "--id", "m", "--config", badLoop}, `unknown field "agnets"`},
		{[]string{"loop", "stop"}, "--id is required"},
		{[]string{"history", "export", "--out", "x"}, "--id or --workflow-id is required"},
		{[]string{"history", "export", "--id", "a", "--workflow-id", "loop/m", "--out", "x"}, "mutually exclusive"},
		{[]string{"history", "export", "--id", "a"}, "--out is required"},
		{[]string{"unlock"}, "--id is required"},
		{[]string{"unlock", "--id", "a"}, "the store root is required"},
		{[]string{"create", "--id", "a", "--task-queue", ""}, "--task-queue must not be empty"},
		{[]string{"serve", "--root", "r"}, "--http is required"},
		{[]string{"serve", "--http", "8080"}, "the store root is required"},
		{[]string{"serve", "--http", "0.0.0.0:8080", "--root", "r"}, "--http 0.0.0.0:8080: a bearer token is required to listen on an address that is not loopback (give --http-token or SESSIONFLOW_HTTP_TOKEN)"},
		{[]string{"serve", "--http", "no-port", "--root", "r"}, `--http: the HTTP address "no-port"`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := runCLI(t, "", c.args...)
			mustFail(t, r, 1, c.want)
			require.Contains(t, r.stderr, "--help' for usage.", "an input error is a usage error")
			require.Empty(t, r.stdout)
		})
	}
	require.Empty(t, *dialed, "no input error reaches Temporal")

	t.Setenv("TEMPORAL_TLS", "maybe")
	mustFail(t, runCLI(t, "", "list"), 1, `TEMPORAL_TLS: "maybe" is not one of true, false, 1, 0`)
	require.Empty(t, *dialed)
}

func TestCreateRequest(t *testing.T) {
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "seed.jsonl")
	seed := openTurnEvents(t, false)
	require.NoError(t, os.WriteFile(seedFile, []byte("\n"+jsonlOf(t, seed...)+"\n"), 0o600))

	build := func(args ...string) wire.CreateSessionRequest {
		t.Helper()
		var in createInput
		cmd := newCreateCmd(&app{})
		require.NoError(t, cmd.Flags().Parse(args))
		in.id, _ = cmd.Flags().GetString("id")
		in.cwd, _ = cmd.Flags().GetString("cwd")
		in.parent, _ = cmd.Flags().GetString("parent")
		in.seedFile, _ = cmd.Flags().GetString("seed")
		in.forkThrough, _ = cmd.Flags().GetInt64("fork-through")
		require.NoError(t, in.validate(cmd.Flags()))
		req, err := in.request()
		require.NoError(t, err)
		return req
	}

	req := build("--id", "s1", "--cwd", "rel/dir")
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, wire.CreateSessionRequest{SessionID: "s1", Meta: &wire.SessionMeta{Cwd: filepath.Join(wd, "rel", "dir")}}, req)
	require.Nil(t, req.Seed, "no seed: a nil seed means unseeded")

	req = build("--id", "s2", "--parent", "p", "--fork-through", "9")
	require.Equal(t, &wire.ForkSeed{ParentSessionID: "p", Count: 10}, req.Fork, "seqs 0..9 are ten events")
	require.True(t, req.Meta.IsSeeded)
	require.Equal(t, "p", req.Meta.ParentSession)
	require.Equal(t, int64(10), req.InheritedEventCount)

	req = build("--id", "s3", "--seed", seedFile)
	require.Equal(t, session.WireEvents(seed), req.Seed)
	require.False(t, req.Meta.IsSeeded, "an inline seed without a parent is not inherited")
	require.Zero(t, req.InheritedEventCount)

	req = build("--id", "s4", "--parent", "p", "--seed", seedFile)
	require.True(t, req.Meta.IsSeeded)
	require.Equal(t, int64(len(seed)), req.InheritedEventCount)

	req = build("--id", "s5", "--parent", "p")
	require.Nil(t, req.Fork)
	require.False(t, req.Meta.IsSeeded, "--parent alone records lineage")
}

func TestReadLoopConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "loop.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"agents":[{"id":"a1","sessionId":"s1"}],"hooks":{"setupActivity":"Setup"},"options":{"appendWindowMs":50}}`), 0o600))
	in, err := readLoopConfig(good)
	require.NoError(t, err)
	require.Equal(t, []wire.AgentConfig{{ID: "a1", SessionID: "s1"}}, in.Agents)
	require.Equal(t, "Setup", in.Hooks.SetupActivity)
	require.Equal(t, int64(50), in.Options.AppendWindowMs)

	in, err = readLoopConfig("")
	require.NoError(t, err)
	require.Equal(t, wire.SessionLoopInput{}, in)

	two := filepath.Join(dir, "two.json")
	require.NoError(t, os.WriteFile(two, []byte(`{} {}`), 0o600))
	_, err = readLoopConfig(two)
	require.ErrorContains(t, err, "more than one JSON value")
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(0, 0)
	p := newProgress(&b, "appending", 0)
	p.now = func() time.Time { return now }
	p.update(1000)
	p.finish()
	require.Empty(t, b.String(), "a small input shows nothing")

	p = newProgress(&b, "appending", 4<<20)
	p.now = func() time.Time { return now }
	p.update(1 << 20)
	p.update(2 << 20) // within the interval: not drawn
	now = now.Add(progressInterval)
	p.update(3 << 20)
	p.finish()
	require.Equal(t, "\rappending: 1.0 MiB of 4.0 MiB (25%)\rappending: 3.0 MiB of 4.0 MiB (75%)\rappending: 3.0 MiB of 4.0 MiB (75%)\n", b.String())

	b.Reset()
	p = newProgress(&b, "x", 0)
	p.now = func() time.Time { return now }
	p.update(20 << 20)
	p.done = 1
	p.draw()
	require.Equal(t, "\rx: 20.0 MiB\rx: 1 B     ", b.String(), "a shorter line blanks the rest of the longer one")

	require.Equal(t, "1023 B", humanBytes(1023))
	require.Equal(t, "1.5 KiB", humanBytes(1536))
	require.Equal(t, "2.0 GiB", humanBytes(2<<30))
	require.False(t, isTerminal(&b))
	require.Zero(t, inputSize(strings.NewReader("abc")))
	f, err := os.CreateTemp(t.TempDir(), "in")
	require.NoError(t, err)
	_, err = f.WriteString("12345")
	require.NoError(t, err)
	require.Equal(t, int64(5), inputSize(f))
	require.NoError(t, f.Close())
}

// fakeTemporal answers the calls of describe, list and history export with
// fabricated values; other calls panic through the nil embedded client.
type fakeTemporal struct {
	temporalclient.Client
	description wire.Description
	executions  []*workflowpb.WorkflowExecutionInfo
	history     []*historypb.HistoryEvent
	closed      bool
}

func (f *fakeTemporal) Close() { f.closed = true }

func (f *fakeTemporal) QueryWorkflow(_ context.Context, workflowID, _, queryType string, _ ...any) (converter.EncodedValue, error) {
	if workflowID != wire.WorkflowID(f.description.SessionID) || queryType != wire.QueryDescribe {
		return nil, errors.New("unexpected query")
	}
	return jsonValue{f.description}, nil
}

func (f *fakeTemporal) ListWorkflow(context.Context, *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: f.executions}, nil
}

func (f *fakeTemporal) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) temporalclient.HistoryEventIterator {
	return &historyIter{events: f.history}
}

type jsonValue struct{ v any }

func (v jsonValue) HasValue() bool { return true }
func (v jsonValue) Get(ptr any) error {
	b, err := json.Marshal(v.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

type historyIter struct{ events []*historypb.HistoryEvent }

func (h *historyIter) HasNext() bool { return len(h.events) > 0 }
func (h *historyIter) Next() (*historypb.HistoryEvent, error) {
	e := h.events[0]
	h.events = h.events[1:]
	return e, nil
}

func TestDescribeAndListCommands(t *testing.T) {
	isolateEnv(t)
	sa, err := converter.GetDefaultDataConverter().ToPayload("live")
	require.NoError(t, err)
	id, err := converter.GetDefaultDataConverter().ToPayload("s1")
	require.NoError(t, err)
	f := &fakeTemporal{
		description: wire.Description{SessionID: "s1", Phase: wire.PhaseLive, Source: wire.SourceStartup, NextSeq: 3,
			Lifecycle: []wire.LifecycleEntry{}, CompensationErrors: []wire.CompensationError{}},
		executions: []*workflowpb.WorkflowExecutionInfo{{
			Execution: &commonpb.WorkflowExecution{WorkflowId: "session/s1", RunId: "r1"},
			Type:      &commonpb.WorkflowType{Name: wire.CreateSessionName},
			StartTime: timestamppb.New(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)),
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
				"SessionId": id, "SessionPhase": sa}},
		}},
	}
	stubDial(t, f)

	r := mustOK(t, runCLI(t, "", "describe", "--id", "s1", "--json"))
	require.JSONEq(t, `{"sessionId":"s1","phase":"live","source":"startup","handleOpen":false,"nextSeq":3,"pendingEvents":0,"lifecycle":[],"compensationErrors":[]}`, r.stdout)
	require.True(t, f.closed, "the client is closed after the command")

	r = mustOK(t, runCLI(t, "", "describe", "--id", "s1"))
	require.Contains(t, r.stdout, "phase           live\n")

	r = mustOK(t, runCLI(t, "", "list", "--json"))
	require.JSONEq(t, `[{"sessionId":"s1","workflowId":"session/s1","runId":"r1","workflowType":"CreateSession","startTime":"2026-05-01T12:00:00Z","phase":"live","source":"searchAttributes"}]`, r.stdout)

	f.executions = nil
	r = mustOK(t, runCLI(t, "", "list", "--json"))
	require.Equal(t, "[]\n", r.stdout)
	r = mustOK(t, runCLI(t, "", "list"))
	require.Equal(t, "no running sessions\n", r.stdout)
}

func TestHistoryExportCommand(t *testing.T) {
	isolateEnv(t)
	f := &fakeTemporal{history: []*historypb.HistoryEvent{
		{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{WorkflowType: &commonpb.WorkflowType{Name: wire.CreateSessionName}}}},
		{EventId: 2, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, Attributes: &historypb.HistoryEvent_WorkflowTaskScheduledEventAttributes{
			WorkflowTaskScheduledEventAttributes: &historypb.WorkflowTaskScheduledEventAttributes{Attempt: 1}}},
	}}
	stubDial(t, f)
	out := filepath.Join(t.TempDir(), "create.json")
	r := mustOK(t, runCLI(t, "", "history", "export", "--id", "s1", "--out", out))
	require.Equal(t, "exported 2 events of workflow session/s1 to "+out+"\n", r.stdout)
	hist, err := temporalclient.HistoryFromJSON(bytes.NewReader(readFile(t, out)), temporalclient.HistoryJSONOptions{})
	require.NoError(t, err)
	require.Len(t, hist.Events, 2)
	require.Equal(t, wire.CreateSessionName, hist.Events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName())
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")

	f.history = f.history[:1]
	r = mustOK(t, runCLI(t, "", "history", "export", "--workflow-id", "loop/main", "--out", "-"))
	hist, err = temporalclient.HistoryFromJSON(strings.NewReader(r.stdout), temporalclient.HistoryJSONOptions{})
	require.NoError(t, err)
	require.Len(t, hist.Events, 1)
}

func TestUnlockCommandWithoutTemporal(t *testing.T) {
	isolateEnv(t)
	dialed := stubDial(t, nil)
	root := t.TempDir()
	st := newTestStore(t, root, "none")
	ctx := context.Background()

	// No lease: nothing to check.
	mustOK(t, logCmd(t, root, "none", "", "create", "--id", "free"))
	r := mustOK(t, runCLI(t, "", "unlock", "--id", "free", "--root", root, "--compression", "none"))
	require.Equal(t, "no lease held\n", r.stdout)

	// A lease taken by a log command cannot be checked through Temporal.
	h, err := openWrite(ctx, st, "free")
	require.NoError(t, err)
	r = runCLI(t, "", "unlock", "--id", "free", "--root", root, "--compression", "none")
	mustFail(t, r, 1, `session "free" is leased by a starter log command`)
	require.NotNil(t, leaseOf(t, root, "none", "free"), "the lease stays")

	// --force removes it without Temporal.
	r = mustOK(t, runCLI(t, "", "unlock", "--id", "free", "--root", root, "--compression", "none", "--force"))
	require.True(t, strings.HasPrefix(r.stdout, `removed lease of session "free": handle "cli/`), r.stdout)
	require.NotContains(t, r.stdout, "erased", "the session was written before")
	require.Nil(t, leaseOf(t, root, "none", "free"))
	require.ErrorIs(t, h.Append(ctx, []session.Event{ev(t, wire.TypeTurnStart, 0, 1, `{"turn":1}`)}), wire.ErrOwnershipLost, "the old owner can no longer write")

	// A workflow-owned lease needs Temporal: the dial is attempted.
	_, err = st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: "wf", CreatedAt: 1}, jsonl.CreateOptions{HandleID: "h-wf", Owner: jsonl.Owner{WorkflowID: "session/wf", RunID: "r"}})
	require.NoError(t, err)
	r = runCLI(t, "", "unlock", "--id", "wf", "--root", root, "--compression", "none")
	mustFail(t, r, 1, "connect to Temporal at localhost:7233 (namespace default)")
	require.Len(t, *dialed, 1)
	require.NotNil(t, leaseOf(t, root, "none", "wf"))

	// A never-written session is erased by the forfeit.
	r = mustOK(t, runCLI(t, "", "unlock", "--id", "wf", "--root", root, "--compression", "none", "--force"))
	require.Contains(t, r.stdout, `session "wf" was never written; it was erased`)
}

func TestForkRequest(t *testing.T) {
	build := func(args ...string) client.ForkRequest {
		t.Helper()
		var in forkInput
		cmd := newForkCmd(&app{})
		require.NoError(t, cmd.Flags().Parse(args))
		in.parent, _ = cmd.Flags().GetString("id")
		in.newID, _ = cmd.Flags().GetString("new-id")
		in.cwd, _ = cmd.Flags().GetString("cwd")
		in.atTurn, _ = cmd.Flags().GetInt64("at-turn")
		in.route.provider, _ = cmd.Flags().GetString("provider")
		require.NoError(t, in.validate())
		return in.request()
	}
	require.Equal(t, client.ForkRequest{ParentID: "s", NewID: "t", AtTurn: 3}, build("--id", "s", "--new-id", "t", "--at-turn", "3"))
	require.Equal(t, client.ForkRequest{ParentID: "s", NewID: "t", AgentOptions: &wire.AgentOptions{Provider: "scripted"}},
		build("--id", "s", "--new-id", "t", "--provider", "scripted"), "no --at-turn: the last completed turn")
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "x"), build("--id", "s", "--new-id", "t", "--cwd", "x").Cwd)
}
