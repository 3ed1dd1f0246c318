package sessiontest

// A fake of the agent activities (CallModel, RunTool, EndTurn) for the
// loop's workflow tests: registered under the activity names, it stores
// the events the real activities store (an assistant/message per model
// call, a tool/call and tool/result per tool call, the turn's closers)
// through the session's write handle, from a script of responses, so the
// workflow's interleavings can be held and released exactly.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// FakeResponse is one scripted model call.
type FakeResponse struct {
	Text   string
	Calls  []agent.CallRef
	Finish provider.FinishReason
	// Refuse makes the call fail as refused by the provider.
	Refuse *provider.Error
	// Err makes the call fail with err.
	Err error
	// Hold blocks the call until release is closed (or the activity is
	// cancelled: then the shown text is stored as an interrupted anchor).
	Hold    bool
	Release chan struct{}
}

// FakeTool is a scripted tool: it runs for Duration (wall clock), or until its
// Release channel is closed when Hold is set.
type FakeTool struct {
	Duration time.Duration
	Hold     bool
	Release  chan struct{}
	// Fail makes the activity fail (its store failed) after the call.
	Fail error
}

// FakeAgent is the fake of the agent activities NewFakeAgent registers;
// Models, Tools, Starts, Ends and MaxConc record what it saw.
type FakeAgent struct {
	t  *testing.T
	st *jsonl.Store

	mu        sync.Mutex
	responses []*FakeResponse
	calls     int
	Models    []agent.ModelInput
	Tools     map[string]*FakeTool
	inFlight  map[string]bool
	// Starts records, for each tool call started, the calls in flight at
	// its start; ends records the order calls finished.
	Starts  []ToolStart
	Ends    []string
	MaxConc int
}

// ToolStart is a tool call's start: its id and the calls then running.
type ToolStart struct {
	ID      string
	Running []string
}

// NewFakeAgent registers a fake of the agent activities playing
// responses in order, over the harness's store.
func NewFakeAgent(h *Harness, responses ...*FakeResponse) *FakeAgent {
	f := &FakeAgent{t: h.T, st: h.Store, responses: responses, Tools: map[string]*FakeTool{}, inFlight: map[string]bool{}}
	for _, r := range responses {
		if r.Hold && r.Release == nil {
			r.Release = make(chan struct{})
		}
	}
	h.Env.RegisterActivityWithOptions(f.CallModel, activity.RegisterOptions{Name: wire.CallModelActivity})
	h.Env.RegisterActivityWithOptions(f.RunTool, activity.RegisterOptions{Name: wire.RunToolActivity})
	h.Env.RegisterActivityWithOptions(f.EndTurn, activity.RegisterOptions{Name: wire.EndTurnActivity})
	return f
}

// store appends the events build returns at the log's cursor, under the
// fake's lock (the fake's activities run concurrently).
func (f *FakeAgent) store(ctx context.Context, ref jsonl.HandleRef, build func(h *jsonl.Handle, seq int64) ([]session.Event, error)) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.st.Attach(ref)
	evs, err := build(h, h.NextSeq())
	if err != nil {
		return 0, err
	}
	if len(evs) > 0 {
		if err := h.Append(ctx, evs); err != nil {
			return 0, err
		}
	}
	return h.NextSeq(), nil
}

func (f *FakeAgent) assistant(seq int64, in agent.ModelInput, content []map[string]any, interrupted bool) (session.Event, error) {
	data := map[string]any{
		"turn": in.Turn, "step": in.Step,
		"message": map[string]any{"id": fmt.Sprintf("a-%d-%d", in.Turn, in.Step), "role": "assistant", "content": content,
			"source": map[string]any{"provider": in.Provider, "model": in.Model}},
		"stream": []any{},
	}
	if interrupted {
		data["interrupted"] = true
	}
	e, err := session.NewEvent(wire.TypeAssistantMessage, seq, seq, data)
	e.SurfaceOp = session.AppendOp()
	return e, err
}

