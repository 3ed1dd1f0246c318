package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// turnTemporal answers Followup, LoopState (states in turn, the last
// repeating) and DescribeWorkflow (the model progress of the same poll).
type turnTemporal struct {
	temporalclient.Client
	t        *testing.T
	states   []wire.LoopState
	progress []*wire.ModelProgress
	polls    int
	followup wire.InputRequest
}

func (f *turnTemporal) Close() {}

type doneUpdate struct {
	temporalclient.WorkflowUpdateHandle
	v any
}

func (u doneUpdate) Get(_ context.Context, ptr any) error { return jsonValue{u.v}.Get(ptr) }

func (f *turnTemporal) UpdateWorkflow(_ context.Context, o temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
	if o.WorkflowID != "session/s1" || o.UpdateName != wire.UpdateFollowup {
		return nil, errors.New("unexpected update " + o.UpdateName)
	}
	f.followup = o.Args[0].(wire.InputRequest)
	return doneUpdate{v: wire.InputResult{MessageID: "m1", Target: "next-turn", SplicedSeq: -1}}, nil
}

func (f *turnTemporal) QueryWorkflow(_ context.Context, _, _, q string, _ ...any) (converter.EncodedValue, error) {
	if q != wire.QueryLoopState {
		return nil, errors.New("unexpected query " + q)
	}
	s := f.states[min(f.polls, len(f.states)-1)]
	f.polls++
	return jsonValue{s}, nil
}

func (f *turnTemporal) DescribeWorkflow(context.Context, string, string) (*temporalclient.WorkflowExecutionDescription, error) {
	resp := &workflowservice.DescribeWorkflowExecutionResponse{}
	if p := f.progress[min(f.polls-1, len(f.progress)-1)]; p != nil {
		d, err := converter.GetDefaultDataConverter().ToPayloads(*p)
		require.NoError(f.t, err)
		resp.PendingActivities = []*workflowpb.PendingActivityInfo{{ActivityType: &commonpb.ActivityType{Name: wire.CallModelActivity}, HeartbeatDetails: d}}
	}
	return &temporalclient.WorkflowExecutionDescription{RawResponse: resp}, nil
}

func turnFixture(t *testing.T, root string) *turnTemporal {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	ctx := context.Background()
	h, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: "s1", CreatedAt: 1}, jsonl.CreateOptions{HandleID: "fixture"})
	require.NoError(t, err)
	mk := func(typ string, seq int64, v any) session.Event {
		e, err := session.NewEvent(typ, seq, 1, v)
		require.NoError(t, err)
		return e
	}
	answer := map[string]any{"turn": 1, "step": 2, "stream": []any{},
		"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Hello world"}}}}
	require.NoError(t, h.Append(ctx, []session.Event{
		mk("turn/start", 0, map[string]any{"turn": 1}),
		mk("step/start", 1, map[string]any{"turn": 1, "step": 2}),
		mk("assistant/message", 2, answer),
		mk("step/end", 3, map[string]any{"turn": 1, "step": 2}),
		mk("turn/end", 4, map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}}),
	}))
	require.NoError(t, h.Close(ctx))
	running := func(step int64, calls ...wire.CallState) wire.LoopState {
		return wire.LoopState{State: "running", Turn: 1, Step: step, Calls: calls,
			Recent: []wire.TurnInfo{{Turn: 1, Claimed: []string{"m1"}, Steps: step}}}
	}
	return &turnTemporal{t: t,
		states: []wire.LoopState{
			running(1, wire.CallState{ID: "c1", Name: "read_file", State: "running"}),
			running(1, wire.CallState{ID: "c1", Name: "read_file", State: "done", IsError: true, Code: "OUTSIDE_CWD"}),
			running(2),
			{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, EndSeq: 5, Steps: 2, Claimed: []string{"m1"},
				Reason: &wire.TurnEndReason{Kind: "completed"}}}},
		},
		progress: []*wire.ModelProgress{nil, nil, {Turn: 1, Step: 2, Text: "Hello"}, nil},
	}
}

