package agent_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The texts of the harness's runtime-context snapshot (its snapshots
// apps/web/tests/snapshots/permission-policy-context and
// goal-multi-turn-actions).
const (
	ctxHead = "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n"
	ctxAsk  = "Approval policy: ask. Operations that require approval may ask through the configured answerers; without an available answerer, the request fails closed."
	ctxDFA  = "Current DSH file policy: danger-full-access. The DSH file sandbox does not restrict file modifications by available operations."
	ctxNvr  = "Approval prompts are disabled in this session: actions that require approval are rejected automatically — do not request sandbox escalation (do not set `sandbox_permissions`)."
)

// contextMessages returns the log's runtime-context messages.
func contextMessages(t *testing.T, log []session.Event) []session.Event {
	t.Helper()
	var out []session.Event
	for _, e := range log {
		if e.Type == wire.TypeUserMessage && dataOf(t, e)["source"].(map[string]any)["plugin"] == "@deepseek-ai/dsh-system-prompt" {
			out = append(out, e)
		}
	}
	return out
}

// A model call stores the runtime context (the session's file policy and
// approval policy) as a user/message from @deepseek-ai/dsh-system-prompt
// after the step's inputs, before its request, and sends it; a later step
// stores it again only when it changed; a retried call stores nothing
// twice; a call whose input states no policy stores none.
func TestCallModelStoresTheRuntimeContext(t *testing.T) {
	f := newFixture(t, nil, answer("one"), answer("two"), answer("three"))
	f.acts.RuntimeContext = true
	real, err := filepath.EvalSymlinks(f.cwd)
	require.NoError(t, err)
	root, err := json.Marshal(real)
	require.NoError(t, err)
	ww := "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: " +
		string(root) + ". Some platform temporary areas may also be writable."

	in := f.modelInput(1, 1)
	in.Policy = &agent.ContextPolicy{SandboxMode: "workspace-write", ApprovalPolicy: "ask"}
	res, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	_, err = f.callModel(f.acts, in)
	require.NoError(t, err, "a retry")
	log := f.log()
	require.Equal(t, wire.TypeUserMessage, log[3].Type, "stored after the step's inputs")
	require.Equal(t, wire.TypeRequestContext, log[4].Type)
	require.NotNil(t, log[3].SurfaceOp)
	require.Equal(t, map[string]any{
		"id":      "runtime-context-1-1",
		"role":    "user",
		"content": []any{map[string]any{"type": "text", "text": ctxHead + ww + "\n\n" + ctxAsk}},
		"source": map[string]any{"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt", "form": "snapshot", "sections": []any{
			map[string]any{"name": "sandbox:policy", "text": ww},
			map[string]any{"name": "approval:policy", "text": ctxAsk},
		}},
	}, dataOf(t, log[3]))
	require.Len(t, contextMessages(t, log), 1, "the retry stored it once")
	require.Equal(t, []provider.Message{
		{Role: "user", Content: []provider.Block{{Type: "text", Text: "hello"}}},
		{Role: "user", Content: []provider.Block{{Type: "text", Text: ctxHead + ww + "\n\n" + ctxAsk}}},
	}, f.prov.requests[0].Messages)

	// Step 2, same policy: the surface holds it; nothing stored.
	f.append(ev(t, wire.TypeStepEnd, res.NextSeq, `{"turn":1,"step":1}`), ev(t, wire.TypeStepStart, res.NextSeq+1, `{"turn":1,"step":2}`))
	res, err = f.callModel(f.acts, func() agent.ModelInput { i := f.modelInput(1, 2); i.Policy = in.Policy; return i }())
	require.NoError(t, err)
	require.Len(t, contextMessages(t, f.log()), 1)

	// Step 3 under another policy: the new snapshot.
	f.append(ev(t, wire.TypeStepEnd, res.NextSeq, `{"turn":1,"step":2}`), ev(t, wire.TypeStepStart, res.NextSeq+1, `{"turn":1,"step":3}`))
	i3 := f.modelInput(1, 3)
	i3.Policy = &agent.ContextPolicy{SandboxMode: "danger-full-access", ApprovalPolicy: "never"}
	_, err = f.callModel(f.acts, i3)
	require.NoError(t, err)
	msgs := contextMessages(t, f.log())
	require.Len(t, msgs, 2)
	require.Equal(t, ctxHead+ctxDFA+"\n\n"+ctxNvr, dataOf(t, msgs[1])["content"].([]any)[0].(map[string]any)["text"])
	last := f.prov.requests[len(f.prov.requests)-1].Messages
	require.Equal(t, ctxHead+ctxDFA+"\n\n"+ctxNvr, last[len(last)-1].Content[0].Text, "the request ends with the new snapshot")
}

// Without a policy in its input (a workflow that predates it), or on
// activities without RuntimeContext (the default), a model call stores no
// runtime context.
func TestCallModelWithoutPolicyStoresNoContext(t *testing.T) {
	f := newFixture(t, nil, answer("one"), answer("two"))
	f.acts.RuntimeContext = true
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.Empty(t, contextMessages(t, f.log()))

	f.acts.RuntimeContext = false
	f.append(ev(t, wire.TypeStepEnd, res.NextSeq, `{"turn":1,"step":1}`), ev(t, wire.TypeStepStart, res.NextSeq+1, `{"turn":1,"step":2}`))
	in := f.modelInput(1, 2)
	in.Policy = &agent.ContextPolicy{SandboxMode: "read-only", ApprovalPolicy: "ask"}
	_, err = f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Empty(t, contextMessages(t, f.log()))
}

// A compaction whose replacement covers the stored snapshot leaves none on
// the surface: the next call stores it again, as the harness's projection
// forgets a snapshot a replacement cites.
func TestCallModelStoresTheRuntimeContextAgainAfterAReplacement(t *testing.T) {
	f := newFixture(t, nil, answer("one"), answer("two"))
	f.acts.RuntimeContext = true
	in := f.modelInput(1, 1)
	in.Policy = &agent.ContextPolicy{SandboxMode: "read-only", ApprovalPolicy: "never"}
	res, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	n := res.NextSeq
	summary := ev(t, wire.TypeUserMessage, n+1, `{"id":"sum","role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"user"}}`)
	summary.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: 1, EndSeq: res.MessageSeq}
	summary.SourceEventSeqs = []int64{1, 3, res.MessageSeq}
	f.append(ev(t, wire.TypeStepEnd, n, `{"turn":1,"step":1}`), summary, ev(t, wire.TypeStepStart, n+2, `{"turn":1,"step":2}`))
	i2 := f.modelInput(1, 2)
	i2.Policy = in.Policy
	_, err = f.callModel(f.acts, i2)
	require.NoError(t, err)
	msgs := contextMessages(t, f.log())
	require.Len(t, msgs, 2, "stored again once replaced")
	require.Equal(t, n+3, msgs[1].Seq)
}
