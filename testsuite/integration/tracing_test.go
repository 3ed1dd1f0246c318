package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/telemetry"
	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// gateTool is a parallel-safe, idempotent tool that reports each run on
// started; when block is set it runs until its context ends.
func gateTool(block bool, started chan<- string) tool.Tool {
	return tool.Tool{
		Name: "gate", Description: "waits", Schema: json.RawMessage(`{"type":"object"}`),
		Parallel: true, Idempotent: true,
		Run: func(ctx context.Context, call tool.Call) (tool.Result, error) {
			started <- call.CallID
			if block {
				<-ctx.Done()
				return tool.Result{}, ctx.Err()
			}
			return tool.Result{Content: []provider.Block{{Type: provider.BlockText, Text: "opened"}}}, nil
		},
	}
}

// startTracedWorker runs a worker of w whose spans go to exp.
func startTracedWorker(t *testing.T, w *world, exp *tracetest.InMemoryExporter, agentCfg workerapp.AgentConfig) *workerapp.Running {
	t.Helper()
	tr, err := telemetry.New(context.Background(), telemetry.Options{Exporter: exp})
	require.NoError(t, err)
	cfg := workerapp.DefaultConfig()
	cfg.Client = w.c
	cfg.TaskQueue = w.taskQueue
	cfg.StoreRoot = w.root
	cfg.Compression = w.comp
	cfg.MetricsAddress = ""
	cfg.StopTimeout = 200 * time.Millisecond
	cfg.Identity = clientIdentity
	cfg.Register = w.hooks.register
	cfg.Agent = agentCfg
	cfg.Tracing = tr
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r, err := workerapp.Start(ctx, cfg, discardLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

// spanTree indexes the spans of several exporters (a client and workers).
type spanTree struct {
	all  tracetest.SpanStubs
	byID map[trace.SpanID]tracetest.SpanStub
}

func newSpanTree(exps ...*tracetest.InMemoryExporter) *spanTree {
	st := &spanTree{byID: map[trace.SpanID]tracetest.SpanStub{}}
	for _, e := range exps {
		for _, s := range e.GetSpans() {
			st.all = append(st.all, s)
			st.byID[s.SpanContext.SpanID()] = s
		}
	}
	return st
}

func (st *spanTree) named(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range st.all {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// path returns the names of s's ancestors, nearest first, up to the root
// or the first parent no exporter holds.
func (st *spanTree) path(s tracetest.SpanStub) []string {
	var out []string
	for s.Parent.IsValid() {
		p, ok := st.byID[s.Parent.SpanID()]
		if !ok {
			out = append(out, "?"+s.Parent.SpanID().String())
			break
		}
		out = append(out, p.Name)
		s = p
	}
	return out
}

func (st *spanTree) names() []string {
	out := make([]string, len(st.all))
	for i, s := range st.all {
		out[i] = s.Name
	}
	return out
}

// TestTurnTraceAcrossWorkerRestart: a traced client's Followup starts a
// turn whose model call asks for two tool calls; the first worker runs the
// model call and starts both tools, then stops while they run; a second
// worker re-runs the (idempotent) tools, makes the second model call and
// ends the turn. One trace holds it all: the client's update span is the
// parent of the turn span (exported once, by the worker that ended the
// turn, under the id the first worker announced), whose children are the
// Temporal interceptor's StartActivity spans, whose RunActivity spans (on
// either worker) hold the "chat" and "execute_tool" spans. No prompt or
// response text is in any span.
func TestTurnTraceAcrossWorkerRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	script := func() provider.Set {
		p, err := scripted.New(scripted.Responses(
			scripted.ToolCalls(scripted.Call{ID: "c1", Name: "gate", Arguments: `{}`}, scripted.Call{ID: "c2", Name: "gate", Arguments: `{}`}),
			scripted.Text("the confidential answer").WithUsage(11, 4),
		))
		require.NoError(t, err)
		return provider.Set{"scripted": p}
	}
	started1 := make(chan string, 8)
	started2 := make(chan string, 8)
	exp1, exp2, clientExp := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
	r1 := startTracedWorker(t, w, exp1, workerapp.AgentConfig{Providers: script(), Tools: []tool.Tool{gateTool(true, started1)}})

	ctr, err := telemetry.New(context.Background(), telemetry.Options{Exporter: clientExp})
	require.NoError(t, err)
	tc, err := client.NewClientFromExisting(w.c, client.Options{Interceptors: ctr.ClientInterceptors(), Logger: quietLogger(), Identity: clientIdentity})
	require.NoError(t, err)
	traced := sfclient.New(tc, sfclient.Options{TaskQueue: w.taskQueue})

	id := w.id("trace-restart")
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute,
		Meta: &wire.SessionMeta{Cwd: t.TempDir()}, Options: &wire.Options{HeartbeatTimeoutMs: 2000}})
	w.awaitLive(id)
	in, err := traced.Followup(w.ctx(), id, wire.InputRequest{MessageID: "m1", Content: json.RawMessage(`"a secret prompt"`)})
	require.NoError(t, err)
	for range 2 {
		select {
		case <-started1:
		case <-w.ctx().Done():
			t.Fatal("the tools did not start on the first worker")
		}
	}
	require.NoError(t, r1.Stop())
	startTracedWorker(t, w, exp2, workerapp.AgentConfig{Providers: script(), Tools: []tool.Tool{gateTool(false, started2)}})

	var end sfclient.TurnProgress
	for p, err := range w.client().WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 50 * time.Millisecond}) {
		require.NoError(t, err)
		end = p
	}
	require.Equal(t, sfclient.ProgressEnded, end.Kind)
	require.Equal(t, "completed", end.Info.Reason.Kind)
	require.Len(t, started2, 2, "the second worker re-ran both tools")
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))

	st := newSpanTree(clientExp, exp1, exp2)
	roots := st.named("UpdateWorkflow:Followup")
	require.Len(t, roots, 1, "%q", st.names())
	root := roots[0]

	turns := st.named("invoke_agent sessionflow")
	require.Len(t, turns, 1, "the turn span is exported once: %q", st.names())
	turn := turns[0]
	require.Equal(t, root.SpanContext.SpanID(), turn.Parent.SpanID(), "the turn is a child of the client's update")
	require.Equal(t, root.SpanContext.TraceID(), turn.SpanContext.TraceID())
	require.Len(t, exp2.GetSpans().Snapshots(), len(exp2.GetSpans()))
	inExp2 := false
	for _, s := range exp2.GetSpans() {
		inExp2 = inExp2 || s.Name == turn.Name
	}
	require.True(t, inExp2, "the worker that ended the turn exported its span")
	ta := map[string]string{}
	for _, kv := range turn.Attributes {
		ta[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, "completed", ta["sessionflow.turn.end_reason"])
	require.Equal(t, "2", ta["sessionflow.turn.steps"])
	require.Equal(t, id, ta["gen_ai.conversation.id"])
	require.Equal(t, "invoke_agent", ta["gen_ai.operation.name"])

	chats := st.named("chat m1")
	require.Len(t, chats, 2, "%q", st.names())
	for _, c := range chats {
		require.Equal(t, []string{"RunActivity:CallModel", "StartActivity:CallModel", turn.Name, root.Name}, st.path(c))
	}
	tools := st.named("execute_tool gate")
	require.Len(t, tools, 4, "two runs on each worker: %q", st.names())
	var failed, ok int
	startSpans := map[trace.SpanID]bool{}
	for _, s := range tools {
		require.Equal(t, []string{"RunActivity:RunTool", "StartActivity:RunTool", turn.Name, root.Name}, st.path(s))
		startSpans[st.byID[st.byID[s.Parent.SpanID()].Parent.SpanID()].SpanContext.SpanID()] = true
		if s.Status.Code == codes.Error {
			failed++
		} else {
			ok++
		}
	}
	require.Equal(t, 2, failed, "the runs the stopped worker cut short")
	require.Equal(t, 2, ok)
	require.Len(t, startSpans, 2, "each tool call was scheduled once; both of its attempts are its children")
	require.Empty(t, st.named("HandleQuery:LoopState"), "queries are not traced")
	require.Empty(t, st.named("QueryWorkflow:LoopState"), "queries are not traced")
	require.Len(t, st.named("StartActivity:EndTurn"), 1)
	require.Equal(t, []string{turn.Name, root.Name}, st.path(st.named("StartActivity:EndTurn")[0]))

	for _, s := range st.all {
		if s.SpanContext.TraceID() == turn.SpanContext.TraceID() {
			continue
		}
		// Only the workflow's own spans (its start, queries, other
		// updates) may lie outside the turn's trace.
		require.False(t, strings.HasPrefix(s.Name, "chat") || strings.HasPrefix(s.Name, "execute_tool") ||
			strings.Contains(s.Name, "CallModel") || strings.Contains(s.Name, "RunTool"), "span %q outside the turn's trace", s.Name)
	}
	for _, s := range st.all {
		for _, kv := range s.Attributes {
			v := kv.Value.String()
			require.False(t, strings.Contains(v, "secret prompt") || strings.Contains(v, "confidential"), fmt.Sprintf("span %q attribute %s holds content", s.Name, kv.Key))
		}
	}
}