func TestTurnCommandPrintsStreamToolsAndRest(t *testing.T) {
	isolateEnv(t)
	root := t.TempDir()
	f := turnFixture(t, root)
	stubDial(t, f)
	r := mustOK(t, runCLI(t, "", "turn", "--id", "s1", "--prompt", "hi there", "--root", root, "--compression", "none"))
	require.Equal(t, "→ read_file (c1)\n✗ read_file (c1) OUTSIDE_CWD\nHello world\nturn 1 completed\n", r.stdout)
	require.JSONEq(t, `"hi there"`, string(f.followup.Content))
}

func TestTurnCommandJSON(t *testing.T) {
	isolateEnv(t)
	root := t.TempDir()
	f := turnFixture(t, root)
	stubDial(t, f)
	r := mustOK(t, runCLI(t, "", "turn", "--id", "s1", "--prompt", "x", "--json", "--root", root, "--compression", "none"))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var kinds, texts []string
	var last struct {
		Kind   string          `json:"kind"`
		Text   string          `json:"text"`
		Events []session.Event `json:"events"`
	}
	for _, l := range lines {
		last.Text = ""
		require.NoError(t, json.Unmarshal([]byte(l), &last))
		kinds = append(kinds, last.Kind)
		if last.Kind == "text" {
			texts = append(texts, last.Text)
		}
	}
	// The stored answer's rest, streamed after the last poll, is a text
	// progress of its own.
	require.Equal(t, []string{"started", "tool-started", "tool-finished", "text", "text", "ended"}, kinds)
	require.Equal(t, []string{"Hello", " world"}, texts)
	require.Len(t, last.Events, 5)
}

func TestTurnCommandInputErrors(t *testing.T) {
	isolateEnv(t)
	mustFail(t, runCLI(t, "", "turn", "--prompt", "x"), 1, "--id is required")
	mustFail(t, runCLI(t, "", "turn", "--id", "a"), 1, "--prompt is required")
}

// create and resume take the agent's route for turns.
func TestCreateAndResumeRoute(t *testing.T) {
	var in createInput
	cmd := newCreateCmd(&app{})
	require.NoError(t, cmd.Flags().Parse([]string{"--provider", "scripted", "--model", "m1"}))
	in.id, in.route.provider, in.route.model = "s1", "scripted", "m1"
	req, err := in.request()
	require.NoError(t, err)
	require.Equal(t, &wire.AgentOptions{Provider: "scripted", Model: "m1"}, req.AgentOptions)
	p, _ := cmd.Flags().GetString("provider")
	require.Equal(t, "scripted", p)

	in.route = routeFlags{}
	req, err = in.request()
	require.NoError(t, err)
	require.Nil(t, req.AgentOptions, "no route, no agent options")

	rcmd := newResumeCmd(&app{})
	require.NoError(t, rcmd.Flags().Parse([]string{"--provider", "x", "--model", "y"}))
	m, _ := rcmd.Flags().GetString("model")
	require.Equal(t, "y", m)
}

// TestTurnCommandPrintsTheLiveText: with the root, `turn` prints the text
// the model activity writes to the session's live file (the heartbeat
// details carry none here), then the stored answer's rest.
func TestTurnCommandPrintsTheLiveText(t *testing.T) {
	isolateEnv(t)
	root := t.TempDir()
	f := turnFixture(t, root)
	f.progress = []*wire.ModelProgress{nil}
	require.NoError(t, os.WriteFile(filepath.Join(root, "_no-cwd", "s1", "live.1.2.1"),
		[]byte(`{"live":1,"turn":1,"step":2,"attempt":1,"startedMs":1}`+"\n"+
			`{"kind":"text","offset":0,"text":"Hel"}`+"\n"+`{"kind":"text","offset":3,"text":"lo wo"}`+"\n"), 0o600))
	stubDial(t, f)
	r := mustOK(t, runCLI(t, "", "turn", "--id", "s1", "--prompt", "x", "--json", "--root", root, "--compression", "none"))
	var texts []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var p struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &p))
		if p.Kind == "text" {
			texts = append(texts, p.Text)
		}
	}
	require.Equal(t, []string{"Hello wo", "rld"}, texts)
}
