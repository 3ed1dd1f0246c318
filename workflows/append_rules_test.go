package workflows_test

// The Append validator and create refuse what the store would refuse: a
// batch that a read, a crash repair or a resume could not handle.

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// rawEvent is an event with raw JSON data, bypassing every check.
func rawEvent(typ string, seq int64, data string) session.Event {
	e := session.Event{Type: typ, Seq: seq, Time: 100 + seq, Data: json.RawMessage(data)}
	if session.SurfaceEligible(typ) {
		e.SurfaceOp = session.AppendOp()
	}
	return e
}

// badBatches are the batches, at seq 0 of an unseeded session, that once
// were acknowledged and then bricked the session, with the refusal each
// gets.
var badBatches = []struct {
	name  string
	batch []session.Event
	want  string
}{
	{"inherited marker", []session.Event{rawEvent(wire.TypeEndSeed, 0, `{"inherited":true}`)},
		`invalid session event at index 0 (seq 0, type "session/end-seed"): unseeded Session contains an inherited end-seed marker`},
	{"inherited yes", []session.Event{rawEvent(wire.TypeEndSeed, 0, `{"inherited":"yes"}`)},
		`invalid session event at index 0 (seq 0, type "session/end-seed"): session/end-seed event (seq 0): malformed data: `},
	{"turn/start {}", []session.Event{rawEvent(wire.TypeTurnStart, 0, `{}`)},
		`invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data lacks "turn"`},
	{"turn as a string", []session.Event{rawEvent(wire.TypeTurnStart, 0, `{"turn":"1"}`)},
		`invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): malformed data: `},
	{"turn 0", []session.Event{rawEvent(wire.TypeTurnStart, 0, `{"turn":0}`)},
		`invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data.turn must be a safe integer >= 1, got 0`},
	{"tool call without id", []session.Event{rawEvent(wire.TypeTurnStart, 0, `{"turn":1}`),
		rawEvent(wire.TypeAssistantMessage, 1, `{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","name":"x","arguments":{}}]},"stream":[]}`)},
		`invalid session event at index 1 (seq 1, type "assistant/message"): crash repair could not read it: assistant/message event (seq 1): tool-call block 0 lacks "id"`},
	{"custom/x not ignorable", []session.Event{rawEvent("custom/x", 0, `{}`)},
		`invalid session event at index 0 (seq 0, type "custom/x"): event type "custom/x" is unknown to this build and not marked ignorable`},
}

// createWants are the refusals of a create whose seed is the bad batch,
// where the create's own marker check runs first.
var createWants = map[string]string{
	"inherited marker": `: unseeded Session contains an inherited end-seed marker (type: InvalidArgument, retryable: false)`,
	"inherited yes":    `: session/end-seed event (seq 0): malformed data: `,
}

// The live Append validator rejects each bad batch as non-retryable
// InvalidArgument before accepting it; nothing reaches the store, and the
// session, disposed after a valid append, resumes.
func TestAppendValidatorRefusesWhatResumeCannotRead(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("rules")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	results := make([]*sessiontest.Result, len(badBatches))
	for i, b := range badBatches {
		results[i] = h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: b.batch})
	}
	good := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	dispose := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "rules"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	dispose.OK(t)
	for i, b := range badBatches {
		app := sessiontest.AppErr(t, results[i].Rejection(t))
		require.Equal(t, "InvalidArgument", app.Type(), b.name)
		require.True(t, app.NonRetryable(), b.name)
		require.Contains(t, app.Error(), b.want, b.name)
	}
	var r wire.AppendResult
	good.Decode(t, &r)
	require.Equal(t, int64(5), r.NextSeq)
	require.Equal(t, 1, h.Count(wire.AppendBatchName), "only the valid batch reached the store")
	require.Len(t, sessiontest.Stored(t, h.Store, "rules"), 5)

	resume := sessiontest.NewHarnessOn(t, h.Store).WithID("rules")
	ready, disposed := resume.ReadyThenDispose(time.Second, "")
	resume.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "rules"})
	require.NoError(t, resume.Env.GetWorkflowError())
	var info wire.SessionInfo
	ready.Decode(t, &info)
	var dr wire.DisposeResult
	disposed.Decode(t, &dr)
	require.Equal(t, int64(6), dr.NextSeq, "the resume stored its end-seed marker")
}

