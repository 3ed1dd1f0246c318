package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// summarizer answers a summarisation request with its text; it fails the
// first fails calls with a retryable error, and counts its calls.
type summarizer struct {
	mu    sync.Mutex
	text  string
	fails int
	calls int
	reqs  []provider.Request
}

func (s *summarizer) Stream(_ context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		s.mu.Lock()
		s.calls++
		s.reqs = append(s.reqs, req)
		fail := s.calls <= s.fails
		s.mu.Unlock()
		if req.Purpose != provider.PurposeCompaction {
			yield(provider.Chunk{}, &provider.Error{Message: "not a summarisation"})
			return
		}
		if fail {
			yield(provider.Chunk{}, &provider.Error{Retryable: true, Status: 503, Message: "overloaded"})
			return
		}
		if yield(provider.Chunk{Type: provider.ChunkText, Delta: s.text}, nil) {
			yield(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishStop}, nil)
		}
	}
}

// turnsFixture is a fixture whose log holds n complete turns of a long
// question and answer each (from seq 3: the fixture's own turn 1 is
// closed first).
func turnsFixture(t *testing.T, n int, s *summarizer) *fixture {
	t.Helper()
	f := newFixture(t, nil)
	f.acts.Providers = provider.Set{"fake": s}
	long := strings.Repeat("many words ", 60)
	seq := int64(3)
	add := func(e session.Event) {
		f.append(e)
		seq++
	}
	add(ev(t, wire.TypeStepEnd, seq, `{"turn":1,"step":1}`))
	add(ev(t, wire.TypeTurnEnd, seq, `{"turn":1,"reason":{"kind":"completed"}}`))
	for turn := 2; turn < n+2; turn++ {
		add(ev(t, wire.TypeTurnStart, seq, fmt.Sprintf(`{"turn":%d}`, turn)))
		add(ev(t, wire.TypeStepStart, seq, fmt.Sprintf(`{"turn":%d,"step":1}`, turn)))
		add(surface(t, wire.TypeUserMessage, seq, fmt.Sprintf(`{"id":"u-%d","role":"user","content":[{"type":"text","text":"question %d %s"}],"source":{"kind":"user"}}`, turn, turn, long)))
		add(surface(t, wire.TypeAssistantMessage, seq, fmt.Sprintf(`{"turn":%d,"step":1,"message":{"id":"a-%d","role":"assistant","content":[{"type":"text","text":"answer %d %s"}],"source":{"kind":"model","provider":"fake","model":"m1"}}}`, turn, turn, turn, long)))
		add(ev(t, wire.TypeStepEnd, seq, fmt.Sprintf(`{"turn":%d,"step":1}`, turn)))
		add(ev(t, wire.TypeTurnEnd, seq, fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn)))
	}
	return f
}

func (f *fixture) compact(acts *agent.Activities, in agent.CompactInput) (agent.CompactResult, error) {
	v, err := f.env(acts).ExecuteActivity(wire.CompactActivity, in)
	if err != nil {
		return agent.CompactResult{}, err
	}
	var r agent.CompactResult
	require.NoError(f.t, v.Get(&r))
	return r, nil
}

func (f *fixture) manual(after int64) agent.CompactInput {
	return agent.CompactInput{Ref: f.hd.Ref(), Trigger: agent.TriggerManual, CommandID: "cmd-1", Provider: "fake", Model: "m1", After: after}
}

