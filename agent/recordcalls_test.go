package agent_test

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The model call records its message's tool calls (ModelInput.RecordCalls,
// the model-records-calls change): the tool/call of each call is stored in
// the message's batch, in model order, and each call's first RunTool
// (ToolInput.Recorded) runs its tool without storing one. A later attempt
// of that RunTool may follow a run of the tool and keeps the crash rules.

// syncCountingFS is the OS filesystem counting the fsyncs of the files it
// opened.
type syncCountingFS struct {
	jsonl.OSFS
	n *atomic.Int64
}

func (f syncCountingFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncCountingFile{File: file, n: f.n}, nil
}

type syncCountingFile struct {
	jsonl.File
	n *atomic.Int64
}

func (f syncCountingFile) Sync() error {
	f.n.Add(1)
	return f.File.Sync()
}

// countingActs are f's activities over a store on f's root whose fsyncs n
// counts.
func (f *fixture) countingActs(n *atomic.Int64) *agent.Activities {
	st, err := jsonl.NewStore(jsonl.Options{Root: f.root, Compression: jsonl.CompressionNone, FS: syncCountingFS{n: n}})
	require.NoError(f.t, err)
	return f.actsOn(st)
}

// recordingInput is the model input of turn 1 step 1 asking the call to
// record its calls.
func (f *fixture) recordingInput() agent.ModelInput {
	in := f.modelInput(1, 1)
	in.RecordCalls = true
	return in
}

// recordedInput is the input of the first RunTool of a call the model call
// recorded.
func (f *fixture) recordedInput(msgSeq int64, index int, id, name string) agent.ToolInput {
	in := f.toolInput(msgSeq, index, id, name)
	in.Recorded = true
	return in
}

// attempt makes a's activities run as attempt n.
func attempt(a *agent.Activities, n int32) *agent.Activities {
	agent.SetAttempt(a, func() int32 { return n })
	return a
}

// toolRound runs a round of one call on f (the model call, then the call's
// RunTool) with its activities over a store counting fsyncs, recording the
// calls with the model call when record is set, and returns the fsyncs of
// the model call and of the RunTool.
func toolRound(t *testing.T, record bool) (model, run int64, log []session.Event, msgSeq int64) {
	var runs atomic.Int64
	f := newFixture(t, newTools(t, echoTool("read", true, true, &runs)), toolCalls([3]string{"c1", "read", `{"text":"x"}`}))
	var n atomic.Int64
	acts := attempt(f.countingActs(&n), 1)
	in := f.modelInput(1, 1)
	in.RecordCalls = record
	res, err := f.callModel(acts, in)
	require.NoError(t, err)
	if record {
		require.Equal(t, 1, res.RecordedCalls)
	} else {
		require.Zero(t, res.RecordedCalls)
	}
	model = n.Swap(0)
	ti := f.toolInput(res.MessageSeq, 0, "c1", "read")
	ti.Recorded = record
	out, err := f.runTool(acts, ti)
	require.NoError(t, err)
	require.False(t, out.IsError)
	require.Equal(t, int64(1), runs.Load())
	return model, n.Load(), f.log(), res.MessageSeq
}

// A tool round whose model call records the call: the model call's one
// store holds the message and the tool/call, and the round makes one fsync
// fewer than a round whose RunTool stores the tool/call; the log holds
// the same events, the tool/call with the same data.
func TestModelCallRecordsCallsOneFsyncFewer(t *testing.T) {
	oldModel, oldRun, oldLog, m := toolRound(t, false)
	newModel, newRun, newLog, m2 := toolRound(t, true)
	require.Equal(t, m, m2)
	require.Equal(t, oldModel, newModel, "the tool/call rides in the model call's store and fsync")
	require.Equal(t, oldRun-1, newRun, "the RunTool stores no tool/call: one fsync fewer")
	require.Equal(t, []string{"assistant/message", "tool/call", "tool/result"}, types(newLog[m:]))
	require.Equal(t, types(oldLog), types(newLog))
	require.JSONEq(t, string(oldLog[m+1].Data), string(newLog[m+1].Data), "the tool/call holds the data RunTool stores")
	require.JSONEq(t, `{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{\"text\":\"x\"}"}`, string(newLog[m+1].Data))
	require.Equal(t, []int64{m + 1}, newLog[m+2].SourceEventSeqs)
}