// TestTurnTraceContentOptIn: a worker started with TraceContent records
// the prompt and the answer on the model call's span (gen_ai.input.messages,
// gen_ai.output.messages).
func TestTurnTraceContentOptIn(t *testing.T) {
	t.Parallel()
	w := newWorld(t, shared, jsonl.CompressionNone)
	exp := tracetest.NewInMemoryExporter()
	p, err := scripted.New(scripted.Responses(scripted.Text("the plain answer")))
	require.NoError(t, err)
	tr, err := telemetry.New(context.Background(), telemetry.Options{Exporter: exp})
	require.NoError(t, err)
	cfg := workerapp.DefaultConfig()
	cfg.Client, cfg.TaskQueue, cfg.StoreRoot, cfg.Compression = w.c, w.taskQueue, w.root, w.comp
	cfg.MetricsAddress, cfg.Identity, cfg.Register = "", clientIdentity, w.hooks.register
	cfg.Agent = workerapp.AgentConfig{Providers: provider.Set{"scripted": p}}
	cfg.Tracing, cfg.TraceContent = tr, true
	r, err := workerapp.Start(w.ctx(), cfg, discardLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Stop() })

	id := w.id("trace-content")
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	w.awaitLive(id)
	c := w.client()
	in, err := c.Followup(w.ctx(), id, wire.InputRequest{Content: json.RawMessage(`"the plain prompt"`)})
	require.NoError(t, err)
	for _, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 50 * time.Millisecond}) {
		require.NoError(t, err)
	}
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	chats := newSpanTree(exp).named("chat m1")
	require.Len(t, chats, 1)
	a := map[string]string{}
	for _, kv := range chats[0].Attributes {
		a[string(kv.Key)] = kv.Value.String()
	}
	require.Contains(t, a["gen_ai.input.messages"], "the plain prompt")
	require.Contains(t, a["gen_ai.output.messages"], "the plain answer")
	turns := newSpanTree(exp).named("invoke_agent sessionflow")
	require.Len(t, turns, 1)
	require.False(t, turns[0].Parent.IsValid(), "an untraced client's turn is the root of its trace")
}