// CallModel plays the next scripted response.
func (f *FakeAgent) CallModel(ctx context.Context, in agent.ModelInput) (agent.ModelResult, error) {
	f.mu.Lock()
	if f.calls >= len(f.responses) {
		f.mu.Unlock()
		return agent.ModelResult{}, temporal.NewNonRetryableApplicationError("script exhausted", "ProviderRefused", nil,
			provider.Error{Message: "script exhausted", Code: "SCRIPT_EXHAUSTED"})
	}
	r := f.responses[f.calls]
	f.calls++
	f.Models = append(f.Models, in)
	f.mu.Unlock()
	if r.Err != nil {
		return agent.ModelResult{}, r.Err
	}
	if r.Refuse != nil {
		return agent.ModelResult{}, temporal.NewNonRetryableApplicationError(r.Refuse.Error(), "ProviderRefused", nil, *r.Refuse)
	}
	if r.Hold {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-r.Release:
				break wait
			case <-ctx.Done():
				// The test environment has resolved the cancelled
				// activity already; nothing is stored after that.
				return agent.ModelResult{}, ctx.Err()
			case <-tick.C:
				activity.RecordHeartbeat(ctx, wire.ModelProgress{Turn: in.Turn, Step: in.Step, Text: r.Text})
			}
		}
	}
	content := []map[string]any{}
	if r.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	for _, c := range r.Calls {
		content = append(content, map[string]any{"type": "tool-call", "id": c.ID, "name": c.Name, "arguments": "{}"})
	}
	var msgSeq int64
	next, err := f.store(ctx, in.Ref, func(_ *jsonl.Handle, seq int64) ([]session.Event, error) {
		msgSeq = seq
		e, err := f.assistant(seq, in, content, false)
		return []session.Event{e}, err
	})
	if err != nil {
		return agent.ModelResult{}, err
	}
	finish := r.Finish
	if finish == "" {
		finish = provider.FinishStop
		if len(r.Calls) > 0 {
			finish = provider.FinishToolCalls
		}
	}
	return agent.ModelResult{MessageSeq: msgSeq, NextSeq: next, ToolCalls: r.Calls, Finish: finish}, nil
}

func toolCallEvent(seq, turn, step int64, id, name string) (session.Event, error) {
	return session.NewEvent(wire.TypeToolCall, seq, seq, wire.ToolCall{Turn: turn, Step: step, CallID: id, Name: name, Arguments: "{}"})
}

func toolResultEvent(seq, turn, step int64, id, text string, callSeq int64, errInfo map[string]string) (session.Event, error) {
	data := map[string]any{
		"turn": turn, "step": step,
		"message": map[string]any{"id": "r-" + id, "role": "user", "source": map[string]any{"kind": "tool", "callId": id},
			"content": []any{map[string]any{"type": "tool-result", "toolCallId": id, "isError": errInfo != nil,
				"content": []any{map[string]any{"type": "text", "text": text}}}}},
	}
	if errInfo != nil {
		data["error"] = errInfo
	}
	e, err := session.NewEvent(wire.TypeToolResult, seq, seq, data)
	e.SurfaceOp = session.AppendOp()
	e.SourceEventSeqs = []int64{callSeq}
	return e, err
}

// RunTool stores the call, runs the scripted tool and stores its result.
func (f *FakeAgent) RunTool(ctx context.Context, in agent.ToolInput) (agent.ToolOutcome, error) {
	var callSeq int64
	_, err := f.store(ctx, in.Ref, func(_ *jsonl.Handle, seq int64) ([]session.Event, error) {
		callSeq = seq
		e, err := toolCallEvent(seq, in.Turn, in.Step, in.CallID, in.Name)
		return []session.Event{e}, err
	})
	if err != nil {
		return agent.ToolOutcome{}, err
	}
	f.mu.Lock()
	var running []string
	for id := range f.inFlight {
		running = append(running, id)
	}
	f.inFlight[in.CallID] = true
	f.MaxConc = max(f.MaxConc, len(f.inFlight))
	f.Starts = append(f.Starts, ToolStart{ID: in.CallID, Running: running})
	tl := f.Tools[in.Name]
	f.mu.Unlock()
	if tl != nil {
		if tl.Hold {
			<-tl.Release
		} else {
			time.Sleep(tl.Duration)
		}
	}
	f.mu.Lock()
	delete(f.inFlight, in.CallID)
	f.Ends = append(f.Ends, in.CallID)
	f.mu.Unlock()
	if tl != nil && tl.Fail != nil {
		return agent.ToolOutcome{}, tl.Fail
	}
	next, err := f.store(ctx, in.Ref, func(_ *jsonl.Handle, seq int64) ([]session.Event, error) {
		e, err := toolResultEvent(seq, in.Turn, in.Step, in.CallID, "ok "+in.CallID, callSeq, nil)
		return []session.Event{e}, err
	})
	return agent.ToolOutcome{CallSeq: callSeq, NextSeq: next}, err
}