// Parallel calls recorded by the model call: every tool/call precedes
// every result, in model order, and each result cites its call's.
func TestRecordedParallelCallsPrecedeResults(t *testing.T) {
	var runs atomic.Int64
	f := newFixture(t, newTools(t, echoTool("read", true, true, &runs)),
		toolCalls([3]string{"c1", "read", `{"text":"a"}`}, [3]string{"c2", "read", `{"text":"b"}`}, [3]string{"c3", "read", `{"text":"c"}`}))
	acts := attempt(f.acts, 1)
	res, err := f.callModel(acts, f.recordingInput())
	require.NoError(t, err)
	require.Equal(t, 3, res.RecordedCalls)
	m := res.MessageSeq
	require.Equal(t, []string{"assistant/message", "tool/call", "tool/call", "tool/call"}, types(f.log()[m:]), "stored by the model call, before any tool runs")
	var wg sync.WaitGroup
	outs := make([]agent.ToolOutcome, 3)
	for i, id := range []string{"c1", "c2", "c3"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := f.runTool(acts, f.recordedInput(m, i, id, "read"))
			require.NoError(t, err)
			outs[i] = out
		}()
	}
	wg.Wait()
	require.Equal(t, int64(3), runs.Load())
	log := f.log()
	require.Equal(t, []string{"assistant/message", "tool/call", "tool/call", "tool/call", "tool/result", "tool/result", "tool/result"}, types(log[m:]))
	for i, id := range []string{"c1", "c2", "c3"} {
		c, err := log[m+1+int64(i)].ToolCall()
		require.NoError(t, err)
		require.Equal(t, id, c.CallID)
		r, err := log[m+4+int64(i)].ToolResult()
		require.NoError(t, err)
		require.Equal(t, id, r.Message.Source.CallID)
		require.Equal(t, []int64{m + 1 + int64(i)}, log[m+4+int64(i)].SourceEventSeqs)
		require.Equal(t, m+1+int64(i), outs[i].CallSeq)
	}
}

