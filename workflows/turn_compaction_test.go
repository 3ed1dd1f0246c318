package workflows_test

// Compaction in the agent loop (docs/LIFECYCLE.md "Compaction"): under
// pressure before a step, after a context-exceeded refusal, and on request
// (the Compact update), over the real agent activities and a model with a
// small context window.

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// windowModel is a model with a context window: it refuses a request whose
// estimate exceeds it with the context-exceeded code, answers a
// summarisation with a short summary, and any other request with answer.
type windowModel struct {
	window int
	answer string
	// refuseFirst refuses the first ordinary request whatever its size.
	refuseFirst bool

	mu        sync.Mutex
	maxTokens int
	calls     int
	summaries int
	refused   int
	requests  []provider.Request
}

func (m *windowModel) Stream(_ context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		n := provider.EstimateRequest(req)
		m.mu.Lock()
		m.requests = append(m.requests, req)
		refuse := n > m.window || (m.refuseFirst && req.Purpose == "" && m.calls == 0)
		if req.Purpose == "" {
			m.calls++
		}
		if refuse {
			m.refused++
		} else {
			m.maxTokens = max(m.maxTokens, n)
		}
		summary := req.Purpose == provider.PurposeCompaction
		if summary && !refuse {
			m.summaries++
		}
		k := m.summaries
		m.mu.Unlock()
		if refuse {
			yield(provider.Chunk{}, &provider.Error{Status: 400, Code: provider.CodeContextWindowExceeded,
				Message: fmt.Sprintf("request of %d tokens exceeds the window of %d", n, m.window)})
			return
		}
		text := m.answer
		if summary {
			text = fmt.Sprintf("summary %d of %d messages", k, len(req.Messages)-1)
		}
		if !yield(provider.Chunk{Type: provider.ChunkText, Delta: text}, nil) {
			return
		}
		yield(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishStop}, nil)
	}
}

func (m *windowModel) stats() (maxTokens, calls, summaries, refused int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxTokens, m.calls, m.summaries, m.refused
}

func windowRoute(window int) *wire.AgentOptions {
	o := sessiontest.Route()
	w := float64(window)
	o.ContextWindow = &w
	return o
}

// brackets checks the compaction events of evs against the harness's rules
// (one open bracket at a time, inside its turn, a summary followed by the
// replacing user/message citing it, an end naming the start) and returns
// the brackets: for each, its summary's seq or -1 and its error.
type bracketSeen struct {
	start, summary, end int64
	turn                *int64
	err                 string
}

