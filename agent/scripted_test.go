package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// TestScriptedTurn: a turn with the scripted provider and the built-in
// tools: the first model call fails once (retryable, stores nothing), its
// retry streams a tool call in small chunks, the tool reads a file of the
// session's cwd, and the second step answers; the log ends balanced with
// one message per model call.
func TestScriptedTurn(t *testing.T) {
	p, err := scripted.New(scripted.Responses(
		scripted.ToolCall("call-1", "read_file", `{"path":"a.txt"}`).WithChunkSize(3).
			WithFail(scripted.Fail{AfterChunks: 2, Retryable: true, Status: 503, Message: "overloaded", RetryAfterMs: 20, Attempts: 1}),
		scripted.Text("The file says hello.").WithChunkSize(4).WithUsage(12, 5),
	))
	require.NoError(t, err)
	f := newFixture(t, newTools(t, tool.Builtins(tool.BuiltinOptions{})...))
	f.acts.Providers = provider.Set{"scripted": p}
	require.NoError(t, os.WriteFile(filepath.Join(f.cwd, "a.txt"), []byte("hello\n"), 0o600))
	in := f.modelInput(1, 1)
	in.Provider = "scripted"

	_, err = f.callModel(f.acts, in)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "ProviderUnavailable", app.Type())
	require.Equal(t, int64(20), app.NextRetryDelay().Milliseconds())
	require.Len(t, f.log(), 3)

	res, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, []agent.CallRef{{ID: "call-1", Name: "read_file", Parallel: true, Hint: "a.txt"}}, res.ToolCalls)
	out, err := f.runTool(f.acts, f.toolInput(res.MessageSeq, 0, "call-1", "read_file"))
	require.NoError(t, err)
	require.False(t, out.IsError)
	f.append(ev(t, wire.TypeStepEnd, out.NextSeq, `{"turn":1,"step":1}`), ev(t, wire.TypeStepStart, out.NextSeq+1, `{"turn":1,"step":2}`))
	in.Step = 2
	res2, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, provider.FinishStop, res2.Finish)
	require.Equal(t, &provider.Usage{InputTokens: 12, OutputTokens: 5}, res2.Usage)
	_, err = f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 2, MessageSeq: res2.MessageSeq, Reason: wire.TurnEndReason{Kind: "completed"}})
	require.NoError(t, err)
	log := f.log()
	requireBalanced(t, log)
	require.Equal(t, []string{"turn/start", "user/message", "step/start", "assistant/message", "tool/call", "tool/result",
		"step/end", "step/start", "assistant/message", "step/end", "turn/end"}, withoutRecords(t, log))
	msgs, err := agent.Conversation(log)
	require.NoError(t, err)
	require.Equal(t, "The file says hello.", msgs[len(msgs)-1].Content[0].Text)
	require.Contains(t, msgs[2].Content[0].Content[0].Text, "hello")
}
