package agent_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/wire"
)

// The next step opened with a step's last tool result (ToolInput.OpenNext).

// TestRunToolOpensTheNextStepWithTheLastResult: the activity that stores
// the last result of the message's calls also ends the step and opens the
// next one in the same batch, after the results in model order, and says
// so; an earlier call's activity, whose result waits for it, opens
// nothing; a retry reports the opened step from the log, with or without
// OpenNext, and runs nothing again.
func TestRunToolOpensTheNextStepWithTheLastResult(t *testing.T) {
	// first is the call that finishes first: c1 stages its result, which
	// c0's activity commits with its own; c0's result is committed alone
	// and c1, the last call, commits its result without staging.
	for _, first := range []string{"c1", "c0"} {
		t.Run(first+" first", func(t *testing.T) {
			second := map[string]string{"c0": "c1", "c1": "c0"}[first]
			gates := map[string]chan struct{}{"c0": make(chan struct{}), "c1": make(chan struct{})}
			f := newFixture(t, newTools(t, gateTool(gates)), toolCalls([3]string{"c0", "gate", `{}`}, [3]string{"c1", "gate", `{}`}))
			res, err := f.callModel(f.acts, f.modelInput(1, 1))
			require.NoError(t, err)
			m := res.MessageSeq
			in := func(i int, id string) agent.ToolInput {
				ti := f.toolInput(m, i, id, "gate")
				ti.OpenNext = true
				return ti
			}
			type result struct {
				out agent.ToolOutcome
				err error
			}
			done := map[string]chan result{}
			for i, id := range []string{"c0", "c1"} {
				done[id] = make(chan result, 1)
				go func() {
					out, err := f.acts.RunTool(bg, in(i, id))
					done[id] <- result{out, err}
				}()
			}
			require.Eventually(t, func() bool { return len(f.log()) == int(m)+3 }, time.Minute, 5*time.Millisecond, "both tool/calls stored")
			close(gates[first])
			r := <-done[first]
			require.NoError(t, r.err)
			require.Equal(t, int64(0), r.out.Opened, "%s: the other call has no result: the step goes on", first)
			require.NotContains(t, types(f.log()[m+1:]), "step/end")
			close(gates[second])
			r = <-done[second]
			require.NoError(t, r.err)
			require.Equal(t, int64(2), r.out.Opened)
			require.Equal(t, m+7, r.out.NextSeq)
			log := f.log()
			require.Equal(t, []string{"tool/call", "tool/call", "tool/result", "tool/result", "step/end", "step/start"}, types(log[m+1:]))
			requireResultsInModelOrder(t, log, []string{"c0", "c1"})
			se, err := log[m+5].StepEnd()
			require.NoError(t, err)
			require.Equal(t, wire.StepEnd{Turn: 1, Step: 1}, se)
			ss, err := log[m+6].StepStart()
			require.NoError(t, err)
			require.Equal(t, wire.StepStart{Turn: 1, Step: 2}, ss)

			for _, retry := range []agent.ToolInput{in(1, "c1"), f.toolInput(m, 0, "c0", "gate")} {
				out, err := f.runTool(f.acts, retry)
				require.NoError(t, err)
				require.Equal(t, int64(2), out.Opened, "%s: the log holds step 2 opened", retry.CallID)
				require.Equal(t, m+7, out.NextSeq)
			}
			require.Len(t, f.log(), int(m)+7, "a retry stores nothing")
		})
	}
}

// TestRunToolLastCallOpensTheNextStep: a single call, committed without
// staging, opens the next step with its result; without OpenNext it opens
// nothing.
func TestRunToolLastCallOpensTheNextStep(t *testing.T) {
	for _, open := range []bool{true, false} {
		f := newFixture(t, newTools(t, echoTool("echo", true, true, new(atomic.Int64))), toolCalls([3]string{"c1", "echo", `{"text":"a"}`}))
		res, err := f.callModel(f.acts, f.modelInput(1, 1))
		require.NoError(t, err)
		m := res.MessageSeq
		in := f.toolInput(m, 0, "c1", "echo")
		in.OpenNext = open
		out, err := f.runTool(f.acts, in)
		require.NoError(t, err)
		if !open {
			require.Equal(t, agent.ToolOutcome{CallSeq: m + 1, NextSeq: m + 3}, out)
			require.Equal(t, []string{"tool/call", "tool/result"}, types(f.log()[m+1:]))
			continue
		}
		require.Equal(t, agent.ToolOutcome{CallSeq: m + 1, NextSeq: m + 5, Opened: 2}, out)
		require.Equal(t, []string{"tool/call", "tool/result", "step/end", "step/start"}, types(f.log()[m+1:]))
	}
}

// TestEndTurnClosesTheStepAToolOpened: a turn that ends after its tool
// activity opened the next step, told of the step before it (the activity
// failed after its store), closes the opened step, not the closed one.
func TestEndTurnClosesTheStepAToolOpened(t *testing.T) {
	f := newFixture(t, newTools(t, echoTool("echo", true, true, new(atomic.Int64))), toolCalls([3]string{"c1", "echo", `{"text":"a"}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq
	in := f.toolInput(m, 0, "c1", "echo")
	in.OpenNext = true
	_, err = f.runTool(f.acts, in)
	require.NoError(t, err)
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: -1, Reason: wire.TurnEndReason{Kind: "error"}})
	require.NoError(t, err)
	log := f.log()
	require.Equal(t, []string{"tool/call", "tool/result", "step/end", "step/start", "step/end", "turn/end"}, types(log[m+1:]))
	se, err := log[m+5].StepEnd()
	require.NoError(t, err)
	require.Equal(t, wire.StepEnd{Turn: 1, Step: 2}, se)
}