// The crash rules of a call the model call recorded: its RunTool's first
// attempt runs the tool once; a later attempt, which may follow a run of
// the tool, runs an idempotent tool again and gives any other the
// TOOL_OUTCOME_UNKNOWN result without running it; an attempt that finds
// the result returns it. No attempt stores a second tool/call.
func TestRecordedCallCrashRules(t *testing.T) {
	t.Run("attempt 1 runs once", func(t *testing.T) {
		var runs atomic.Int64
		f := newFixture(t, newTools(t, echoTool("shell", false, false, &runs)), toolCalls([3]string{"c1", "shell", `{"text":"rm"}`}))
		res, err := f.callModel(f.acts, f.recordingInput())
		require.NoError(t, err)
		m := res.MessageSeq
		out, err := f.runTool(attempt(f.acts, 1), f.recordedInput(m, 0, "c1", "shell"))
		require.NoError(t, err)
		require.Equal(t, agent.ToolOutcome{CallSeq: m + 1, NextSeq: m + 3}, out)
		again, err := f.runTool(attempt(f.acts, 2), f.recordedInput(m, 0, "c1", "shell"))
		require.NoError(t, err)
		require.Equal(t, out, again, "a retry after the result returns it")
		require.Equal(t, int64(1), runs.Load())
		require.Equal(t, []string{"assistant/message", "tool/call", "tool/result"}, types(f.log()[m:]))
	})
	t.Run("attempt 2 of a non-idempotent tool", func(t *testing.T) {
		var runs atomic.Int64
		f := newFixture(t, newTools(t, echoTool("shell", false, false, &runs)), toolCalls([3]string{"c1", "shell", `{"text":"rm"}`}))
		res, err := f.callModel(f.acts, f.recordingInput())
		require.NoError(t, err)
		m := res.MessageSeq
		closers, err := session.InterruptedTurnClosers(f.log())
		require.NoError(t, err)
		// Attempt 1 ran the tool and died before it stored the result.
		out, err := f.runTool(attempt(f.acts, 2), f.recordedInput(m, 0, "c1", "shell"))
		require.NoError(t, err)
		require.Equal(t, agent.ToolOutcome{CallSeq: m + 1, NextSeq: m + 3, IsError: true, Code: "TOOL_OUTCOME_UNKNOWN", Unknown: true}, out)
		require.Zero(t, runs.Load(), "a non-idempotent tool is never run again blindly")
		log := f.log()
		require.Equal(t, []string{"assistant/message", "tool/call", "tool/result"}, types(log[m:]))
		requireSameResult(t, closers[0], log[m+2])
	})
	t.Run("attempt 2 of an idempotent tool", func(t *testing.T) {
		var runs atomic.Int64
		f := newFixture(t, newTools(t, echoTool("read", true, true, &runs)), toolCalls([3]string{"c1", "read", `{"text":"x"}`}))
		res, err := f.callModel(f.acts, f.recordingInput())
		require.NoError(t, err)
		m := res.MessageSeq
		out, err := f.runTool(attempt(f.acts, 2), f.recordedInput(m, 0, "c1", "read"))
		require.NoError(t, err)
		require.Equal(t, agent.ToolOutcome{CallSeq: m + 1, NextSeq: m + 3, Reran: true}, out)
		require.Equal(t, int64(1), runs.Load())
		require.Equal(t, []string{"assistant/message", "tool/call", "tool/result"}, types(f.log()[m:]))
	})
	t.Run("a RunTool not told the call is its first", func(t *testing.T) {
		// Without Recorded (the run with a decision, a parked turn's call
		// dispatched before) even attempt 1 proves nothing.
		var runs atomic.Int64
		f := newFixture(t, newTools(t, echoTool("shell", false, false, &runs)), toolCalls([3]string{"c1", "shell", `{"text":"rm"}`}))
		res, err := f.callModel(f.acts, f.recordingInput())
		require.NoError(t, err)
		out, err := f.runTool(attempt(f.acts, 1), f.toolInput(res.MessageSeq, 0, "c1", "shell"))
		require.NoError(t, err)
		require.True(t, out.Unknown)
		require.Zero(t, runs.Load())
	})
	t.Run("outside an activity", func(t *testing.T) {
		// A direct call has no attempt number: it proves nothing either.
		var runs atomic.Int64
		f := newFixture(t, newTools(t, echoTool("shell", false, false, &runs)), toolCalls([3]string{"c1", "shell", `{"text":"rm"}`}))
		res, err := f.callModel(f.acts, f.recordingInput())
		require.NoError(t, err)
		out, err := f.acts.RunTool(bg, f.recordedInput(res.MessageSeq, 0, "c1", "shell"))
		require.NoError(t, err)
		require.True(t, out.Unknown)
		require.Zero(t, runs.Load())
	})
}

// A recorded call that must be approved: its first RunTool stores
// approval/asked after the recorded tool/call (the harness's order) and
// runs nothing; a retry asks the same question; the run with the decision
// runs the tool once (allowed) or stores the refusal (rejected). A later
// attempt whose first stored nothing asks too: the gate decides alike on
// every attempt, so no attempt ran a call that must be asked.
func TestRecordedCallApprovals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		first   int32
		outcome string
	}{
		{"allowed", 1, wire.OutcomeAllowedOnce},
		{"rejected", 1, wire.OutcomeRejected},
		{"asked by attempt 2", 2, wire.OutcomeAllowedOnce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int64
			shell := echoTool("shell", false, false, &runs)
			shell.Approval = true
			f := newFixture(t, newTools(t, shell), toolCalls([3]string{"c1", "shell", `{"text":"rm"}`}))
			res, err := f.callModel(f.acts, f.recordingInput())
			require.NoError(t, err)
			m := res.MessageSeq
			in := f.recordedInput(m, 0, "c1", "shell")
			in.Approval = &agent.ToolApproval{Policy: wire.ApprovalAsk}
			out, err := f.runTool(attempt(f.acts, tc.first), in)
			require.NoError(t, err)
			require.NotNil(t, out.Asked)
			require.Equal(t, m+1, out.CallSeq)
			require.Zero(t, runs.Load())
			require.Equal(t, []string{"assistant/message", "tool/call", "approval/asked"}, types(f.log()[m:]))
			again, err := f.runTool(attempt(f.acts, tc.first+1), in)
			require.NoError(t, err)
			require.Equal(t, out, again, "a retry asks the same question")
			require.Len(t, f.log(), int(m)+3)

			// The run with the decision: a new activity, not told it is
			// the call's first.
			in.Recorded = false
			in.Approval.Decision = &agent.ToolDecision{ID: out.Asked.ID, Outcome: tc.outcome}
			done, err := f.runTool(attempt(f.acts, 1), in)
			require.NoError(t, err)
			log := f.log()
			require.Equal(t, []string{"assistant/message", "tool/call", "approval/asked", "approval/decided", "tool/result"}, types(log[m:]))
			if tc.outcome == wire.OutcomeAllowedOnce {
				require.False(t, done.IsError)
				require.Equal(t, int64(1), runs.Load())
			} else {
				require.Equal(t, "APPROVAL_REJECTED", done.Code)
				require.Zero(t, runs.Load())
			}
			retried, err := f.runTool(attempt(f.acts, 2), in)
			require.NoError(t, err)
			require.Equal(t, done.IsError, retried.IsError)
			require.Len(t, f.log(), len(log))
			require.LessOrEqual(t, runs.Load(), int64(1), "never run twice")
		})
	}
}

