package workflows_test

// The S0 cases that set up turns (S0-04, S0-17, S0-18, S0-32, S0-33), run
// with turns the loop produces (Followup, the scripted provider, the real
// agent activities and the tool registry) instead of appended events. A
// crash mid-turn is a wedged owner: the lease is forfeited while the model
// or a tool stalls, and a new lifecycle resumes the session.

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// stallTool is an exclusive, non-idempotent tool that reports on started
// when it runs (its tool/call is stored by then) and blocks until its
// context ends or release closes; then it fails.
func stallTool(started chan<- struct{}, release <-chan struct{}) tool.Tool {
	return tool.Tool{
		Name:        "stall",
		Description: "blocks until cancelled",
		Schema:      json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, _ tool.Call) (tool.Result, error) {
			select {
			case started <- struct{}{}:
			default:
			}
			select {
			case <-ctx.Done():
				return tool.Result{}, ctx.Err()
			case <-release:
				return tool.Result{}, errors.New("released")
			}
		},
	}
}

func turnNumbers(t *testing.T, evs []session.Event) []int64 {
	t.Helper()
	var out []int64
	for _, e := range evs {
		if e.Type == wire.TypeTurnStart {
			ts, err := e.TurnStart()
			require.NoError(t, err)
			out = append(out, ts.Turn)
		}
	}
	return out
}

func rawEvents(t *testing.T, evs []session.Event) []string {
	t.Helper()
	out := make([]string, len(evs))
	for i, e := range evs {
		b, err := e.MarshalJSON()
		require.NoError(t, err)
		out[i] = string(b)
	}
	return out
}

// S0-04 with a real turn: a create with a 2-event seed, then a Followup
// the loop runs: the log is contiguous from 0 and holds the seed, the
// marker and turn 2 with the model's answer.
func TestRealTurnS0_04_SeedPlusLiveTurn(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("r04")
	sessiontest.UseRealAgentTools(h, nil, scripted.Text("assistant text").WithChunkSize(5))
	seed := []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.TurnEnd(t, 1, 1)}
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("u1", "go on"))
	h.WaitFor(2*time.Second, "turn 2 ended", h.TurnsEnded(1))
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "r04", Seed: seed, AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	fu.OK(t)
	disp.OK(t)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, int64(3), info.NextSeq)
	require.Equal(t, int64(2), info.FirstLiveSeq)
	evs := sessiontest.Stored(t, h.Store, "r04")
	sessiontest.RequireBalanced(t, evs)
	evs = sessiontest.WithoutRecords(t, evs)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed",
		"turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(evs))
	require.Equal(t, []int64{1, 2}, turnNumbers(t, evs))
	m := assistantOf(t, evs[6])
	require.Equal(t, int64(2), m.Turn)
	require.Equal(t, []wire.ContentBlock{{Type: "text", Text: "assistant text"}}, m.Message.Content)
	require.Equal(t, `{"turn":2,"reason":{"kind":"completed"}}`, string(evs[8].Data))
}

// S0-17 with a real turn: the model stalls mid-stream, so the log holds
// the open turn (turn/start, step/start, the prompt) and no model output;
// the owner is wedged and a resume stores exactly the closers
// step/end{turn 1, step 1}, turn/end{interrupted} and the marker. The
// wedged owner's late cancellation stores nothing more.
func TestRealTurnS0_17_ResumeClosesOpenTurn(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("r17")
	sessiontest.UseRealAgentTools(h, nil, scripted.Text("never shown").WithStall(0))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("u1", "hi"))
	var before, after []session.Event
	var info wire.SessionInfo
	h.AtStarted(3*time.Second, wire.CallModelActivity, func() {
		before = sessiontest.Stored(t, h.Store, "r17")
		lease, err := h.Store.ForceUnlock(context.Background(), "r17")
		require.NoError(t, err)
		require.NotNil(t, lease)
		info, _ = sessiontest.ResumeAndDispose(t, h.Store, "r17")
		after = sessiontest.Stored(t, h.Store, "r17")
	})
	h.AtNoWait(4*time.Second, h.Env.CancelWorkflow)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "r17", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	require.Equal(t, []string{"turn/start", "step/start", "user/message"}, sessiontest.Types(before))
	require.Equal(t, int64(6), info.NextSeq)
	require.Equal(t, int64(1), info.LastTurn)
	sessiontest.RequireBalanced(t, after)
	require.Equal(t, rawEvents(t, before), rawEvents(t, after[:3]), "the stored prefix is unchanged")
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "step/end", "turn/end", "session/end-seed"}, sessiontest.Types(after))
	require.Equal(t, `{"turn":1,"step":1}`, string(after[3].Data))
	require.Equal(t, `{"turn":1,"reason":{"kind":"interrupted"}}`, string(after[4].Data))
	// The wedged owner's late cancellation changed nothing.
	require.Equal(t, rawEvents(t, after), rawEvents(t, sessiontest.Stored(t, h.Store, "r17")))
	sessiontest.RequireReleased(t, h.Store, "r17")
}