// TestWorkerExportsOverOTLP: a worker configured only by
// OTEL_EXPORTER_OTLP_ENDPOINT exports a turn's spans over OTLP/HTTP, and
// stopping it flushes the spans still batched.
func TestWorkerExportsOverOTLP(t *testing.T) {
	var (
		mu    sync.Mutex
		names []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectorpb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
				}
			}
		}
	}))
	defer srv.Close()
	// Not parallel: the variable reaches every worker this process starts.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	w := newWorld(t, shared, jsonl.CompressionNone)
	p, err := scripted.New(scripted.Responses(scripted.Text("exported")))
	require.NoError(t, err)
	cfg := workerapp.DefaultConfig()
	cfg.Client, cfg.TaskQueue, cfg.StoreRoot, cfg.Compression = w.c, w.taskQueue, w.root, w.comp
	cfg.MetricsAddress, cfg.Identity, cfg.Register = "", clientIdentity, w.hooks.register
	cfg.Agent = workerapp.AgentConfig{Providers: provider.Set{"scripted": p}}
	r, err := workerapp.Start(w.ctx(), cfg, discardLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Stop() })

	id := w.id("trace-otlp")
	run := w.create(wire.CreateSessionRequest{SessionID: id, AgentOptions: scriptedRoute})
	w.awaitLive(id)
	c := w.client()
	in, err := c.Followup(w.ctx(), id, wire.InputRequest{Content: json.RawMessage(`"hi"`)})
	require.NoError(t, err)
	for _, err := range c.WatchTurn(w.ctx(), id, in.MessageID, sfclient.WatchOptions{Interval: 50 * time.Millisecond}) {
		require.NoError(t, err)
	}
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	mu.Lock()
	require.Empty(t, names, "spans wait in the batch until the schedule delay or a flush")
	mu.Unlock()
	require.NoError(t, r.Stop())
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, names, "chat m1")
	require.Contains(t, names, "invoke_agent sessionflow")
	require.Contains(t, names, "RunActivity:CallModel")
}