// withoutVolatile is the log's events with the compaction id, the
// checkpoint's message id and the times blanked.
func withoutVolatile(t *testing.T, evs []session.Event) []string {
	t.Helper()
	var id string
	var out []string
	for _, e := range evs {
		if e.Type == wire.TypeCompactionStart {
			var d struct {
				CompactionID string `json:"compactionId"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &d))
			id = d.CompactionID
		}
		s := string(e.Data)
		if id != "" {
			s = strings.ReplaceAll(s, id, "ID")
		}
		if i := strings.Index(s, `"id":"`); i >= 0 && e.Type == wire.TypeUserMessage && strings.Contains(s, `"plugin":"compact"`) {
			j := strings.Index(s[i+6:], `"`)
			s = s[:i+6] + "MSG" + s[i+6+j:]
		}
		op := ""
		if e.SurfaceOp != nil {
			b, _ := e.SurfaceOp.MarshalJSON()
			op = string(b)
		}
		out = append(out, fmt.Sprintf("%d %s %s %s %v", e.Seq, e.Type, s, op, e.SourceEventSeqs))
	}
	return out
}

// A manual compaction between turns stores one bracket: start (turn null,
// the command id), summary, the replacing user/message citing both and
// the shadowed nodes, end; the last node stays.
func TestCompactStoresOneBracket(t *testing.T) {
	s := &summarizer{text: "the gist"}
	f := turnsFixture(t, 3, s)
	next := int64(len(f.log()))
	res, err := f.compact(f.acts, f.manual(next))
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Equal(t, 1, s.calls)
	require.Equal(t, next+1, res.SummarySeq)
	require.Equal(t, next+4, res.NextSeq)
	evs := f.log()
	require.Equal(t, []string{"compaction/start", "compaction/summary", "user/message", "compaction/end"}, types(evs[next:]))
	got := withoutVolatile(t, evs[next:])
	require.Equal(t, fmt.Sprintf(`%d compaction/start {"compactionId":"ID","sourceCommandId":"cmd-1","turn":null}  []`, next), got[0])
	require.Equal(t, fmt.Sprintf(`%d compaction/end {"compactionId":"ID","sourceCommandId":"cmd-1","turn":null}  []`, next+3), got[3])
	// The nodes: the fixture's "hello" (seq 1), then a question and an
	// answer per turn; all but the last answer are shadowed.
	shadowed := []int64{1, 7, 8, 13, 14, 19}
	var sum struct {
		Summary            []provider.Block `json:"summary"`
		ShadowedRange      struct{ Start, End int64 }
		ShadowedSeqs       []int64 `json:"shadowedSeqs"`
		ShadowedTokenCount int     `json:"shadowedTokenCount"`
		Provider, Model    string
		MaxTokens          int64 `json:"maxTokens"`
		LLMStreamCall      bool  `json:"llmStreamCall"`
	}
	require.NoError(t, json.Unmarshal(evs[next+1].Data, &sum))
	require.Equal(t, shadowed, sum.ShadowedSeqs)
	require.Equal(t, int64(1), sum.ShadowedRange.Start)
	require.Equal(t, int64(19), sum.ShadowedRange.End)
	require.Equal(t, []provider.Block{{Type: "text", Text: "the gist"}}, sum.Summary)
	require.True(t, sum.LLMStreamCall)
	require.Equal(t, int64(8192), sum.MaxTokens)
	require.Equal(t, "fake", sum.Provider)
	require.Equal(t, res.ShadowedTokens, sum.ShadowedTokenCount)
	require.Equal(t, len(shadowed), res.Shadowed)
	rep := evs[next+2]
	require.Equal(t, append([]int64{next, next + 1}, shadowed...), rep.SourceEventSeqs)
	require.Equal(t, &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: 1, EndSeq: 19, Spelling: rep.SurfaceOp.Spelling}, rep.SurfaceOp)
	require.Contains(t, got[2], `{"content":[{"type":"text","text":"This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint.\n\n<compacted-summary>"},{"type":"text","text":"the gist"},{"type":"text","text":"</compacted-summary>"}],"source":{"kind":"plugin","plugin":"compact","compactionId":"ID","sourceCommandId":"cmd-1"},"role":"user","id":"MSG"}`)
	// The summarisation request: the shadowed messages, then the
	// instruction, with the conversation's system prompt.
	req := s.reqs[0]
	require.Equal(t, "be brief", req.System)
	require.Len(t, req.Messages, len(shadowed)+1)
	require.True(t, strings.HasPrefix(req.Messages[len(shadowed)].Content[0].Text, "You are now acting as a compaction engine"))
	// The conversation sent next: the checkpoint, then the last answer.
	conv, err := agent.Conversation(evs)
	require.NoError(t, err)
	require.Len(t, conv, 2)
	require.Equal(t, "the gist", conv[0].Content[1].Text)
}

