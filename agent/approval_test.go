package agent_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/wire"
)

// A call that must be approved: its first RunTool stores tool/call and
// approval/asked and runs nothing; a retry of it asks the same question
// and stores nothing; the RunTool with the decision stores
// approval/decided, then runs the tool once; a retry of that returns the
// stored outcome.
func TestRunToolAsksThenRunsOnce(t *testing.T) {
	var runs atomic.Int64
	shell := echoTool("shell", false, false, &runs)
	shell.Approval = true
	f := newFixture(t, newTools(t, shell), toolCalls([3]string{"c1", "shell", `{"text":"rm"}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq
	in := f.toolInput(m, 0, "c1", "shell")
	in.Approval = &agent.ToolApproval{Policy: wire.ApprovalAsk}

	out, err := f.runTool(f.acts, in)
	require.NoError(t, err)
	require.NotNil(t, out.Asked)
	require.Equal(t, "shell requires approval in this session", out.Asked.Reason)
	require.JSONEq(t, `{"text":"rm"}`, out.Asked.Arguments)
	require.Zero(t, runs.Load())
	log := f.log()
	require.Equal(t, []string{"tool/call", "approval/asked"}, types(log[m+1:]))
	var asked map[string]any
	require.NoError(t, json.Unmarshal(log[m+2].Data, &asked))
	require.Equal(t, map[string]any{"id": out.Asked.ID, "toolName": "shell", "callId": "c1", "reason": "shell requires approval in this session"}, asked)

	again, err := f.runTool(f.actsOn(f.newStore()), in)
	require.NoError(t, err)
	require.Equal(t, out, again, "a retry asks the same question")
	require.Len(t, f.log(), len(log))

	in.Approval.Decision = &agent.ToolDecision{ID: out.Asked.ID, Outcome: wire.OutcomeAllowedOnce}
	done, err := f.runTool(f.acts, in)
	require.NoError(t, err)
	require.Nil(t, done.Asked)
	require.False(t, done.IsError)
	require.Equal(t, int64(1), runs.Load())
	log = f.log()
	require.Equal(t, []string{"tool/call", "approval/asked", "approval/decided", "tool/result"}, types(log[m+1:]))
	retried, err := f.runTool(f.acts, in)
	require.NoError(t, err)
	require.False(t, retried.IsError)
	require.Equal(t, int64(1), runs.Load(), "never run twice")
}

// A retry that finds the decision stored by an earlier attempt (which may
// have run the tool) does not run a non-idempotent tool again: the call
// gets the TOOL_OUTCOME_UNKNOWN result. A wrong decision id is refused.
func TestRunToolDecisionStoredByACrashedAttempt(t *testing.T) {
	var runs atomic.Int64
	shell := echoTool("shell", false, false, &runs)
	shell.Approval = true
	f := newFixture(t, newTools(t, shell), toolCalls([3]string{"c1", "shell", `{"text":"rm"}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq
	in := f.toolInput(m, 0, "c1", "shell")
	in.Approval = &agent.ToolApproval{Policy: wire.ApprovalAsk}
	out, err := f.runTool(f.acts, in)
	require.NoError(t, err)
	require.NotNil(t, out.Asked)

	in.Approval.Decision = &agent.ToolDecision{ID: "not-the-question", Outcome: wire.OutcomeAllowedOnce}
	_, err = f.runTool(f.acts, in)
	require.ErrorContains(t, err, `the decision is for approval "not-the-question"`)

	f.append(ev(t, wire.TypeApprovalDecided, m+3, `{"id":"`+out.Asked.ID+`","outcome":"allowed-once"}`))
	in.Approval.Decision = &agent.ToolDecision{ID: out.Asked.ID, Outcome: wire.OutcomeAllowedOnce}
	done, err := f.runTool(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, "TOOL_OUTCOME_UNKNOWN", done.Code)
	require.Zero(t, runs.Load())
	require.Equal(t, []string{"tool/call", "approval/asked", "approval/decided", "tool/result"}, types(f.log()[m+1:]))
}