func brackets(t *testing.T, evs []session.Event) []bracketSeen {
	t.Helper()
	var out []bracketSeen
	var open *bracketSeen
	var openTurn int64
	var id string
	for i, e := range evs {
		switch e.Type {
		case wire.TypeTurnStart:
			require.Nil(t, open, "turn/start@%d inside a compaction", e.Seq)
			ts, err := e.TurnStart()
			require.NoError(t, err)
			openTurn = ts.Turn
		case wire.TypeTurnEnd:
			require.Nil(t, open, "turn/end@%d crosses an open compaction", e.Seq)
			openTurn = 0
		case wire.TypeCompactionStart:
			require.Nil(t, open, "compaction/start@%d while one is open", e.Seq)
			var d struct {
				CompactionID string `json:"compactionId"`
				Turn         *int64 `json:"turn"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &d))
			require.Contains(t, string(e.Data), `"turn":`)
			if d.Turn == nil {
				require.Zero(t, openTurn, "a standalone compaction inside turn %d", openTurn)
			} else {
				require.Equal(t, openTurn, *d.Turn)
			}
			open, id = &bracketSeen{start: e.Seq, summary: -1, end: -1, turn: d.Turn}, d.CompactionID
		case wire.TypeCompactionSummary:
			require.NotNil(t, open, "compaction/summary@%d without a start", e.Seq)
			require.Equal(t, int64(-1), open.summary, "a second summary@%d", e.Seq)
			var d struct {
				CompactionID  string `json:"compactionId"`
				ShadowedRange struct{ Start, End int64 }
				ShadowedSeqs  []int64 `json:"shadowedSeqs"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &d))
			require.Equal(t, id, d.CompactionID)
			require.NotEmpty(t, d.ShadowedSeqs)
			require.Equal(t, d.ShadowedSeqs[0], d.ShadowedRange.Start)
			require.Equal(t, d.ShadowedSeqs[len(d.ShadowedSeqs)-1], d.ShadowedRange.End)
			next := evs[i+1]
			require.Equal(t, wire.TypeUserMessage, next.Type, "the replacement follows the summary")
			require.NotNil(t, next.SurfaceOp)
			require.Equal(t, session.SurfaceReplace, next.SurfaceOp.Op)
			require.Equal(t, d.ShadowedRange.Start, next.SurfaceOp.StartSeq)
			require.Equal(t, d.ShadowedRange.End, next.SurfaceOp.EndSeq)
			require.Equal(t, append([]int64{open.start, e.Seq}, d.ShadowedSeqs...), next.SourceEventSeqs)
			require.Contains(t, string(next.Data), `"source":{"kind":"plugin","plugin":"compact","compactionId":"`+id+`"`)
			open.summary = e.Seq
		case wire.TypeCompactionEnd:
			require.NotNil(t, open, "compaction/end@%d without a start", e.Seq)
			var d struct {
				CompactionID string `json:"compactionId"`
				Turn         *int64 `json:"turn"`
				Error        string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &d))
			require.Equal(t, id, d.CompactionID)
			require.Equal(t, open.turn, d.Turn)
			if d.Error == "" {
				require.NotEqual(t, int64(-1), open.summary, "a successful end without a summary")
			}
			open.end, open.err = e.Seq, d.Error
			out = append(out, *open)
			open = nil
		}
	}
	require.Nil(t, open, "a compaction left open")
	return out
}

// Under pressure: a conversation of many turns against a window that holds
// a few of them compacts before the steps that would exceed the threshold;
// no request exceeds the window; every original event stays in the log.
func TestTurnCompactsUnderPressure(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("cp")
	m := &windowModel{window: 2400, answer: strings.Repeat("answer words ", 80)}
	acts := sessiontest.AgentActivities(h, provider.Set{"scripted": m})
	h.Env.RegisterActivity(acts)
	var inputs []wire.InputRequest
	for i := range 12 {
		inputs = append(inputs, sessiontest.Prompt(fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 120))))
	}
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "cp", AgentOptions: windowRoute(2400)}, inputs...)
	sessiontest.RequireBalanced(t, evs)
	bs := brackets(t, evs)
	require.NotEmpty(t, bs)
	for _, b := range bs {
		require.Empty(t, b.err)
		require.NotNil(t, b.turn, "a compaction under pressure belongs to its turn")
	}
	maxTokens, calls, summaries, refused := m.stats()
	require.Zero(t, refused, "no request exceeded the window")
	require.LessOrEqual(t, maxTokens, 2000)
	require.Equal(t, len(bs), summaries)
	require.Equal(t, 12, calls)
	// Every input is still in the log.
	n := 0
	for _, e := range evs {
		if e.Type == wire.TypeUserMessage && strings.Contains(string(e.Data), "question ") {
			n++
		}
	}
	require.Equal(t, 12, n)
	require.Equal(t, []string{"completed"}, dedupe(sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs))))
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

func noAuto(o *wire.AgentOptions) *wire.AgentOptions {
	f := false
	o.AutoCompact = &f
	return o
}