// A worker lost at any point of a compaction: its activity's retry (the
// same After) continues from what the log holds, and the session ends up
// with exactly one complete bracket, one summary, one replacement.
func TestCompactRetryContinuesTheBracket(t *testing.T) {
	s := &summarizer{text: "the gist"}
	ref := turnsFixture(t, 3, s)
	next := int64(len(ref.log()))
	_, err := ref.compact(ref.acts, ref.manual(next))
	require.NoError(t, err)
	want := withoutVolatile(t, ref.log())
	whole := ref.log()[next:]

	for cut := 1; cut <= 4; cut++ {
		t.Run(fmt.Sprintf("after %d of 4", cut), func(t *testing.T) {
			s := &summarizer{text: "the gist"}
			f := turnsFixture(t, 3, s)
			f.append(session.CloneEvents(whole[:cut])...)
			res, err := f.compact(f.acts, f.manual(next))
			require.NoError(t, err)
			require.Equal(t, next+1, res.SummarySeq)
			require.Equal(t, want, withoutVolatile(t, f.log()))
			calls := 0
			if cut == 1 {
				calls = 1 // only the start was stored: the summary is made again
			}
			require.Equal(t, calls, s.calls)
		})
	}
}

// A summarisation that fails retryably leaves the bracket open for the
// activity's retry, which completes it: one start.
func TestCompactRetryableSummaryFailure(t *testing.T) {
	s := &summarizer{text: "the gist", fails: 1}
	f := turnsFixture(t, 3, s)
	next := int64(len(f.log()))
	_, err := f.compact(f.acts, f.manual(next))
	require.Error(t, err)
	require.Equal(t, []string{"compaction/start"}, types(f.log()[next:]))
	res, err := f.compact(f.acts, f.manual(next))
	require.NoError(t, err)
	require.Equal(t, next+1, res.SummarySeq)
	require.Equal(t, []string{"compaction/start", "compaction/summary", "user/message", "compaction/end"}, types(f.log()[next:]))
}