// EndTurn stores the skipped pairs, the step's end and the turn's end.
// As the real one, it stores nothing and reports the events held past
// in.ExpectSeq when they open step in.Step+1.
func (f *FakeAgent) EndTurn(ctx context.Context, in agent.EndTurnInput) (agent.EndTurnResult, error) {
	var held []session.Event
	next, err := f.store(ctx, in.Ref, func(h *jsonl.Handle, seq int64) ([]session.Event, error) {
		if in.ExpectSeq > 0 && seq > in.ExpectSeq {
			evs, err := h.Read(ctx, in.ExpectSeq, -1)
			if err != nil {
				return nil, err
			}
			if len(evs) >= 2 && evs[0].Type == wire.TypeStepEnd && evs[1].Type == wire.TypeStepStart {
				held = evs
				return nil, nil
			}
		}
		var out []session.Event
		add := func(e session.Event, err error) error {
			out = append(out, e)
			return err
		}
		for _, id := range in.Skipped {
			callSeq := seq + int64(len(out))
			if err := add(toolCallEvent(callSeq, in.Turn, in.Step, id, "skipped")); err != nil {
				return nil, err
			}
			if err := add(toolResultEvent(seq+int64(len(out)), in.Turn, in.Step, id, "Error: tool call aborted before dispatch", callSeq,
				map[string]string{"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"})); err != nil {
				return nil, err
			}
		}
		if in.Step > 0 {
			if err := add(session.NewEvent(wire.TypeStepEnd, seq+int64(len(out)), 0, wire.StepEnd{Turn: in.Turn, Step: in.Step})); err != nil {
				return nil, err
			}
		}
		return out, add(session.NewEvent(wire.TypeTurnEnd, seq+int64(len(out)), 0, wire.TurnEnd{Turn: in.Turn, Reason: in.Reason}))
	})
	if held != nil {
		return agent.EndTurnResult{NextSeq: next, Held: activities.HeldEvents(held)}, err
	}
	return agent.EndTurnResult{NextSeq: next}, err
}

// TurnEnds returns the reasons of the stored turn/end events, in order.
func TurnEnds(t *testing.T, evs []session.Event) []wire.TurnEndReason {
	t.Helper()
	var out []wire.TurnEndReason
	for _, e := range evs {
		if e.Type == wire.TypeTurnEnd {
			te, err := e.TurnEnd()
			require.NoError(t, err)
			out = append(out, te.Reason)
		}
	}
	return out
}

// RequireBalanced checks that the log's turns and steps nest: every
// turn/start is closed by a turn/end, every step/start by a step/end
// inside its turn, and every tool/call is answered by a tool/result of
// its call id before its step ends.
func RequireBalanced(t *testing.T, evs []session.Event) {
	t.Helper()
	RequireContiguous(t, evs)
	turn, step := int64(0), int64(0)
	pending := map[string]bool{}
	for _, e := range evs {
		switch e.Type {
		case wire.TypeTurnStart:
			require.Zero(t, turn, "turn/start@%d inside turn %d", e.Seq, turn)
			ts, err := e.TurnStart()
			require.NoError(t, err)
			turn = ts.Turn
		case wire.TypeStepStart:
			require.NotZero(t, turn, "step/start@%d outside a turn", e.Seq)
			require.Zero(t, step, "step/start@%d inside step %d", e.Seq, step)
			ss, err := e.StepStart()
			require.NoError(t, err)
			step = ss.Step
		case wire.TypeStepEnd:
			require.NotZero(t, step, "step/end@%d outside a step", e.Seq)
			require.Empty(t, pending, "step/end@%d with unanswered calls", e.Seq)
			step = 0
		case wire.TypeTurnEnd:
			require.NotZero(t, turn, "turn/end@%d outside a turn", e.Seq)
			require.Zero(t, step, "turn/end@%d inside step %d", e.Seq, step)
			turn = 0
		case wire.TypeToolCall:
			tc, err := e.ToolCall()
			require.NoError(t, err)
			pending[tc.CallID] = true
		case wire.TypeToolResult:
			tr, err := e.ToolResult()
			require.NoError(t, err)
			require.True(t, pending[tr.Message.Source.CallID], "tool/result@%d without its call", e.Seq)
			delete(pending, tr.Message.Source.CallID)
		}
	}
	require.Zero(t, turn, "the last turn is open")
}

// UserTexts returns the texts of the stored user/message events.
func UserTexts(t *testing.T, evs []session.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		if e.Type != wire.TypeUserMessage {
			continue
		}
		var m struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		require.NoError(t, json.Unmarshal(e.Data, &m))
		out = append(out, m.Content[0].Text)
	}
	return out
}