// A context-exceeded refusal is stored as the call's finish, compacted in
// the same step (the span before it, no tail kept) and the step's call made
// once more, as the harness recovers (its compaction-recovery snapshot).
func TestTurnRecoversFromContextOverflow(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("co")
	m := &windowModel{window: 2400, answer: strings.Repeat("answer words ", 80)}
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"scripted": m}))
	var inputs []wire.InputRequest
	for i := range 6 {
		inputs = append(inputs, sessiontest.Prompt(fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 120))))
	}
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "co", AgentOptions: noAuto(windowRoute(2400))}, inputs...)
	sessiontest.RequireBalanced(t, evs)
	bs := brackets(t, evs)
	require.NotEmpty(t, bs)
	_, _, _, refused := m.stats()
	var recoveries []bracketSeen
	for _, b := range bs {
		require.Empty(t, b.err)
		if evs[b.start-1].Type == wire.TypeAssistantChunk {
			recoveries = append(recoveries, b)
		}
	}
	require.NotEmpty(t, recoveries)
	require.Equal(t, len(recoveries), refused, "each refusal recovered from")
	for i, b := range bs {
		if i+1 < len(bs) && bs[i+1].start == b.end+1 {
			continue // a piece: the next bracket goes on with the span
		}
		// The refusal's finish chunk before the recovery's first bracket,
		// the step's message just after its last one, in the same step.
		first := b
		for j := i; j > 0 && bs[j-1].end+1 == bs[j].start; j-- {
			first = bs[j-1]
		}
		fin := evs[first.start-1]
		require.Equal(t, wire.TypeAssistantChunk, fin.Type)
		require.Contains(t, string(fin.Data), `"chunk":{"type":"finish","reason":{"kind":"error","failure":{"message":"request of `)
		require.Contains(t, string(fin.Data), `"code":"CONTEXT_WINDOW_EXCEEDED"}}}`)
		var step struct{ Turn, Step int64 }
		require.NoError(t, json.Unmarshal(fin.Data, &step))
		k := b.end + 1
		for evs[k].Type != wire.TypeAssistantMessage {
			require.Equal(t, wire.TypeAssistantChunk, evs[k].Type, "only the retried call's chunks follow the bracket")
			k++
		}
		msg := assistantOf(t, evs[k])
		require.Equal(t, step.Turn, msg.Turn)
		require.Equal(t, step.Step, msg.Step)
	}
	require.Equal(t, []string{"completed"}, dedupe(sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs))))
}

// A refusal compaction cannot help (nothing before the message to
// compact) ends the turn with the provider's refusal.
func TestTurnOverflowWithNothingToCompactEndsInError(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("cx")
	m := &windowModel{window: 200, answer: "ok"}
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"scripted": m}))
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "cx", AgentOptions: noAuto(windowRoute(200))},
		sessiontest.Prompt(strings.Repeat("too long ", 200)))
	sessiontest.RequireBalanced(t, evs)
	require.Empty(t, brackets(t, evs))
	ends := sessiontest.TurnEnds(t, evs)
	require.Equal(t, []string{"error"}, sessiontest.ReasonKinds(ends))
	var f struct{ Message, Code string }
	require.NoError(t, json.Unmarshal(ends[0].Error, &f))
	require.Equal(t, "CONTEXT_WINDOW_EXCEEDED", f.Code)
	require.Contains(t, f.Message, "exceeds the window of 200")
}