// A turn cancelled after its model call recorded the calls (a parallel
// pool): the call never dispatched gets the ABORTED_BEFORE_DISPATCH result citing its
// recorded tool/call, the one dispatched without a result the
// TOOL_OUTCOME_UNKNOWN one, and neither a second tool/call.
func TestRecordedCallsClosedOnCancel(t *testing.T) {
	var runs atomic.Int64
	f := newFixture(t, newTools(t, echoTool("shell", true, false, &runs)),
		toolCalls([3]string{"c1", "shell", `{"text":"a"}`}, [3]string{"c2", "shell", `{"text":"b"}`}, [3]string{"c3", "shell", `{"text":"c"}`}))
	res, err := f.callModel(f.acts, f.recordingInput())
	require.NoError(t, err)
	m := res.MessageSeq
	_, err = f.runTool(attempt(f.acts, 1), f.recordedInput(m, 0, "c1", "shell"))
	require.NoError(t, err)
	// c2 was dispatched and lost; c3 never dispatched.
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: m, Skipped: []string{"c3"}, Reason: wire.TurnEndReason{Kind: wire.TurnEndAborted}})
	require.NoError(t, err)
	log := f.log()
	require.Equal(t, []string{"assistant/message", "tool/call", "tool/call", "tool/call", "tool/result", "tool/result", "tool/result", "step/end", "turn/end"}, types(log[m:]))
	for i, want := range []string{"", "TOOL_OUTCOME_UNKNOWN", "ABORTED_BEFORE_DISPATCH"} {
		e := log[m+4+int64(i)]
		r, err := e.ToolResult()
		require.NoError(t, err)
		require.Equal(t, []int64{m + 1 + int64(i)}, e.SourceEventSeqs)
		code := ""
		if r.Error != nil {
			code = r.Error.Code
		}
		require.Equal(t, want, code, "call %d", i+1)
	}
	r, err := log[m+6].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "Error: tool call aborted before dispatch", r.Message.Content[0].Content[0].Text)
	require.Equal(t, int64(1), runs.Load())
}

// A cancel before any RunTool: every recorded call is closed
// ABORTED_BEFORE_DISPATCH, in model order.
func TestRecordedCallsCancelledBeforeDispatch(t *testing.T) {
	var runs atomic.Int64
	f := newFixture(t, newTools(t, echoTool("shell", true, false, &runs)),
		toolCalls([3]string{"c1", "shell", `{"text":"a"}`}, [3]string{"c2", "shell", `{"text":"b"}`}))
	res, err := f.callModel(f.acts, f.recordingInput())
	require.NoError(t, err)
	m := res.MessageSeq
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: m, Skipped: []string{"c1", "c2"}, Reason: wire.TurnEndReason{Kind: wire.TurnEndAborted}})
	require.NoError(t, err)
	log := f.log()
	require.Equal(t, []string{"assistant/message", "tool/call", "tool/call", "tool/result", "tool/result", "step/end", "turn/end"}, types(log[m:]))
	for i := range 2 {
		r, err := log[m+3+int64(i)].ToolResult()
		require.NoError(t, err)
		require.Equal(t, "ABORTED_BEFORE_DISPATCH", r.Error.Code)
		require.Equal(t, []int64{m + 1 + int64(i)}, log[m+3+int64(i)].SourceEventSeqs)
	}
	require.Zero(t, runs.Load())
}