// A summary not smaller than what it replaces fails the compaction: one
// compaction/end with the error, and the conversation unchanged.
func TestCompactSummaryNotSmallerFails(t *testing.T) {
	s := &summarizer{text: strings.Repeat("verbose ", 2000)}
	f := turnsFixture(t, 3, s)
	next := int64(len(f.log()))
	before, err := agent.Conversation(f.log())
	require.NoError(t, err)
	res, err := f.compact(f.acts, f.manual(next))
	require.NoError(t, err)
	require.Equal(t, int64(-1), res.SummarySeq)
	require.Contains(t, res.Error, "summary is not smaller than the shadowed content")
	evs := f.log()
	require.Equal(t, []string{"compaction/start", "compaction/end"}, types(evs[next:]))
	require.Contains(t, string(evs[next+1].Data), `,"turn":null,"error":"summary is not smaller than the shadowed content (`)
	after, err := agent.Conversation(evs)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

// A span whose summarisation would not fit the window is compacted in
// pieces: each call compacts the longest prefix that fits, until the
// whole span is compacted. The conversation of ten windows' worth ends
// below the window, and no summarisation request exceeded it.
func TestCompactTenWindowsInPieces(t *testing.T) {
	s := &summarizer{text: "gist"}
	f := turnsFixture(t, 40, s)
	const window = 1300
	before, err := agent.Conversation(f.log())
	require.NoError(t, err)
	total := 0
	for _, m := range before {
		total += provider.EstimateMessage(m)
	}
	require.Greater(t, total, 10*window, "ten windows' worth")
	in := f.manual(0)
	in.ContextWindow = window
	pieces := 0
	for {
		in.After = int64(len(f.log()))
		res, err := f.compact(f.acts, in)
		require.NoError(t, err)
		require.Empty(t, res.Error)
		pieces++
		if res.Done {
			require.Less(t, res.Tokens, window)
			break
		}
		require.Less(t, pieces, 100)
	}
	require.Greater(t, pieces, 10)
	for _, r := range s.reqs {
		require.LessOrEqual(t, provider.EstimateRequest(r)+int(r.MaxTokens), window)
	}
	// Every original event is still in the log.
	evs := f.log()
	n := 0
	for _, e := range evs {
		if e.Type == wire.TypeUserMessage && strings.Contains(string(e.Data), "question ") {
			n++
		}
	}
	require.Equal(t, 40, n)
}

// EndTurn closes a compaction its turn left open before the turn's end.
func TestEndTurnClosesAnOpenCompaction(t *testing.T) {
	f := newFixture(t, nil)
	f.append(ev(t, wire.TypeCompactionStart, 3, `{"compactionId":"c-1","turn":1}`))
	_, err := f.endTurn(f.acts, agent.EndTurnInput{Ref: f.hd.Ref(), Turn: 1, Step: 1, MessageSeq: -1, Reason: wire.TurnEndReason{Kind: "error"}})
	require.NoError(t, err)
	evs := f.log()
	require.Equal(t, []string{"compaction/end", "step/end", "turn/end"}, types(evs[4:]))
	require.Equal(t, `{"compactionId":"c-1","turn":1,"error":"the turn ended before its compaction finished"}`, string(evs[4].Data))
}

// Tool results over the pruning budget are pruned before a compaction
// summarises, as the harness's pruner does: compaction/prune, then the
// pruned tool/result replacing the original, its head and tail kept around
// the marker; the original stays in the log.
func TestCompactPrunesOversizedToolResults(t *testing.T) {
	s := &summarizer{text: "gist"}
	f := newFixture(t, nil)
	f.acts.Providers = provider.Set{"fake": s}
	big := "<a&" + strings.Repeat("a", 4093) + strings.Repeat("m", 10000) + strings.Repeat("z", 1024)
	bigJSON, err := session.MarshalData(big)
	require.NoError(t, err)
	f.append(
		surface(t, wire.TypeAssistantMessage, 3, `{"turn":1,"step":1,"message":{"id":"a-1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read_file","arguments":"{}"}],"source":{"kind":"model","provider":"fake","model":"m1"}}}`),
		ev(t, wire.TypeToolCall, 4, `{"turn":1,"step":1,"callId":"c1","name":"read_file","arguments":"{}"}`),
		surface(t, wire.TypeToolResult, 5, `{"turn":1,"step":1,"message":{"id":"r-1","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":`+string(bigJSON)+`}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}}`),
		ev(t, wire.TypeStepEnd, 6, `{"turn":1,"step":1}`),
		ev(t, wire.TypeStepStart, 7, `{"turn":1,"step":2}`),
	)
	in := agent.CompactInput{Ref: f.hd.Ref(), Turn: 1, Trigger: agent.TriggerOverflow, Provider: "fake", Model: "m1", After: 8}
	res, err := f.compact(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, 1, res.Pruned)
	evs := f.log()
	require.Equal(t, []string{"compaction/prune", "tool/result"}, types(evs[8:10]))
	var prune struct {
		ShadowedRange      struct{ Start, End int64 }
		ShadowedSeqs       []int64 `json:"shadowedSeqs"`
		ShadowedTokenCount int     `json:"shadowedTokenCount"`
	}
	require.NoError(t, json.Unmarshal(evs[8].Data, &prune))
	require.Equal(t, []int64{5}, prune.ShadowedSeqs)
	require.Equal(t, int64(5), prune.ShadowedRange.Start)
	require.Equal(t, int64(5), prune.ShadowedRange.End)
	require.Equal(t, (len(big)+3)/4+4+4+4, prune.ShadowedTokenCount)
	rep := evs[9]
	require.Equal(t, &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: 5, EndSeq: 5, Spelling: rep.SurfaceOp.Spelling}, rep.SurfaceOp)
	require.Equal(t, []int64{5}, rep.SourceEventSeqs)
	pruned := "<a&" + strings.Repeat("a", 4093) + "\n\n[... tool result middle pruned ...]\n\n" + strings.Repeat("z", 1024)
	prunedJSON, err := session.MarshalData(pruned)
	require.NoError(t, err)
	require.Equal(t, `{"turn":1,"step":1,"message":{"id":"r-1","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":`+string(prunedJSON)+`}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}}`, string(rep.Data))
	require.Equal(t, big, gjsonText(t, evs[5]), "the original stays in the log")
	conv, err := agent.Conversation(evs)
	require.NoError(t, err)
	for _, m := range conv {
		for _, b := range m.Content {
			for _, c := range b.Content {
				require.NotEqual(t, big, c.Text, "the model no longer gets the original")
			}
		}
	}
}

