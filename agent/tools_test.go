package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

func (f *fixture) toolInput(msgSeq int64, index int, id, name string) agent.ToolInput {
	return agent.ToolInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: msgSeq, CallID: id, Name: name, Index: index}
}

// stagedFiles lists the staged payloads left in the session directory.
func (f *fixture) stagedFiles() []string {
	f.t.Helper()
	var out []string
	_ = filepath.WalkDir(f.root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(path)) == "staged" {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// TestRunToolStoresCallThenResult: the tool/call is stored before the tool
// runs, the tool runs in the session's cwd with the model's arguments, and
// its result is stored citing the call; a retry returns the stored outcome
// without running the tool again.
func TestRunToolStoresCallThenResult(t *testing.T) {
	var runs atomic.Int64
	var f *fixture
	echo := echoTool("echo", true, true, &runs)
	run := echo.Run
	echo.Run = func(ctx context.Context, call tool.Call) (tool.Result, error) {
		log := f.log()
		require.Equal(t, wire.TypeToolCall, log[len(log)-1].Type, "the tool/call is stored before the tool runs")
		require.Equal(t, f.cwd, call.Cwd)
		require.Equal(t, "c1", call.CallID)
		require.JSONEq(t, `{"text":"a"}`, string(call.Arguments))
		return run(ctx, call)
	}
	f = newFixture(t, newTools(t, echo), toolCalls([3]string{"c1", "echo", `{"text":"a"}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks

	out, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 0, "c1", "echo"))
	require.NoError(t, err)
	require.Equal(t, agent.ToolOutcome{CallSeq: m + 1, NextSeq: m + 3}, out)
	log := f.log()
	require.Equal(t, []string{"tool/call", "tool/result"}, types(log[m+1:]))
	call, err := log[m+1].ToolCall()
	require.NoError(t, err)
	require.Equal(t, wire.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "echo", Arguments: `{"text":"a"}`}, call)
	require.Equal(t, []int64{m + 1}, log[m+2].SourceEventSeqs)
	require.Equal(t, session.AppendOp(), log[m+2].SurfaceOp)
	require.JSONEq(t, fmt.Sprintf(`{"turn":1,"step":1,"message":{"id":"tool-result-1-1-c1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","isError":false,"content":[{"type":"text","text":"echo:a@%s"}]}]}}`, filepath.Base(f.cwd)), string(log[m+2].Data))
	require.Empty(t, f.stagedFiles(), "a committed result is unstaged")

	for _, acts := range []*agent.Activities{f.acts, f.actsOn(f.newStore())} {
		again, err := f.runTool(acts, f.toolInput(res.MessageSeq, 0, "c1", "echo"))
		require.NoError(t, err)
		require.Equal(t, out, again)
	}
	require.Equal(t, int64(1), runs.Load())
	require.Len(t, f.log(), int(m)+3)
}

// TestRunToolRetryAfterCallStored: a retry that finds the tool/call but no
// result runs an idempotent tool again and gives any other tool the
// TOOL_OUTCOME_UNKNOWN result, exactly as resume's closers write it.
func TestRunToolRetryAfterCallStored(t *testing.T) {
	var idem, shell atomic.Int64
	tools := newTools(t, echoTool("read", true, true, &idem), echoTool("shell", false, false, &shell))
	f := newFixture(t, tools, toolCalls([3]string{"c1", "read", `{"text":"x"}`}, [3]string{"c2", "shell", `{"text":"rm"}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	// The first attempts crashed after storing their tool/calls.
	f.append(
		ev(t, wire.TypeToolCall, m+1, `{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{\"text\":\"x\"}"}`),
		ev(t, wire.TypeToolCall, m+2, `{"turn":1,"step":1,"callId":"c2","name":"shell","arguments":"{\"text\":\"rm\"}"}`),
	)

	out, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 0, "c1", "read"))
	require.NoError(t, err)
	require.Equal(t, agent.ToolOutcome{CallSeq: m + 1, NextSeq: m + 4, Reran: true}, out)
	require.Equal(t, int64(1), idem.Load())

	closers, err := session.InterruptedTurnClosers(f.log())
	require.NoError(t, err)
	out, err = f.runTool(f.acts, f.toolInput(res.MessageSeq, 1, "c2", "shell"))
	require.NoError(t, err)
	require.Equal(t, agent.ToolOutcome{CallSeq: m + 2, NextSeq: m + 5, IsError: true, Code: "TOOL_OUTCOME_UNKNOWN", Unknown: true}, out)
	require.Equal(t, int64(0), shell.Load(), "a non-idempotent tool is never re-run blindly")
	log := f.log()
	requireSameResult(t, closers[0], log[m+4])
	r, err := log[m+4].ToolResult()
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("interrupted-tool-result-c2-%d", m+4), r.Message.ID)
	require.Equal(t, "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.", r.Message.Content[0].Content[0].Text)
}