// The Compact update between turns: command/run, a standalone bracket
// (turn null), command/done with the harness's words; the next turn sends
// the compacted conversation.
func TestCompactUpdateBetweenTurns(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("cm")
	m := &windowModel{window: 100000, answer: strings.Repeat("answer words ", 80)}
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"scripted": m}))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var fus []*sessiontest.Result
	for i := range 3 {
		at := time.Duration(i+2) * time.Second
		fus = append(fus, h.UpdateAt(at, "", wire.UpdateFollowup, sessiontest.Prompt(fmt.Sprintf("question %d %s", i, strings.Repeat("words ", 100)))))
		h.WaitFor(at, fmt.Sprintf("turn %d ended", i+1), h.TurnsEnded(i+1))
	}
	compact := h.UpdateAt(5*time.Second, "", wire.UpdateCompact, wire.CompactRequest{CommandID: "compact-1"})
	after := h.UpdateAt(6*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("after"))
	h.WaitFor(6*time.Second, "turn 4 ended", h.TurnsEnded(4))
	disp := h.UpdateAt(7*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "cm", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	for _, fu := range fus {
		fu.OK(t)
	}
	after.OK(t)
	disp.OK(t)
	var res wire.CompactResult
	compact.Decode(t, &res)
	require.True(t, res.Compacted)
	require.Equal(t, "compact-1", res.CommandID)
	require.Equal(t, fmt.Sprintf("Compacted %d history items (~%d tokens).", res.Shadowed, res.ShadowedTokens), res.Text)

	evs := sessiontest.Stored(t, h.Store, "cm")
	sessiontest.RequireBalanced(t, evs)
	bs := brackets(t, evs)
	require.Len(t, bs, 1)
	require.Nil(t, bs[0].turn)
	run, done := evs[bs[0].start-1], evs[bs[0].end+1]
	require.Equal(t, wire.TypeCommandRun, run.Type)
	require.Equal(t, `{"commandId":"compact-1","name":"compact","args":"","source":{"kind":"user"}}`, string(run.Data))
	require.Equal(t, wire.TypeCommandDone, done.Type)
	require.Equal(t, fmt.Sprintf(`{"commandId":"compact-1","kind":"success","text":%q,"sourceEventSeq":%d}`, res.Text, bs[0].summary), string(done.Data))
	// Retained nothing: every message before the command is shadowed, and
	// the next turn's request starts with the checkpoint.
	last := m.requests[len(m.requests)-1]
	require.Equal(t, provider.RoleUser, last.Messages[0].Role)
	require.True(t, strings.HasPrefix(last.Messages[0].Content[0].Text, "This is an automatically generated checkpoint"), last.Messages[0].Content[0].Text)
	require.Equal(t, "<compacted-summary>", last.Messages[0].Content[0].Text[len(last.Messages[0].Content[0].Text)-len("<compacted-summary>"):])
	require.Len(t, last.Messages, 3, "the checkpoint, the last answer (the harness keeps the last node), the new input")
	require.Equal(t, provider.RoleAssistant, last.Messages[1].Role)
	require.Equal(t, "after", last.Messages[2].Content[0].Text)
}

// A Compact update done in pieces reports the whole span: every original
// node it shadowed and their tokens, each earlier piece's checkpoint
// (shadowed again by the next piece) not counted.
func TestCompactUpdateInPiecesReportsTheWholeSpan(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("cq")
	m := &windowModel{window: 1 << 30, answer: strings.Repeat("answer words ", 80)}
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"scripted": m}))
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var fus []*sessiontest.Result
	const turns = 8
	for i := range turns {
		at := time.Duration(i+2) * time.Second
		fus = append(fus, h.UpdateAt(at, "", wire.UpdateFollowup, sessiontest.Prompt(fmt.Sprintf("question %d %s", i, strings.Repeat("words ", 100)))))
		h.WaitFor(at, fmt.Sprintf("turn %d ended", i+1), h.TurnsEnded(i+1))
	}
	compact := h.UpdateAt(turns*time.Second+2*time.Second, "", wire.UpdateCompact, wire.CompactRequest{CommandID: "cmd-p"})
	disp := h.UpdateAt(turns*time.Second+3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "cq", AgentOptions: noAuto(windowRoute(2500))})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	for _, fu := range fus {
		fu.OK(t)
	}
	disp.OK(t)
	var res wire.CompactResult
	compact.Decode(t, &res)
	evs := sessiontest.Stored(t, h.Store, "cq")
	bs := brackets(t, evs)
	require.Greater(t, len(bs), 1, "pieces")
	run := int64(-1)
	for _, e := range evs {
		if e.Type == wire.TypeCommandRun {
			run = e.Seq
		}
	}
	before, err := agent.Conversation(evs[:run])
	require.NoError(t, err)
	tokens := 0
	for _, msg := range before[:len(before)-1] {
		tokens += provider.EstimateMessage(msg)
	}
	require.Equal(t, 2*turns-1, res.Shadowed, "every node but the last")
	require.Equal(t, tokens, res.ShadowedTokens)
	require.Equal(t, fmt.Sprintf("Compacted %d history items (~%d tokens).", 2*turns-1, tokens), res.Text)
}

// verboseModel calls list_dir twice after an input asking for tools, then
// answers; its summaries are longer than any span, so every compaction
// fails.
type verboseModel struct {
	mu   sync.Mutex
	sums int
}

