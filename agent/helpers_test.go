package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

var bg = context.Background()

var handleCounter atomic.Int64

// response is one scripted model response.
type response struct {
	chunks []provider.Chunk
	// fail ends the stream with this error after the chunks.
	fail error
	// stall blocks after the chunks until the context is done.
	stall bool
}

// fakeProvider answers request i (i = the number of assistant messages in
// the request) with responses[i], recording each request.
type fakeProvider struct {
	mu        sync.Mutex
	responses []response
	requests  []provider.Request
	// streamed is signalled after every chunk yielded.
	streamed chan provider.Chunk
}

func (p *fakeProvider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		p.mu.Lock()
		p.requests = append(p.requests, req)
		n := 0
		for _, m := range req.Messages {
			if m.Role == provider.RoleAssistant {
				n++
			}
		}
		if n >= len(p.responses) {
			p.mu.Unlock()
			yield(provider.Chunk{}, &provider.Error{Message: "script exhausted"})
			return
		}
		r := p.responses[n]
		p.mu.Unlock()
		for _, c := range r.chunks {
			if ctx.Err() != nil {
				yield(provider.Chunk{}, ctx.Err())
				return
			}
			if !yield(c, nil) {
				return
			}
			if p.streamed != nil {
				p.streamed <- c
			}
		}
		if r.stall {
			<-ctx.Done()
			yield(provider.Chunk{}, ctx.Err())
			return
		}
		if r.fail != nil {
			yield(provider.Chunk{}, r.fail)
		}
	}
}

func (p *fakeProvider) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

// text, reasoning, callChunk, finish and usage build chunks.
func text(s string) provider.Chunk { return provider.Chunk{Type: provider.ChunkText, Delta: s} }
func reasoning(s string) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkReasoning, Delta: s}
}
func callChunk(i int, id, name, args string) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkToolCall, Index: i, ID: id, Name: name, Delta: args}
}
func finish(f provider.FinishReason) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkFinish, Finish: f}
}
func usage(in, out int64) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkUsage, Usage: &provider.Usage{InputTokens: in, OutputTokens: out}}
}

// answer is a response of text only.
func answer(s string) response {
	return response{chunks: []provider.Chunk{text(s), usage(10, 2), finish(provider.FinishStop)}}
}

// toolCalls is a response calling the given tools (id, name, args triples).
func toolCalls(calls ...[3]string) response {
	r := response{chunks: []provider.Chunk{text("Let me look.")}}
	for i, c := range calls {
		r.chunks = append(r.chunks, callChunk(i, c[0], c[1], c[2]))
	}
	r.chunks = append(r.chunks, finish(provider.FinishToolCalls))
	return r
}

// newTools is a registry of the given tools.
func newTools(t *testing.T, ts ...tool.Tool) *tool.Registry {
	t.Helper()
	r, err := tool.NewRegistry(ts...)
	require.NoError(t, err)
	return r
}

// echoTool returns its arguments' "text" and counts its runs.
func echoTool(name string, parallel, idempotent bool, runs *atomic.Int64) tool.Tool {
	return tool.Tool{
		Name: name, Description: "echoes", Schema: json.RawMessage(`{"type":"object"}`),
		Parallel: parallel, Idempotent: idempotent,
		Run: func(_ context.Context, call tool.Call) (tool.Result, error) {
			runs.Add(1)
			var args struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(call.Arguments, &args)
			return tool.Result{Content: []provider.Block{{Type: "text", Text: name + ":" + args.Text + "@" + filepath.Base(call.Cwd)}}}, nil
		},
	}
}

// fixture is a store with one session whose turn 1, step 1 is open after
// a user message.
type fixture struct {
	t     *testing.T
	root  string
	cwd   string
	store *jsonl.Store
	hd    *jsonl.Handle
	acts  *agent.Activities
	prov  *fakeProvider
}

func newFixture(t *testing.T, tools agent.ToolSet, responses ...response) *fixture {
	t.Helper()
	f := &fixture{t: t, root: filepath.Join(t.TempDir(), "root"), cwd: t.TempDir()}
	f.store = f.newStore()
	h := wire.Header{Version: wire.FormatVersion, ID: "s-" + fmt.Sprint(handleCounter.Add(1)), CreatedAt: 1, Cwd: f.cwd}
	hd, err := f.store.Create(bg, h, jsonl.CreateOptions{HandleID: fmt.Sprintf("h-%d", handleCounter.Add(1)), Owner: jsonl.Owner{WorkflowID: "session/" + h.ID, RunID: "r"}})
	require.NoError(t, err)
	f.hd = hd
	f.append(
		ev(t, wire.TypeTurnStart, 0, `{"turn":1}`),
		surface(t, wire.TypeUserMessage, 1, `{"id":"u-1","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}}`),
		ev(t, wire.TypeStepStart, 2, `{"turn":1,"step":1}`),
	)
	f.prov = &fakeProvider{responses: responses}
	f.acts = &agent.Activities{Runtime: &activities.Runtime{Store: f.store, HeartbeatInterval: time.Millisecond},
		Providers: provider.Set{"fake": f.prov}, Tools: tools, System: "be brief"}
	return f
}