// S0-18 with a real turn: the model calls a non-idempotent tool that
// stalls after its tool/call was stored; the owner is wedged and a resume
// stores the TOOL_OUTCOME_UNKNOWN result for the recorded call
// (sourceEventSeqs [the call's seq]), step/end, turn/end{interrupted} and
// the marker; the tool is not run again.
func TestRealTurnS0_18_ResumeToolOutcomeUnknown(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("r18")
	started, release := make(chan struct{}, 1), make(chan struct{})
	sessiontest.UseRealAgentTools(h, []tool.Tool{stallTool(started, release)},
		scripted.ToolCall("call-1", "stall", `{}`), scripted.Text("unreached"))
	cwd := t.TempDir()
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("u1", "run it"))
	var before, after []session.Event
	var info wire.SessionInfo
	// A running activity holds the environment's clock, so the crash is
	// driven from a goroutine once the tool runs (its tool/call stored);
	// then the wedged owner's tool returns (its workflow runs tools in a
	// disconnected context) and the workflow is cancelled.
	crashed := make(chan struct{})
	go func() {
		defer h.Env.CancelWorkflow()
		defer close(release)
		defer close(crashed)
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Error("the stalling tool did not run")
			return
		}
		before = sessiontest.Stored(t, h.Store, "r18")
		lease, err := h.Store.ForceUnlock(context.Background(), "r18")
		require.NoError(t, err)
		require.NotNil(t, lease)
		info, _ = sessiontest.ResumeAndDispose(t, h.Store, "r18")
		after = sessiontest.Stored(t, h.Store, "r18")
	}()
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "r18", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: cwd}})
	<-crashed
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call"}, sessiontest.Types(sessiontest.WithoutRecords(t, before)))
	require.Len(t, before, 10, "the model call stored its route, 4 chunks and the message")
	require.Equal(t, int64(14), info.NextSeq)
	sessiontest.RequireBalanced(t, after)
	require.Equal(t, rawEvents(t, before), rawEvents(t, after[:10]), "the stored prefix is unchanged")
	closing := after[10:]
	require.Equal(t, []string{"tool/result", "step/end", "turn/end", "session/end-seed"}, sessiontest.Types(closing))
	require.Equal(t, int64(10), closing[0].Seq)
	require.Equal(t, []int64{9}, closing[0].SourceEventSeqs)
	tr, err := closing[0].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "interrupted-tool-result-call-1-10", tr.Message.ID)
	require.Equal(t, "call-1", tr.Message.Source.CallID)
	require.Equal(t, "TOOL_OUTCOME_UNKNOWN", tr.Error.Code)
	require.Len(t, tr.Message.Content, 1)
	require.True(t, tr.Message.Content[0].IsError)
	require.JSONEq(t, `[{"type":"text","text":"The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."}]`,
		string(mustJSON(t, tr.Message.Content[0].Content)))
	require.Equal(t, `{"turn":1,"step":1}`, string(closing[1].Data))
	require.Equal(t, `{"turn":1,"reason":{"kind":"interrupted"}}`, string(closing[2].Data))
	require.Equal(t, 1, h.Count(wire.RunToolActivity), "the tool ran once")
	// The wedged owner's late cancellation changed nothing.
	require.Equal(t, rawEvents(t, after), rawEvents(t, sessiontest.Stored(t, h.Store, "r18")))
	sessiontest.RequireReleased(t, h.Store, "r18")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// S0-32 with real turns over the real agent activities: an idle Inject
// after a completed turn is stored as agent/inbox/spliced; the owner is
// wedged; a resume finds the message pending and the next turn claims it,
// with its deletion splice, before the followup, and the model sees it.
func TestRealTurnS0_32_InjectSurvivesWedgedOwner(t *testing.T) {
	after := injectAcrossWedgedOwner(sessiontest.NewHarness(t).WithID("r32"), "r32",
		func(h *sessiontest.Harness) { sessiontest.UseRealAgentTools(h, nil, scripted.Text("one")) },
		// Response 1: the conversation then holds one assistant message.
		func(h *sessiontest.Harness) {
			sessiontest.UseRealAgentTools(h, nil, scripted.Text("unused"), scripted.Text("two"))
		})
	require.Equal(t, []wire.ContentBlock{{Type: "text", Text: "one"}}, assistantOf(t, after[3]).Message.Content)
	require.Equal(t, []wire.ContentBlock{{Type: "text", Text: "two"}}, assistantOf(t, after[13]).Message.Content)
}

