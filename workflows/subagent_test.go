package workflows_test

// Subagents: a call of the subagent tool runs as a one-shot child session
// (D119).

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// subagentCall is a scripted call of the subagent tool.
func subagentCall(id, label, prompt string) scripted.Call {
	args, _ := json.Marshal(map[string]any{"description": label, "prompt": prompt, "run_in_background": false})
	return scripted.Call{ID: id, Name: "subagent", Arguments: string(args)}
}

// useSubagentScript registers the real agent activities with the subagent
// tool (max depth maxDepth) and a scripted provider answering from s.
func useSubagentScript(t *testing.T, h *sessiontest.Harness, s scripted.Script, maxDepth int) *scripted.Provider {
	t.Helper()
	p, err := scripted.New(s)
	require.NoError(t, err)
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"scripted": p}, tool.Subagent(tool.SubagentOptions{MaxDepth: maxDepth})))
	return p
}

// toolResultTexts returns each tool/result's call id, text and isError,
// in log order.
func toolResultTexts(t *testing.T, evs []session.Event) (ids, texts []string, errs []bool) {
	t.Helper()
	for _, e := range evs {
		if e.Type != wire.TypeToolResult {
			continue
		}
		r, err := e.ToolResult()
		require.NoError(t, err)
		ids = append(ids, r.Message.Source.CallID)
		var text string
		for _, c := range r.Message.Content[0].Content {
			text += c.Text
		}
		texts = append(texts, text)
		errs = append(errs, r.Message.Content[0].IsError)
	}
	return ids, texts, errs
}

// header reads a session's header.
func header(t *testing.T, st *jsonl.Store, id string) wire.Header {
	t.Helper()
	ctx := context.Background()
	h, err := st.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	defer h.Close(ctx)
	return h.Header()
}

// A parent delegating three tasks in one step: three child sessions run
// side by side, each with its own log whose header names the parent and
// whose events are the harness's; the parent's results are the children's
// answers, in model order.
func TestSubagentThreeChildrenInParallel(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("sp")
	s := scripted.Script{Responses: []scripted.Response{
		scripted.ToolCalls(
			subagentCall("c1", "Say alpha", "TASK-A: reply ALPHA"),
			subagentCall("c2", "Say bravo", "TASK-B: reply BRAVO"),
			subagentCall("c3", "Say charlie", "TASK-C: reply CHARLIE"),
		),
		scripted.Text("PARENT_DONE"),
	}}.
		WithBranch("TASK-A", scripted.Text("ALPHA")).
		WithBranch("TASK-B", scripted.Text("BRAVO").WithChunkSize(2)).
		WithBranch("TASK-C", scripted.Text("CHARLIE"))
	useSubagentScript(t, h, s, 3)
	cwd := t.TempDir()
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "sp", AgentOptions: sessiontest.Route(), Meta: &wire.SessionMeta{Cwd: cwd}}, sessiontest.Prompt("delegate"))
	sessiontest.RequireBalanced(t, evs)

	ids, texts, errs := toolResultTexts(t, evs)
	require.Equal(t, []string{"c1", "c2", "c3"}, ids)
	require.Equal(t, []string{"ALPHA", "BRAVO", "CHARLIE"}, texts)
	require.Equal(t, []bool{false, false, false}, errs)
	require.Equal(t, "PARENT_DONE", assistantOf(t, evs[len(evs)-3]).Message.Content[0].Text)

	callSeqs := map[string]int64{}
	for _, e := range evs {
		if e.Type == wire.TypeToolCall {
			c, err := e.ToolCall()
			require.NoError(t, err)
			callSeqs[c.CallID] = e.Seq
		}
	}
	for i, c := range []struct{ call, label, prompt, answer string }{
		{"c1", "Say alpha", "TASK-A: reply ALPHA", "ALPHA"},
		{"c2", "Say bravo", "TASK-B: reply BRAVO", "BRAVO"},
		{"c3", "Say charlie", "TASK-C: reply CHARLIE", "CHARLIE"},
	} {
		child := agent.ChildSessionID("sp", callSeqs[c.call])
		hd := header(t, h.Store, child)
		require.Equal(t, "sp", hd.ParentSession, "child %d", i)
		require.Equal(t, "subagent", hd.Origin)
		require.Equal(t, int64(1), hd.DelegationDepth)
		require.Equal(t, cwd, hd.Cwd)
		cevs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, h.Store, child))
		require.Equal(t, []string{
			"approval/policy", "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "subagent/descriptor",
			"step/start", "user/message", "assistant/message", "step/end", "turn/end",
		}, sessiontest.Types(cevs), "child %d", i)
		require.JSONEq(t, `{"policy":"never","source":"delegation"}`, string(cevs[0].Data))
		require.JSONEq(t, `{"version":2,"mode":"one-shot","provider":"spawn","label":"`+c.label+`"}`, string(cevs[4].Data))
		var um struct {
			Content []wire.ContentBlock `json:"content"`
		}
		require.NoError(t, json.Unmarshal(cevs[6].Data, &um))
		require.Equal(t, c.prompt, um.Content[0].Text)
		require.Equal(t, c.answer, assistantOf(t, cevs[7]).Message.Content[0].Text)
		require.JSONEq(t, `{"turn":1,"reason":{"kind":"completed"}}`, string(cevs[9].Data))
	}
}