// TestRunToolStagedResultCommittedByRetry: a later call's result, staged
// while the call before it ran, waits for that call; when its commit fails,
// the retry of that call commits both, in model order, and never runs the
// later call's tool again.
func TestRunToolStagedResultCommittedByRetry(t *testing.T) {
	for _, idempotent := range []bool{false, true} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) {
			var runs atomic.Int64
			ffs := faultfs.New(nil)
			shell := echoTool("shell", false, idempotent, &runs)
			run := shell.Run
			shell.Run = func(ctx context.Context, call tool.Call) (tool.Result, error) {
				if call.CallID == "c1" {
					// The next write of the log (c1's commit) fails.
					ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpWrite, PathContains: "session.v3.jsonl", Err: syscall.EIO, Times: 1})
				}
				return run(ctx, call)
			}
			f := newFixture(t, newTools(t, shell), toolCalls([3]string{"c1", "shell", `{"text":"first"}`}, [3]string{"c2", "shell", `{"text":"once"}`}))
			res, err := f.callModel(f.acts, f.modelInput(1, 1))
			require.NoError(t, err)
			m := res.MessageSeq // the step's assistant/message, after its chunks
			faulty, err := jsonl.NewStore(jsonl.Options{Root: f.root, Compression: jsonl.CompressionNone, FS: ffs})
			require.NoError(t, err)

			// c2 finishes first: c1 has no result, so c2's is staged.
			out2, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 1, "c2", "shell"))
			require.NoError(t, err)
			require.Equal(t, []string{"tool/call"}, types(f.log()[m+1:]))
			require.Len(t, f.stagedFiles(), 1)

			_, err = f.runTool(f.actsOn(faulty), f.toolInput(res.MessageSeq, 0, "c1", "shell"))
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			require.False(t, app.NonRetryable(), "a failed commit is retried")
			require.Equal(t, []string{"tool/call", "tool/call"}, types(f.log()[m+1:]))
			require.Len(t, f.stagedFiles(), 1, "c2's staged result is still there")

			out1, err := f.runTool(f.actsOn(f.newStore()), f.toolInput(res.MessageSeq, 0, "c1", "shell"))
			require.NoError(t, err)
			require.Equal(t, m+5, out1.NextSeq, "the retry committed c2's staged result after c1's")
			log := f.log()
			require.Equal(t, []string{"tool/call", "tool/call", "tool/result", "tool/result"}, types(log[m+1:]))
			r1, err := log[m+3].ToolResult()
			require.NoError(t, err)
			r2, err := log[m+4].ToolResult()
			require.NoError(t, err)
			require.Equal(t, []string{"c1", "c2"}, []string{r1.Message.Source.CallID, r2.Message.Source.CallID})
			require.Equal(t, "shell:once@"+filepath.Base(f.cwd), r2.Message.Content[0].Content[0].Text, "c2's staged result, not a re-run's")
			if idempotent {
				require.Equal(t, int64(3), runs.Load(), "c1 ran again, c2 once")
				require.False(t, out1.Unknown)
			} else {
				require.Equal(t, int64(2), runs.Load(), "neither ran twice")
				require.True(t, out1.Unknown)
			}
			require.Less(t, out2.NextSeq, out1.NextSeq)
			require.Empty(t, f.stagedFiles())
		})
	}
}