// S0-33 with real turns: a turn with a tool call in a cwd, dispose; a
// resume in a fresh environment keeps the stored events byte-identical,
// adds the marker at the old count, and the next Followup runs turn 2
// with contiguous seqs; the model sees the first turn's conversation.
func TestRealTurnS0_33_ResumeContinuesNumbering(t *testing.T) {
	cwd := t.TempDir()
	h := sessiontest.NewHarness(t).WithID("r33")
	sessiontest.UseRealAgentTools(h, nil,
		scripted.ToolCall("c1", "write_file", `{"path":"n.txt","content":"first"}`),
		scripted.Text("first done"))
	ready1 := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu1 := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("u1", "write"))
	h.WaitFor(2*time.Second, "turn 1 ended", h.TurnsEnded(1))
	disp1 := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	meta := &wire.SessionMeta{Cwd: cwd}
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "r33", AgentOptions: sessiontest.Route(), Meta: meta})
	require.NoError(t, h.Env.GetWorkflowError())
	ready1.OK(t)
	fu1.OK(t)
	disp1.OK(t)
	old := sessiontest.Stored(t, h.Store, "r33")
	require.Equal(t, []string{"turn/start", "step/start", "user/message", "assistant/message", "tool/call", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end"}, sessiontest.Types(sessiontest.WithoutRecords(t, old)))

	h2 := sessiontest.NewHarnessOn(t, h.Store).WithID("r33")
	// Responses 0 and 1 are turn 1's; the conversation then holds two
	// assistant messages.
	sessiontest.UseRealAgentTools(h2, nil, scripted.Text("unused"), scripted.Text("unused"),
		scripted.ToolCall("c2", "read_file", `{"path":"n.txt"}`), scripted.Text("second done"))
	ready := h2.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var mid []session.Event
	h2.At(2*time.Second, func() { mid = sessiontest.Stored(t, h2.Store, "r33") })
	fu2 := h2.UpdateAt(3*time.Second, "", wire.UpdateFollowup, sessiontest.PromptID("u2", "read"))
	h2.WaitFor(3*time.Second, "turn 2 ended", h2.TurnsEnded(1))
	disp2 := h2.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h2.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "r33", AgentOptions: sessiontest.Route()})
	require.NoError(t, h2.Env.GetWorkflowError())
	fu2.OK(t)
	disp2.OK(t)
	var info wire.SessionInfo
	ready.Decode(t, &info)
	require.Equal(t, "r33", info.SessionID)
	require.Equal(t, int64(1), info.LastTurn)
	require.Equal(t, int64(len(old)), info.FirstLiveSeq)
	require.Len(t, mid, len(old)+1)
	require.Equal(t, wire.TypeEndSeed, mid[len(mid)-1].Type)
	require.Equal(t, rawEvents(t, old), rawEvents(t, mid[:len(old)]), "the stored prefix is byte-identical")
	final := sessiontest.Stored(t, h.Store, "r33")
	sessiontest.RequireBalanced(t, final)
	require.Equal(t, []int64{1, 2}, turnNumbers(t, final))
	// Turn 2 after the marker, without a request/context: the route is
	// the stored one.
	second := sessiontest.WithoutRecords(t, final[len(old)+1:])
	require.Len(t, second, 11)
	require.NotContains(t, sessiontest.Types(final[len(old)+1:]), wire.TypeRequestContext)
	require.Equal(t, int64(21), second[0].Seq)
	require.Equal(t, `{"turn":2}`, string(second[0].Data))
	var results []string
	for _, e := range second {
		if e.Type == wire.TypeToolResult {
			tr, err := e.ToolResult()
			require.NoError(t, err)
			require.False(t, tr.Message.Content[0].IsError)
			results = append(results, tr.Message.Content[0].Content[0].Text)
		}
	}
	require.Len(t, results, 1)
	require.Contains(t, results[0], "first", "turn 2's read sees turn 1's write")
	require.Equal(t, "second done", assistantOf(t, second[len(second)-3]).Message.Content[0].Text)
	require.Equal(t, `{"turn":2,"reason":{"kind":"completed"}}`, string(final[len(final)-1].Data))
}