func (m *verboseModel) Stream(_ context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		if req.Purpose == provider.PurposeCompaction {
			m.mu.Lock()
			m.sums++
			m.mu.Unlock()
			if yield(provider.Chunk{Type: provider.ChunkText, Delta: strings.Repeat("verbose ", 4000)}, nil) {
				yield(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishStop}, nil)
			}
			return
		}
		calls := 0
		for i := len(req.Messages) - 1; i >= 0; i-- {
			msg := req.Messages[i]
			if msg.Role == provider.RoleAssistant {
				calls++
				continue
			}
			if msg.Content[0].Type == provider.BlockText {
				if !strings.HasPrefix(msg.Content[0].Text, "use tools") {
					calls = 2
				}
				break
			}
		}
		if calls < 2 {
			if yield(provider.Chunk{Type: provider.ChunkToolCall, ID: fmt.Sprintf("c%d-%d", len(req.Messages), calls), Name: "list_dir", Delta: "{}"}, nil) {
				yield(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishToolCalls}, nil)
			}
			return
		}
		if yield(provider.Chunk{Type: provider.ChunkText, Delta: "done"}, nil) {
			yield(provider.Chunk{Type: provider.ChunkFinish, Finish: provider.FinishStop}, nil)
		}
	}
}

// A compaction under pressure that fails (its summary is not smaller) is
// tried once in a turn: the turn's later steps go on without measuring.
func TestTurnPressureFailureIsTriedOncePerTurn(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("cv")
	m := &verboseModel{}
	acts := sessiontest.AgentActivities(h, provider.Set{"scripted": m})
	acts.Tools = nil // list_dir answers "unknown tool": the steps go on
	h.Env.RegisterActivity(acts)
	long := strings.Repeat("context ", 500)
	evs := h.RunTurns(workflows.CreateSessionRequest{SessionID: "cv", AgentOptions: windowRoute(2400), Meta: &wire.SessionMeta{Cwd: t.TempDir()}},
		sessiontest.Prompt("first "+long), sessiontest.Prompt("use tools "+long))
	sessiontest.RequireBalanced(t, evs)
	bs := brackets(t, evs)
	require.Len(t, bs, 1, "one failed compaction in the turn of three steps")
	require.Contains(t, bs[0].err, "summary is not smaller than the shadowed content")
	require.Equal(t, int64(2), *bs[0].turn)
	require.Equal(t, 1, m.sums)
	steps := 0
	for _, e := range evs {
		if e.Type == wire.TypeStepStart {
			steps++
		}
	}
	require.Equal(t, 4, steps, "one step, then three")
	require.Equal(t, []string{"completed", "completed"}, sessiontest.ReasonKinds(sessiontest.TurnEnds(t, evs)))
}

// An Append that leaves a compaction open is refused in a session whose
// agent runs its turns: the agent's next turn/start would cross it.
func TestAppendLeavingACompactionOpenIsRefused(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("ca")
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"scripted": &windowModel{window: 1 << 20, answer: "ok"}}))
	start, err := session.NewEvent(wire.TypeCompactionStart, 0, 1, json.RawMessage(`{"compactionId":"c1","turn":null}`))
	require.NoError(t, err)
	end, err := session.NewEvent(wire.TypeCompactionEnd, 1, 1, json.RawMessage(`{"compactionId":"c1","turn":null,"error":"nothing"}`))
	require.NoError(t, err)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	open := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{start}})
	whole := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: []session.Event{start, end}})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "ca", AgentOptions: sessiontest.Route()})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	require.EqualError(t, open.Rejection(t), `agent "ca" runs its own turns: the append batch leaves a compaction open (its compaction/start at index 0, seq 0, has no compaction/end); append whole compactions (type: TurnLeftOpen, retryable: false)`)
	whole.OK(t)
	disp.OK(t)
	require.Equal(t, []string{"compaction/start", "compaction/end"}, sessiontest.Types(sessiontest.Stored(t, h.Store, "ca")))
}