// A create whose inline seed breaks those rules fails before any side
// effect, as non-retryable InvalidArgument.
func TestCreateRefusesASeedTheStoreWouldRefuse(t *testing.T) {
	for _, b := range badBatches {
		t.Run(b.name, func(t *testing.T) {
			h := sessiontest.NewHarness(t).WithID("seed")
			h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "seed", Seed: b.batch})
			err := h.Env.GetWorkflowError()
			app := sessiontest.AppErr(t, err)
			require.Equal(t, "InvalidArgument", app.Type())
			require.True(t, app.NonRetryable())
			want := b.want
			if w, ok := createWants[b.name]; ok {
				want = w
			}
			require.Contains(t, err.Error(), want)
			require.Empty(t, h.StartedNames(), "no activity ran")
			sessiontest.RequireErased(t, h.Store, "seed")
		})
	}
}

// A resume of a raw log whose damage after the last turn/end is followed by
// complete valid records fails SessionCorrupt at its write open, once (not
// retried), and leaves the log byte for byte and no lease behind.
func TestResumeOfMidTailDamageFailsWithoutTouchingTheLog(t *testing.T) {
	h := sessiontest.NewHarnessOn(t, sessiontest.NewStore(t, jsonl.CompressionNone)).WithID("mid")
	sessiontest.WriteStored(t, h.Store, wire.Header{ID: "mid", CreatedAt: 1}, 0, []session.Event{
		sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1), sessiontest.TurnStart(t, 2, 2), sessiontest.Ev(t, wire.TypeStepStart, 3, map[string]any{"turn": 2, "step": 1}),
	})
	snap, err := h.Store.Stat(context.Background(), "mid")
	require.NoError(t, err)
	raw, err := os.ReadFile(snap.Path)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(raw), "\n")
	lines[3] = "garbage\n" // turn/start@2, in the middle of the tail
	damaged := []byte(strings.Join(lines, ""))
	require.NoError(t, os.WriteFile(snap.Path, damaged, 0o600))

	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "mid"})
	err = h.Env.GetWorkflowError()
	app := sessiontest.AppErr(t, err)
	require.Equal(t, string(jsonl.CodeCorrupt), app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, err.Error(), "is followed by a complete valid record at line 4")
	require.Equal(t, 1, h.Count(wire.OpenHandleName), "a corruption is not retried")
	require.Zero(t, h.Count(wire.RepairName))
	after, err := os.ReadFile(snap.Path)
	require.NoError(t, err)
	require.Equal(t, damaged, after)
	lease, err := h.Store.LeaseOf(context.Background(), "mid")
	require.NoError(t, err)
	require.Nil(t, lease)
}

// Setup events the store would refuse fail the create before the commit
// hook runs, as non-retryable InvalidArgument; nothing is stored.
func TestSetupEventsTheStoreWouldRefuseFailBeforeCommit(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("setup")
	h.Hooks.SetupFunc = func(_ context.Context, in wire.SetupInput) (workflows.SetupResult, error) {
		return workflows.SetupResult{Events: []session.Event{rawEvent(wire.TypeTurnStart, in.EventCount, `{"turn":0}`)}}, nil
	}
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "setup", Hooks: sessiontest.AllHooks})
	err := h.Env.GetWorkflowError()
	app := sessiontest.AppErr(t, err)
	require.Equal(t, "InvalidArgument", app.Type())
	require.True(t, app.NonRetryable())
	require.Equal(t, `setup events: invalid session event at index 0 (seq 0, type "turn/start"): crash repair could not read it: turn/start event (seq 0): data.turn must be a safe integer >= 1, got 0`, app.Message())
	require.NotContains(t, h.Hooks.Log(), "setup:commit")
	require.Zero(t, h.Count(wire.AppendBatchName))
	sessiontest.RequireErased(t, h.Store, "setup")
}