// TestRunToolCommitsWaitingResultsAfterItsOwn: a call committed without
// staging whose commit of the later calls' staged results fails leaves
// them to its retry, which finds its own result in the log and commits
// them.
func TestRunToolCommitsWaitingResultsAfterItsOwn(t *testing.T) {
	var runs atomic.Int64
	ffs := faultfs.New(nil)
	shell := echoTool("shell", false, false, &runs)
	run := shell.Run
	shell.Run = func(ctx context.Context, call tool.Call) (tool.Result, error) {
		if call.CallID == "c1" {
			// c1's own result is committed; reading the staged results
			// of the later calls then fails once.
			ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpOpen, PathContains: string(filepath.Separator) + "staged" + string(filepath.Separator), Err: syscall.EIO, Times: 1})
		}
		return run(ctx, call)
	}
	f := newFixture(t, newTools(t, shell), toolCalls([3]string{"c1", "shell", `{}`}, [3]string{"c2", "shell", `{}`}, [3]string{"c3", "shell", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	faulty, err := jsonl.NewStore(jsonl.Options{Root: f.root, Compression: jsonl.CompressionNone, FS: ffs})
	require.NoError(t, err)
	for i, id := range []string{"c2", "c3"} {
		_, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, i+1, id, "shell"))
		require.NoError(t, err)
	}
	require.Len(t, f.stagedFiles(), 2)

	_, err = f.runTool(f.actsOn(faulty), f.toolInput(res.MessageSeq, 0, "c1", "shell"))
	require.Error(t, err)
	require.Equal(t, []string{"tool/call", "tool/call", "tool/call", "tool/result"}, types(f.log()[m+1:]), "c1's result alone")
	require.Len(t, f.stagedFiles(), 2)

	out, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 0, "c1", "shell"))
	require.NoError(t, err)
	require.Equal(t, m+7, out.NextSeq)
	log := f.log()
	require.Len(t, log, int(m)+7)
	requireResultsInModelOrder(t, log, []string{"c1", "c2", "c3"})
	require.Equal(t, int64(3), runs.Load(), "no tool ran twice")
	require.Empty(t, f.stagedFiles())
}