func gjsonText(t *testing.T, e session.Event) string {
	t.Helper()
	var d struct {
		Message struct {
			Content []struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"content"`
		} `json:"message"`
	}
	require.NoError(t, json.Unmarshal(e.Data, &d))
	return d.Message.Content[0].Content[0].Text
}

// CallModel measures the step's request: at or above the threshold of the
// window it asks for a compaction and calls nothing; with pressureChecked
// it calls whatever the size; a context-exceeded refusal is stored as the
// call's finish and asked again without a call on a retry.
func TestCallModelAsksForCompaction(t *testing.T) {
	f := newFixture(t, nil, answer("fine"))
	in := f.modelInput(1, 1)
	in.Compacts, in.ContextWindow = true, 20
	res, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, agent.TriggerPressure, res.Compact)
	require.Equal(t, int64(-1), res.MessageSeq)
	require.Equal(t, int64(20), res.Window)
	require.GreaterOrEqual(t, res.Tokens, 16)
	require.Zero(t, f.prov.calls(), "no model call")
	require.Len(t, f.log(), 3, "nothing stored")

	in.PressureChecked = true
	res, err = f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Empty(t, res.Compact)
	require.GreaterOrEqual(t, res.MessageSeq, int64(3))
	require.Equal(t, 1, f.prov.calls())
	var rc struct {
		ContextWindow int64 `json:"contextWindow"`
	}
	require.NoError(t, json.Unmarshal(f.log()[3].Data, &rc))
	require.Equal(t, int64(20), rc.ContextWindow, "request/context records the window")
}

func TestCallModelStoresAContextExceededRefusal(t *testing.T) {
	refusal := &provider.Error{Status: 400, Code: provider.CodeContextWindowExceeded, Message: "prompt is too long: 9 tokens > 5 maximum"}
	f := newFixture(t, nil, response{fail: refusal})
	in := f.modelInput(1, 1)
	in.Compacts = true
	res, err := f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, agent.TriggerOverflow, res.Compact)
	require.Equal(t, "prompt is too long: 9 tokens > 5 maximum", res.Failure.Message)
	evs := f.log()
	require.Equal(t, []string{"request/context", "assistant/chunk"}, types(evs[3:]))
	require.Equal(t, `{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"error","failure":{"message":"prompt is too long: 9 tokens > 5 maximum","code":"CONTEXT_WINDOW_EXCEEDED"}}}}`, string(evs[4].Data))
	// The activity's retry finds it and calls nothing.
	res, err = f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, agent.TriggerOverflow, res.Compact)
	require.Equal(t, 1, f.prov.calls())
	require.Len(t, f.log(), 5)
	// Once the workflow compacted for it, the call is made again.
	in.Overflows = 1
	res, err = f.callModel(f.acts, in)
	require.NoError(t, err)
	require.Equal(t, agent.TriggerOverflow, res.Compact, "refused again: the workflow decides")
	require.Equal(t, 2, f.prov.calls())
	require.Equal(t, []string{"request/context", "assistant/chunk", "assistant/chunk"}, types(f.log()[3:]))
	// Without compacts, a refusal is a refusal and stores nothing.
	g := newFixture(t, nil, response{fail: refusal})
	_, err = g.callModel(g.acts, g.modelInput(1, 1))
	require.Error(t, err)
	require.Len(t, g.log(), 3)
}

// A compaction never separates a tool call from its result: when the
// last node kept is a tool result, its assistant message is kept with it.
func TestCompactKeepsAToolCallWithItsResult(t *testing.T) {
	s := &summarizer{text: "gist"}
	f := turnsFixture(t, 2, s)
	next := int64(len(f.log()))
	long := strings.Repeat("many words ", 60)
	f.append(
		ev(t, wire.TypeTurnStart, next, `{"turn":4}`),
		ev(t, wire.TypeStepStart, next+1, `{"turn":4,"step":1}`),
		surface(t, wire.TypeUserMessage, next+2, `{"id":"u-4","role":"user","content":[{"type":"text","text":"read it"}],"source":{"kind":"user"}}`),
		surface(t, wire.TypeAssistantMessage, next+3, `{"turn":4,"step":1,"message":{"id":"a-4","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read_file","arguments":"{}"}],"source":{"kind":"model","provider":"fake","model":"m1"}}}`),
		ev(t, wire.TypeToolCall, next+4, `{"turn":4,"step":1,"callId":"c1","name":"read_file","arguments":"{}"}`),
		surface(t, wire.TypeToolResult, next+5, `{"turn":4,"step":1,"message":{"id":"r-4","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"`+long+`"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}}`),
		ev(t, wire.TypeStepEnd, next+6, `{"turn":4,"step":1}`),
		ev(t, wire.TypeTurnEnd, next+7, `{"turn":4,"reason":{"kind":"completed"}}`),
	)
	after := next + 8
	res, err := f.compact(f.acts, f.manual(after))
	require.NoError(t, err)
	require.Equal(t, after+1, res.SummarySeq)
	var sum struct {
		ShadowedSeqs []int64 `json:"shadowedSeqs"`
	}
	require.NoError(t, json.Unmarshal(f.log()[after+1].Data, &sum))
	require.Equal(t, next+2, sum.ShadowedSeqs[len(sum.ShadowedSeqs)-1], "the span ends before the assistant message whose call's result is kept")
	conv, err := agent.Conversation(f.log())
	require.NoError(t, err)
	require.Len(t, conv, 3, "the checkpoint, the tool call, its result")
	require.Equal(t, provider.BlockToolCall, conv[1].Content[0].Type)
	require.Equal(t, provider.BlockToolResult, conv[2].Content[0].Type)
}