// newStore opens another store over the fixture's root, as another
// worker process would.
func (f *fixture) newStore() *jsonl.Store {
	st, err := jsonl.NewStore(jsonl.Options{Root: f.root, Compression: jsonl.CompressionNone})
	require.NoError(f.t, err)
	return st
}

// actsOn returns activities over another store instance on the same root,
// as another worker's: their own runtime and conversation cache.
func (f *fixture) actsOn(st *jsonl.Store) *agent.Activities {
	rt := *f.acts.Runtime
	rt.Store = st
	return &agent.Activities{Runtime: &rt, Providers: f.acts.Providers, Tools: f.acts.Tools, System: f.acts.System,
		Now: f.acts.Now, TracerProvider: f.acts.TracerProvider, TraceContent: f.acts.TraceContent, Limits: f.acts.Limits}
}

func (f *fixture) append(events ...session.Event) {
	f.t.Helper()
	require.NoError(f.t, f.hd.Append(bg, events))
}

// log reads the whole log through a fresh store.
func (f *fixture) log() []session.Event {
	f.t.Helper()
	rd, err := f.newStore().Open(bg, f.hd.ID(), jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(f.t, err)
	defer rd.Close(bg)
	events, err := rd.Read(bg, 0, -1)
	require.NoError(f.t, err)
	return events
}

func (f *fixture) modelInput(turn, step int64) agent.ModelInput {
	return agent.ModelInput{Ref: f.hd.Ref(), Turn: turn, Step: step, Provider: "fake", Model: "m1"}
}

// env is a Temporal test activity environment with the fixture's
// activities registered.
func (f *fixture) env(acts *agent.Activities, opts ...func(*testsuite.TestActivityEnvironment)) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	for _, o := range opts {
		o(env)
	}
	env.RegisterActivity(acts)
	return env
}

func withContext(ctx context.Context) func(*testsuite.TestActivityEnvironment) {
	return func(env *testsuite.TestActivityEnvironment) {
		env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	}
}

func (f *fixture) callModel(acts *agent.Activities, in agent.ModelInput) (agent.ModelResult, error) {
	v, err := f.env(acts).ExecuteActivity(wire.CallModelActivity, in)
	if err != nil {
		return agent.ModelResult{}, err
	}
	var r agent.ModelResult
	require.NoError(f.t, v.Get(&r))
	return r, nil
}

func (f *fixture) runTool(acts *agent.Activities, in agent.ToolInput) (agent.ToolOutcome, error) {
	v, err := f.env(acts).ExecuteActivity(wire.RunToolActivity, in)
	if err != nil {
		return agent.ToolOutcome{}, err
	}
	var r agent.ToolOutcome
	require.NoError(f.t, v.Get(&r))
	return r, nil
}

func (f *fixture) endTurn(acts *agent.Activities, in agent.EndTurnInput) (agent.EndTurnResult, error) {
	v, err := f.env(acts).ExecuteActivity(wire.EndTurnActivity, in)
	if err != nil {
		return agent.EndTurnResult{}, err
	}
	var r agent.EndTurnResult
	require.NoError(f.t, v.Get(&r))
	return r, nil
}

func ev(t *testing.T, typ string, seq int64, data string) session.Event {
	t.Helper()
	e, err := session.NewEvent(typ, seq, 100+seq, json.RawMessage(data))
	require.NoError(t, err)
	return e
}

func surface(t *testing.T, typ string, seq int64, data string) session.Event {
	t.Helper()
	e := ev(t, typ, seq, data)
	e.SurfaceOp = session.AppendOp()
	require.NoError(t, e.Validate())
	return e
}

func types(events []session.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

// dataOf decodes an event's data into a generic map.
func dataOf(t *testing.T, e session.Event) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Data, &m))
	return m
}

// requireBalancedAndContiguous checks what a resume would find: seqs equal
// indexes, every stored event is appendable, and no turn is open.
func requireBalanced(t *testing.T, events []session.Event) {
	t.Helper()
	for i, e := range events {
		require.Equal(t, int64(i), e.Seq)
	}
	closers, err := session.InterruptedTurnClosers(events)
	require.NoError(t, err)
	require.Empty(t, closers, "the log must be balanced: resume would add %v", types(closers))
}

// withoutRecords returns the types of log but its assistant/chunk and
// request/context events, after checking that each run of assistant/chunk
// events is cited, all of it and nothing else, by the assistant/message
// right after it: no attempt left chunks without a message.
func withoutRecords(t *testing.T, log []session.Event) []string {
	t.Helper()
	var out []string
	var run []int64
	for _, e := range log {
		switch e.Type {
		case wire.TypeAssistantChunk:
			run = append(run, e.Seq)
			continue
		case wire.TypeAssistantMessage:
			require.Equal(t, run, e.SourceEventSeqs, "the message at seq %d cites its chunks", e.Seq)
			run = nil
		case wire.TypeRequestContext:
			require.Empty(t, run)
			continue
		}
		require.Empty(t, run, "chunks without their message before seq %d", e.Seq)
		out = append(out, e.Type)
	}
	require.Empty(t, run, "chunks without their message at the end")
	return out
}