// TestRunToolLastCallCommitsWithoutStaging: the last call of a message,
// after all the others, is committed directly: nothing is staged, and a
// commit that fails leaves the retry to decide by the tool's class.
func TestRunToolLastCallCommitsWithoutStaging(t *testing.T) {
	var runs atomic.Int64
	ffs := faultfs.New(nil)
	shell := echoTool("shell", false, false, &runs)
	run := shell.Run
	shell.Run = func(ctx context.Context, call tool.Call) (tool.Result, error) {
		if call.CallID == "c2" {
			ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpWrite, PathContains: "session.v3.jsonl", Err: syscall.EIO, Times: 1})
		}
		return run(ctx, call)
	}
	f := newFixture(t, newTools(t, shell), toolCalls([3]string{"c1", "shell", `{}`}, [3]string{"c2", "shell", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	faulty, err := jsonl.NewStore(jsonl.Options{Root: f.root, Compression: jsonl.CompressionNone, FS: ffs})
	require.NoError(t, err)
	acts := f.actsOn(faulty)

	out, err := f.runTool(acts, f.toolInput(res.MessageSeq, 0, "c1", "shell"))
	require.NoError(t, err)
	require.Equal(t, agent.ToolOutcome{CallSeq: m + 1, NextSeq: m + 3}, out)
	ffs.Reset()
	_, err = f.runTool(acts, f.toolInput(res.MessageSeq, 1, "c2", "shell"))
	require.Error(t, err)
	var staged bool
	for _, r := range ffs.Records() {
		staged = staged || strings.Contains(r.Path, string(filepath.Separator)+"staged")
	}
	require.False(t, staged, "the last call touches no staging file:\n%s", ffs)
	require.Equal(t, []string{"tool/call", "tool/result", "tool/call"}, types(f.log()[m+1:]))

	out, err = f.runTool(f.acts, f.toolInput(res.MessageSeq, 1, "c2", "shell"))
	require.NoError(t, err)
	require.Equal(t, agent.ToolOutcome{CallSeq: m + 3, NextSeq: m + 5, IsError: true, Code: "TOOL_OUTCOME_UNKNOWN", Unknown: true}, out)
	require.Equal(t, int64(2), runs.Load())
	require.Empty(t, f.stagedFiles())
}

// gateTool blocks each call until its gate (by call id) is closed.
func gateTool(gates map[string]chan struct{}) tool.Tool {
	return tool.Tool{
		Name: "gate", Schema: json.RawMessage(`{"type":"object"}`), Parallel: true, Idempotent: true,
		Run: func(ctx context.Context, call tool.Call) (tool.Result, error) {
			select {
			case <-gates[call.CallID]:
			case <-ctx.Done():
				return tool.Result{}, ctx.Err()
			}
			return tool.Result{Content: []provider.Block{{Type: "text", Text: "done " + call.CallID}}}, nil
		},
	}
}

// requireResultsInModelOrder asserts that the log's tool/results follow
// the tool/calls and come in model order, each citing its call.
func requireResultsInModelOrder(t *testing.T, log []session.Event, ids []string) {
	t.Helper()
	callSeq := map[string]int64{}
	var order []string
	for _, e := range log {
		switch e.Type {
		case wire.TypeToolCall:
			c, err := e.ToolCall()
			require.NoError(t, err)
			callSeq[c.CallID] = e.Seq
		case wire.TypeToolResult:
			r, err := e.ToolResult()
			require.NoError(t, err)
			id := r.Message.Source.CallID
			require.Equal(t, []int64{callSeq[id]}, e.SourceEventSeqs)
			require.False(t, r.Message.Content[0].IsError, "%s: %v", id, r.Message.Content)
			order = append(order, id)
		}
	}
	require.Equal(t, ids, order)
}

// TestRunToolParallelResultsInModelOrder: calls finishing out of order, in
// two worker processes, are stored in model order: a finished call whose
// predecessor still runs stays staged, and the last to finish commits the
// rest.
func TestRunToolParallelResultsInModelOrder(t *testing.T) {
	ids := []string{"c0", "c1", "c2", "c3"}
	gates := map[string]chan struct{}{}
	var calls [][3]string
	for _, id := range ids {
		gates[id] = make(chan struct{})
		calls = append(calls, [3]string{id, "gate", `{}`})
	}
	f := newFixture(t, newTools(t, gateTool(gates)), toolCalls(calls...))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	workers := []*agent.Activities{f.actsOn(f.newStore()), f.actsOn(f.newStore())}
	type result struct {
		out agent.ToolOutcome
		err error
	}
	done := map[string]chan result{}
	for i, id := range ids {
		done[id] = make(chan result, 1)
		go func() {
			out, err := workers[i%2].RunTool(bg, f.toolInput(res.MessageSeq, i, id, "gate"))
			done[id] <- result{out, err}
		}()
	}
	require.Eventually(t, func() bool { return len(f.log()) == int(m)+5 }, time.Minute, 5*time.Millisecond, "every call stores its tool/call before running (8 tool/calls; fsyncs are slow on a loaded disk)")
	for _, id := range []string{"c3", "c1", "c2"} {
		close(gates[id])
		r := <-done[id]
		require.NoError(t, r.err)
		require.Equal(t, m+5, r.out.NextSeq, "%s waits for c0", id)
		require.Equal(t, []string{"tool/call", "tool/call", "tool/call", "tool/call"}, types(f.log()[m+1:]))
	}
	require.Len(t, f.stagedFiles(), 3)
	close(gates["c0"])
	r := <-done["c0"]
	require.NoError(t, r.err)
	require.Equal(t, m+9, r.out.NextSeq)
	log := f.log()
	require.Len(t, log, int(m)+9)
	requireResultsInModelOrder(t, log, ids)
	require.Empty(t, f.stagedFiles())
}

// TestRunToolConcurrentFromTwoStores: ten parallel calls finishing in
// random order from two store instances, each call also retried once
// concurrently, store one tool/call and one result per call, results in
// model order.
func TestRunToolConcurrentFromTwoStores(t *testing.T) {
	var runs atomic.Int64
	slow := tool.Tool{Name: "slow", Schema: json.RawMessage(`{"type":"object"}`), Parallel: true, Idempotent: true,
		Run: func(_ context.Context, call tool.Call) (tool.Result, error) {
			runs.Add(1)
			var a struct {
				Ms int `json:"ms"`
			}
			_ = json.Unmarshal(call.Arguments, &a)
			time.Sleep(time.Duration(a.Ms) * time.Millisecond)
			return tool.Result{Content: []provider.Block{{Type: "text", Text: "ok"}}}, nil
		}}
	var calls [][3]string
	var ids []string
	for i := range 10 {
		id := fmt.Sprintf("k%d", i)
		ids = append(ids, id)
		calls = append(calls, [3]string{id, "slow", fmt.Sprintf(`{"ms":%d}`, (i*7)%10)})
	}
	f := newFixture(t, newTools(t, slow), toolCalls(calls...))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	workers := []*agent.Activities{f.actsOn(f.newStore()), f.actsOn(f.newStore())}
	var wg sync.WaitGroup
	var maxNext atomic.Int64
	errs := make(chan error, 20)
	for i, id := range ids {
		for attempt := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := workers[(i+attempt)%2].RunTool(bg, f.toolInput(res.MessageSeq, i, id, "slow"))
				errs <- err
				for {
					m := maxNext.Load()
					if out.NextSeq <= m || maxNext.CompareAndSwap(m, out.NextSeq) {
						break
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	log := f.log()
	require.Len(t, log, int(m)+1+20)
	require.Equal(t, int64(len(log)), maxNext.Load(), "the largest NextSeq of the step's tool activities is the log's next seq")
	requireResultsInModelOrder(t, log, ids)
	requireBalancedAfterClosing(t, log)
}

// TestRunToolMissingToolAndBadArguments: a call of an unknown tool or with
// arguments that are not JSON is an IsError result, not an activity
// failure.
func TestRunToolMissingToolAndBadArguments(t *testing.T) {
	var runs atomic.Int64
	f := newFixture(t, newTools(t, echoTool("echo", true, true, &runs)),
		toolCalls([3]string{"c1", "nope", `{}`}, [3]string{"c2", "echo", `not json`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	out, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 0, "c1", "nope"))
	require.NoError(t, err)
	require.Equal(t, agent.ToolOutcome{CallSeq: m + 1, NextSeq: m + 3, IsError: true, Code: "TOOL_NOT_FOUND"}, out)
	out, err = f.runTool(f.acts, f.toolInput(res.MessageSeq, 1, "c2", "echo"))
	require.NoError(t, err)
	require.Equal(t, agent.ToolOutcome{CallSeq: m + 3, NextSeq: m + 5, IsError: true, Code: "INVALID_ARGUMENTS"}, out)
	require.Equal(t, int64(0), runs.Load())
	log := f.log()
	for _, i := range []int64{m + 2, m + 4} {
		r, err := log[i].ToolResult()
		require.NoError(t, err)
		require.True(t, r.Message.Content[0].IsError)
		require.NotNil(t, r.Error)
	}

	// An input that names no call of the message is a non-retryable error.
	_, err = f.runTool(f.acts, f.toolInput(res.MessageSeq, 2, "c9", "echo"))
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "InvalidLog", app.Type())
	require.True(t, app.NonRetryable())
}

// TestWholeTurnLeavesBalancedLog: model call with two tools, their results,
// a second step answering, and the end of the turn leave a log resume
// accepts as balanced; the second model call sees the results in model
// order.
func TestWholeTurnLeavesBalancedLog(t *testing.T) {
	var runs atomic.Int64
	f := newFixture(t, newTools(t, echoTool("echo", true, true, &runs)),
		toolCalls([3]string{"c1", "echo", `{"text":"1"}`}, [3]string{"c2", "echo", `{"text":"2"}`}), answer("all done"))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	var next int64
	for i, c := range res.ToolCalls {
		out, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, i, c.ID, c.Name))
		require.NoError(t, err)
		next = max(next, out.NextSeq)
	}
	f.append(ev(t, wire.TypeStepEnd, next, `{"turn":1,"step":1}`), ev(t, wire.TypeStepStart, next+1, `{"turn":1,"step":2}`))
	res2, err := f.callModel(f.acts, f.modelInput(1, 2))
	require.NoError(t, err)
	require.Equal(t, provider.FinishStop, res2.Finish)
	msgs := f.prov.requests[1].Messages
	require.Len(t, msgs, 4)
	require.Equal(t, "c1", msgs[2].Content[0].ToolCallID)
	require.Equal(t, "c2", msgs[3].Content[0].ToolCallID)
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 2, MessageSeq: res2.MessageSeq, Reason: wire.TurnEndReason{Kind: "completed"}})
	require.NoError(t, err)
	log := f.log()
	requireBalanced(t, log)
	require.NoError(t, f.hd.Close(bg))
	// A resume's write open validates the whole log.
	re, err := f.newStore().Open(bg, f.hd.ID(), jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "resume", Owner: jsonl.Owner{WorkflowID: "w"}})
	require.NoError(t, err)
	events, err := re.Read(bg, 0, -1)
	require.NoError(t, err)
	_, open, err := session.ScanOpenTurn(events)
	require.NoError(t, err)
	require.False(t, open)
	want := append(callTypes(10), "tool/call", "tool/result", "tool/call", "tool/result", "step/end", "step/start")
	for range 5 {
		want = append(want, "assistant/chunk")
	}
	want = append(want, "assistant/message", "step/end", "turn/end")
	require.Equal(t, want, types(events))
}