// The depth limit: with maxDepth 1, a child (depth 1) that delegates again
// gets the harness's refusal as its call's result and goes on; the parent
// gets the child's answer.
func TestSubagentDepthLimit(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("sd")
	s := scripted.Script{Responses: []scripted.Response{
		scripted.ToolCalls(subagentCall("p1", "Go deeper", "TASK-D1: delegate once more")),
		scripted.Text("PARENT_DONE"),
	}}.WithBranch("TASK-D1",
		scripted.ToolCalls(subagentCall("k1", "Too deep", "TASK-D2: never runs")),
		scripted.Text("CHILD_DONE"),
	).WithBranch("TASK-D2", scripted.Text("GRANDCHILD"))
	useSubagentScript(t, h, s, 1)
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "sd", AgentOptions: sessiontest.Route()}, sessiontest.Prompt("delegate"))
	_, texts, errs := toolResultTexts(t, evs)
	require.Equal(t, []string{"CHILD_DONE"}, texts)
	require.Equal(t, []bool{false}, errs)

	var callSeq int64
	for _, e := range evs {
		if e.Type == wire.TypeToolCall {
			callSeq = e.Seq
		}
	}
	child := agent.ChildSessionID("sd", callSeq)
	cevs := sessiontest.Stored(t, h.Store, child)
	ids, ctexts, cerrs := toolResultTexts(t, cevs)
	require.Equal(t, []string{"k1"}, ids)
	require.Equal(t, []string{"Error: subagent depth 2 exceeds maxDepth 1"}, ctexts)
	require.Equal(t, []bool{true}, cerrs)
	for _, e := range cevs {
		if e.Type == wire.TypeToolCall {
			_, _, err := h.Store.ReadSummary(context.Background(), agent.ChildSessionID(child, e.Seq))
			require.ErrorContains(t, err, "not found", "no grandchild was created")
		}
	}
}

// A cancelled parent turn cancels its child's turn with cause parent: the
// child's turn ends aborted {kind: parent} and the child disposes itself;
// the parent's turn ends aborted {kind: user}.
func TestSubagentCancelReachesChild(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("sc")
	s := scripted.Script{Responses: []scripted.Response{
		scripted.ToolCalls(subagentCall("p1", "Stall", "TASK-S: think forever")),
		scripted.Text("never"),
	}}.WithBranch("TASK-S", scripted.Text("thinking hard").WithChunkSize(3).WithStall(2))
	useSubagentScript(t, h, s, 3)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("delegate"))
	var child string
	h.WaitFor(2*time.Second, "the child runs", func() bool {
		st := h.LoopState()
		if len(st.Calls) == 0 || st.Calls[0].ChildSessionID == "" {
			return false
		}
		child = st.Calls[0].ChildSessionID
		return true
	})
	cancel := h.UpdateAt(3*time.Second, "", wire.UpdateCancel, wire.CancelRequest{Cause: "user"})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "sc", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	fu.OK(t)
	disp.OK(t)
	var cr wire.CancelResult
	cancel.Decode(t, &cr)
	require.True(t, cr.Cancelled)
	require.JSONEq(t, `{"kind":"user"}`, string(cr.Reason.Reason))

	require.NotEmpty(t, child)
	cevs := sessiontest.Stored(t, h.Store, child)
	sessiontest.RequireBalanced(t, cevs)
	ends := sessiontest.TurnEnds(t, cevs)
	require.Len(t, ends, 1)
	require.Equal(t, "aborted", ends[0].Kind)
	require.JSONEq(t, `{"kind":"parent"}`, string(ends[0].Reason))
	evs := sessiontest.Stored(t, h.Store, "sc")
	sessiontest.RequireBalanced(t, evs)
	pends := sessiontest.TurnEnds(t, evs)
	require.Len(t, pends, 1)
	require.JSONEq(t, `{"kind":"user"}`, string(pends[0].Reason))
}