// What the model call does not record: a message finished at its
// max-tokens limit keeps its calls unrecorded (they are closed with the
// tool/call and max-tokens result pair); a retried model call reports the
// calls an earlier attempt recorded.
func TestModelCallRecordsWhatIsRun(t *testing.T) {
	t.Run("max-tokens", func(t *testing.T) {
		cut := response{chunks: []provider.Chunk{callChunk(0, "c1", "shell", `{"te`), finish(provider.FinishMaxTokens)}}
		var runs atomic.Int64
		f := newFixture(t, newTools(t, echoTool("shell", false, false, &runs)), cut)
		res, err := f.callModel(f.acts, f.recordingInput())
		require.NoError(t, err)
		require.Zero(t, res.RecordedCalls)
		require.Equal(t, []string{"assistant/message"}, types(f.log()[res.MessageSeq:]))
	})
	t.Run("retried", func(t *testing.T) {
		var runs atomic.Int64
		f := newFixture(t, newTools(t, echoTool("shell", false, false, &runs)), toolCalls([3]string{"c1", "shell", `{"text":"a"}`}))
		res, err := f.callModel(f.acts, f.recordingInput())
		require.NoError(t, err)
		again, err := f.callModel(f.actsOn(f.newStore()), f.recordingInput())
		require.NoError(t, err)
		require.True(t, again.Reused)
		require.Equal(t, 1, again.RecordedCalls)
		require.Equal(t, res.MessageSeq, again.MessageSeq)
		require.Equal(t, []string{"assistant/message", "tool/call"}, types(f.log()[res.MessageSeq:]))
		require.Equal(t, 1, f.prov.calls())
	})
}

// The model call records the calls the workflow starts at once, as the
// harness appends a call's tool/call when it starts it: an exclusive first
// call alone; the leading parallel-safe calls up to the pool's size. A
// later call's RunTool stores its own tool/call before it runs, after the
// results of the calls before it.
func TestModelCallRecordsTheFirstGroup(t *testing.T) {
	t.Run("exclusive first", func(t *testing.T) {
		var shell, read atomic.Int64
		f := newFixture(t, newTools(t, echoTool("shell", false, false, &shell), echoTool("read", true, true, &read)),
			toolCalls([3]string{"c1", "shell", `{"text":"a"}`}, [3]string{"c2", "read", `{"text":"b"}`}))
		res, err := f.callModel(f.acts, f.recordingInput())
		require.NoError(t, err)
		require.Equal(t, 1, res.RecordedCalls)
		m := res.MessageSeq
		require.Equal(t, []string{"assistant/message", "tool/call"}, types(f.log()[m:]))
		_, err = f.runTool(attempt(f.acts, 1), f.recordedInput(m, 0, "c1", "shell"))
		require.NoError(t, err)
		out, err := f.runTool(attempt(f.acts, 1), f.toolInput(m, 1, "c2", "read"))
		require.NoError(t, err)
		require.Equal(t, m+3, out.CallSeq)
		require.Equal(t, []string{"assistant/message", "tool/call", "tool/result", "tool/call", "tool/result"}, types(f.log()[m:]))
		require.Equal(t, int64(1), shell.Load())
		require.Equal(t, int64(1), read.Load())
	})
	t.Run("a pool of two", func(t *testing.T) {
		var read atomic.Int64
		f := newFixture(t, newTools(t, echoTool("read", true, true, &read)),
			toolCalls([3]string{"c1", "read", `{"text":"a"}`}, [3]string{"c2", "read", `{"text":"b"}`}, [3]string{"c3", "read", `{"text":"c"}`}))
		in := f.recordingInput()
		in.ParallelLimit = 2
		res, err := f.callModel(f.acts, in)
		require.NoError(t, err)
		require.Equal(t, 2, res.RecordedCalls)
		require.Equal(t, []string{"assistant/message", "tool/call", "tool/call"}, types(f.log()[res.MessageSeq:]))
		again, err := f.callModel(f.actsOn(f.newStore()), in)
		require.NoError(t, err)
		require.Equal(t, 2, again.RecordedCalls, "a retry reports the calls recorded")
	})
}