// TestRunToolCancelledAttemptStoresNoResult: a tool whose attempt ends
// (timed out, cancelled) while it runs gets no result from that attempt;
// the retry decides by the tool's class.
func TestRunToolCancelledAttemptStoresNoResult(t *testing.T) {
	started := make(chan struct{})
	var runs atomic.Int64
	block := tool.Tool{Name: "shell", Schema: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, _ tool.Call) (tool.Result, error) {
			if runs.Add(1) == 1 {
				close(started)
				<-ctx.Done()
				return tool.Result{}, ctx.Err()
			}
			return tool.Result{Content: []provider.Block{{Type: "text", Text: "ran"}}}, nil
		}}
	f := newFixture(t, newTools(t, block), toolCalls([3]string{"c1", "shell", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	ctx, cancel := context.WithCancelCause(bg)
	go func() { <-started; cancel(errors.New("heartbeat timed out")) }()
	_, err = f.env(f.acts, withContext(ctx)).ExecuteActivity(wire.RunToolActivity, f.toolInput(res.MessageSeq, 0, "c1", "shell"))
	require.Error(t, err)
	require.Equal(t, []string{"tool/call"}, types(f.log()[m+1:]))
	require.Empty(t, f.stagedFiles())

	out, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 0, "c1", "shell"))
	require.NoError(t, err)
	require.True(t, out.Unknown, "a non-idempotent tool is not re-run")
	require.Equal(t, int64(1), runs.Load())
}