// The summarisation call has its own chat span, marked with its purpose.
func TestCompactSummaryCallIsTracedWithItsPurpose(t *testing.T) {
	s := &summarizer{text: "the gist"}
	f := turnsFixture(t, 3, s)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f.acts.TracerProvider = tp
	_, err := f.compact(f.acts, f.manual(int64(len(f.log()))))
	require.NoError(t, err)
	span := spanNamed(t, exp.GetSpans(), "chat m1")
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range span.Attributes {
		attrs[kv.Key] = kv.Value
	}
	require.Equal(t, "compaction", attrs["sessionflow.purpose"].AsString())
	require.Equal(t, "chat", attrs["gen_ai.operation.name"].AsString())
	require.Equal(t, int64(8192), attrs["gen_ai.request.max_tokens"].AsInt64())
}

// The request is measured from the provider's usage of the last call
// while the surface is unchanged since; after a compaction replaced part
// of it, from the estimate, so a compaction under pressure is not asked
// again for a conversation it already made small.
func TestPressureUsesUsageUntilTheSurfaceIsReplaced(t *testing.T) {
	s := &summarizer{text: "gist"}
	f := turnsFixture(t, 3, s)
	next := int64(len(f.log()))
	f.append(
		ev(t, wire.TypeTurnStart, next, `{"turn":5}`),
		ev(t, wire.TypeStepStart, next+1, `{"turn":5,"step":1}`),
		surface(t, wire.TypeUserMessage, next+2, `{"id":"u-5","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`),
		ev(t, wire.TypeRequestContext, next+3, `{"provider":"fake","model":"m1","contextWindow":1500}`),
		surface(t, wire.TypeAssistantMessage, next+4, `{"turn":5,"step":1,"message":{"id":"a-5","role":"assistant","content":[{"type":"text","text":"hello"}],"source":{"kind":"model","provider":"fake","model":"m1"}},"usage":{"inputTokens":1300,"outputTokens":10}}`),
		ev(t, wire.TypeStepEnd, next+5, `{"turn":5,"step":1}`),
		ev(t, wire.TypeStepStart, next+6, `{"turn":5,"step":2}`),
	)
	in := agent.CompactInput{Ref: f.hd.Ref(), Turn: 5, Trigger: agent.TriggerPressure, Provider: "fake", Model: "m1", ContextWindow: 1500, After: next + 7}
	res, err := f.compact(f.acts, in)
	require.NoError(t, err)
	require.True(t, res.SummarySeq >= 0, "above 0.8 of the window by the provider's usage (the estimate is far below): compacted %+v", res)
	require.True(t, res.Done, "after the compaction the request is estimated, below the threshold: %+v", res)
	require.Less(t, res.Tokens, 1200)
	require.Equal(t, 1, s.calls)
}