// TestRunToolCancelRequestedStoresTheToolsResult: a call the workflow
// cancels (the SDK's cause is a CanceledError: the turn was cancelled)
// stores what the stopped tool returned, ABORTED with its output, and
// completes; the tool is not run again.
func TestRunToolCancelRequestedStoresTheToolsResult(t *testing.T) {
	started := make(chan struct{})
	var runs atomic.Int64
	block := tool.Tool{Name: "shell", Schema: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, _ tool.Call) (tool.Result, error) {
			runs.Add(1)
			close(started)
			<-ctx.Done()
			return tool.ErrorResult("AbortError", "ABORTED", "partial\nError: the tool call was cancelled and the command was killed"), nil
		}}
	f := newFixture(t, newTools(t, block), toolCalls([3]string{"c1", "shell", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	ctx, cancel := context.WithCancelCause(bg)
	go func() { <-started; cancel(temporal.NewCanceledError("turn cancelled")) }()
	v, err := f.env(f.acts, withContext(ctx)).ExecuteActivity(wire.RunToolActivity, f.toolInput(res.MessageSeq, 0, "c1", "shell"))
	require.NoError(t, err)
	var out agent.ToolOutcome
	require.NoError(t, v.Get(&out))
	require.True(t, out.IsError)
	require.Equal(t, "ABORTED", out.Code)
	require.False(t, out.Unknown)
	log := f.log()
	require.Equal(t, []string{"tool/call", "tool/result"}, types(log[m+1:]))
	r, err := log[m+2].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "ABORTED", r.Error.Code)
	require.Equal(t, "partial\nError: the tool call was cancelled and the command was killed", r.Message.Content[0].Content[0].Text)
	require.Equal(t, int64(1), runs.Load())
}

// TestWorkflowDeathMidStepIsClosedByResume: when the workflow dies with a
// result staged behind a call whose attempt crashed, resume's closers close
// both recorded calls as outcome unknown, and the log they produce is
// accepted by the store.
func TestWorkflowDeathMidStepIsClosedByResume(t *testing.T) {
	var runs atomic.Int64
	f := newFixture(t, newTools(t, echoTool("echo", true, true, &runs)),
		toolCalls([3]string{"c0", "echo", `{}`}, [3]string{"c1", "echo", `{}`}, [3]string{"c2", "echo", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	f.append(ev(t, wire.TypeToolCall, m+1, `{"turn":1,"step":1,"callId":"c0","name":"echo","arguments":"{}"}`))
	out, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 1, "c1", "echo"))
	require.NoError(t, err)
	require.Equal(t, m+3, out.NextSeq, "c1 waits behind c0")
	log := f.log()
	closers, err := session.InterruptedTurnClosers(log)
	require.NoError(t, err)
	require.Equal(t, []string{"tool/result", "tool/result", "tool/result", "step/end", "turn/end"}, types(closers))
	var codes []string
	for _, c := range closers[:3] {
		r, err := c.ToolResult()
		require.NoError(t, err)
		codes = append(codes, r.Error.Code)
	}
	require.Equal(t, []string{"TOOL_OUTCOME_UNKNOWN", "TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"}, codes)
	f.append(closers...)
	requireBalanced(t, f.log())
}

// TestBuiltinToolsInTheSessionCwd: the built-in tools run in the session
// header's cwd; a path that leaves it is an OUTSIDE_CWD result with the
// tool's meta kept only on success.
func TestBuiltinToolsInTheSessionCwd(t *testing.T) {
	f := newFixture(t, newTools(t, tool.Builtins(tool.BuiltinOptions{})...),
		toolCalls([3]string{"r1", "read_file", `{"path":"notes.txt"}`}, [3]string{"r2", "read_file", `{"path":"../outside.txt"}`},
			[3]string{"w1", "write_file", `{"path":"out.txt","content":"written"}`}))
	require.NoError(t, os.WriteFile(filepath.Join(f.cwd, "notes.txt"), []byte("line one\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(f.cwd), "outside.txt"), []byte("secret\n"), 0o600))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	require.Equal(t, []agent.CallRef{{ID: "r1", Name: "read_file", Parallel: true, Hint: "notes.txt"}, {ID: "r2", Name: "read_file", Parallel: true, Hint: "../outside.txt"}, {ID: "w1", Name: "write_file", Hint: "out.txt"}}, res.ToolCalls)
	require.Len(t, f.prov.requests[0].Tools, 3)
	for i, c := range res.ToolCalls {
		_, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, i, c.ID, c.Name))
		require.NoError(t, err)
	}
	log := f.log()
	requireResultsInModelOrderAllowErrors(t, log, []string{"r1", "r2", "w1"})
	r1, err := log[m+2].ToolResult()
	require.NoError(t, err)
	require.Contains(t, r1.Message.Content[0].Content[0].Text, "line one")
	require.NotEmpty(t, r1.Meta)
	r2, err := log[m+4].ToolResult()
	require.NoError(t, err)
	require.True(t, r2.Message.Content[0].IsError)
	require.Equal(t, "OUTSIDE_CWD", r2.Error.Code)
	require.NotContains(t, r2.Message.Content[0].Content[0].Text, "secret")
	written, err := os.ReadFile(filepath.Join(f.cwd, "out.txt"))
	require.NoError(t, err)
	require.Equal(t, "written", string(written))
}

// requireResultsInModelOrderAllowErrors is requireResultsInModelOrder for
// results that may be errors.
func requireResultsInModelOrderAllowErrors(t *testing.T, log []session.Event, ids []string) {
	t.Helper()
	var order []string
	for _, e := range log {
		if e.Type == wire.TypeToolResult {
			r, err := e.ToolResult()
			require.NoError(t, err)
			order = append(order, r.Message.Source.CallID)
		}
	}
	require.Equal(t, ids, order)
}

// TestRunToolAfterItsStepClosed: a late attempt of a call whose step and
// turn were closed without its result stores nothing after them.
func TestRunToolAfterItsStepClosed(t *testing.T) {
	var runs atomic.Int64
	f := newFixture(t, newTools(t, echoTool("echo", true, true, &runs)), toolCalls([3]string{"c1", "echo", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	m := res.MessageSeq // the step's assistant/message, after its chunks
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: -1, Reason: wire.TurnEndReason{Kind: "error", Error: json.RawMessage(`{"message":"x"}`)}})
	require.NoError(t, err)
	before := types(f.log())
	_, err = f.runTool(f.acts, f.toolInput(res.MessageSeq, 0, "c1", "echo"))
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "InvalidLog", app.Type())
	require.Contains(t, app.Error(), fmt.Sprintf(`tool call "c1" of the assistant/message at seq %d has no result and its step is closed`, m))
	require.Equal(t, before, types(f.log()))
	require.Equal(t, int64(0), runs.Load())
}

// TestRunToolPassesTheSessionsSandbox: the sandbox mode and network
// allowance of the ToolInput (the session's agentOptions) reach the tool.
func TestRunToolPassesTheSessionsSandbox(t *testing.T) {
	var runs atomic.Int64
	var got []string
	probe := echoTool("probe", false, false, &runs)
	run := probe.Run
	probe.Run = func(ctx context.Context, call tool.Call) (tool.Result, error) {
		got = append(got, fmt.Sprintf("%s %v", call.SandboxMode, call.NetworkAccess))
		return run(ctx, call)
	}
	f := newFixture(t, newTools(t, probe), toolCalls([3]string{"c1", "probe", `{}`}, [3]string{"c2", "probe", `{}`}))
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	in := f.toolInput(res.MessageSeq, 0, "c1", "probe")
	in.SandboxMode, in.NetworkAccess = "read-only", true
	_, err = f.runTool(f.acts, in)
	require.NoError(t, err)
	_, err = f.runTool(f.acts, f.toolInput(res.MessageSeq, 1, "c2", "probe"))
	require.NoError(t, err)
	require.Equal(t, []string{"read-only true", " false"}, got)
}
