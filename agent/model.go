package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// anchorTimeout bounds the store of an interrupted anchor after the
// activity was cancelled.
const anchorTimeout = 30 * time.Second

// assistantMessageID is the deterministic id of the message of (turn, step):
// a model call stores one message per step.
func assistantMessageID(turn, step int64) string {
	return "assistant-" + strconv.FormatInt(turn, 10) + "-" + strconv.FormatInt(step, 10)
}

// assistantData is the data of an assistant/message this package stores
// (docs/FORMAT.md §1.2): the harness's shape, the stream recorded as the
// assistant/chunk events the message cites in sourceEventSeqs.
type assistantData struct {
	Turn        int64           `json:"turn"`
	Step        int64           `json:"step"`
	Message     assistantBody   `json:"message"`
	Usage       *provider.Usage `json:"usage,omitempty"`
	Interrupted bool            `json:"interrupted,omitempty"`
}

type assistantBody struct {
	ID      string           `json:"id"`
	Role    string           `json:"role"`
	Content []provider.Block `json:"content"`
	Source  messageSource    `json:"source"`
}

// messageSource is the model source the harness requires on every
// assistant message.
type messageSource struct {
	Kind     string `json:"kind"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// sourceKindModel is the kind of an assistant message's source.
const sourceKindModel = "model"

// routeData is the data of a request/context event: the route of the
// model calls that follow it.
type routeData struct {
	Provider      string `json:"provider"`
	Model         string `json:"model"`
	ContextWindow int64  `json:"contextWindow,omitempty"`
}

// CallModel performs the model call of step in.Step of turn in.Turn and
// stores its assistant/message (D28: a model call's message is stored once,
// at its end). It reads the conversation from the log from in.From, calls
// the provider with the worker's system prompt and tools, heartbeats
// ModelProgress while the response streams, and stores one
// assistant/message at the log's next seq. When the log already holds the
// step's message (an earlier attempt stored it), it returns that message
// with Reused set and calls nothing.
//
// A cancelled call (the workflow cancelled the activity) stores, when the
// stream had shown text or reasoning, an interrupted anchor holding it, and
// returns the cancellation. A provider error becomes a ProviderRefused
// (non-retryable) or ProviderUnavailable (retryable, after the provider's
// RetryAfter) application error and stores nothing.
func (a *Activities) CallModel(ctx context.Context, in ModelInput) (res ModelResult, err error) {
	ctx, span := a.startChat(ctx, in)
	defer func() { endChat(span, res, err) }()
	h, err := a.Runtime.Attach(in.Ref)
	if err != nil {
		return ModelResult{}, err
	}
	if in.Turn < 1 || in.Step < 1 {
		return ModelResult{}, invalidLog("model call of turn %d step %d: turn and step start at 1", in.Turn, in.Step)
	}
	c := &modelCall{a: a, h: h, in: in}
	found, messages, next, err := c.conversation(ctx)
	if err != nil {
		return ModelResult{}, err
	}
	if found != nil {
		if !a.NoLiveText {
			// An earlier attempt stored the message and may have died
			// before it removed its live file.
			clearLive(ctx, h)
		}
		return found.result(next, true), nil
	}
	p, err := a.Providers.Get(in.Provider)
	if err != nil {
		return ModelResult{}, temporal.NewNonRetryableApplicationError(err.Error(), wire.ErrTypeUnknownProvider, nil)
	}
	c.window = a.contextWindow(in.ContextWindow, in.Provider, in.Model, p)
	if in.Compacts {
		if pe := c.overflowed(); pe != nil {
			// An earlier attempt stored this refusal.
			return ModelResult{MessageSeq: -1, NextSeq: next, Compact: TriggerOverflow, Failure: pe, Window: c.window}, nil
		}
	}
	req := provider.Request{
		Provider: in.Provider, Model: in.Model, System: a.System, ReasoningEffort: in.ReasoningEffort,
		MaxTokens: in.MaxTokens, SessionID: in.Ref.SessionID, Messages: messages,
	}
	if a.Tools != nil {
		req.Tools = a.Tools.Specs()
	}
	if in.Compacts && !in.NoAutoCompact && !in.PressureChecked && c.window > 0 {
		tokens := c.pressure(req)
		if tokens >= int(float64(c.window)*a.Compaction.threshold()) {
			return ModelResult{MessageSeq: -1, NextSeq: next, Compact: TriggerPressure, Tokens: tokens, Window: c.window}, nil
		}
	}
	a.traceRequest(ctx, req)

	f := newFold()
	progress := wire.ModelProgress{Turn: in.Turn, Step: in.Step}
	if activity.IsActivity(ctx) {
		progress.Attempt = activity.GetInfo(ctx).Attempt
	}
	// The live file (package livetext) gets every text and reasoning chunk
	// as it arrives; it ends with the call: an end marker once the message
	// (or the interrupted anchor) is stored, an abandoned one otherwise.
	live := c.startLive(ctx, max(progress.Attempt, 1))
	stored := false
	defer func() { c.endLive(live, stored) }()
	// The fold and progress change only inside hb.Step; the shown tail is
	// copied only for a heartbeat that is sent.
	hb := a.Runtime.Heartbeat(ctx, func() any { return withShownTail(progress, f) })
	streamErr := c.stream(ctx, p, req, func(ch provider.Chunk) error {
		return hb.Step(func() error {
			if err := f.Push(ch, a.nowMs()); err != nil {
				return err
			}
			progress = nextProgress(progress, f, ch)
			liveChunk(live, ch)
			return nil
		})
	})
	hb.Stop()

	if ctx.Err() != nil {
		var err error
		stored, err = c.interrupted(ctx, f)
		return ModelResult{}, err
	}
	if streamErr != nil {
		var pe *provider.Error
		if in.Compacts && errors.As(streamErr, &pe) && pe.Code == provider.CodeContextWindowExceeded {
			return c.storeOverflow(ctx, *pe)
		}
		return ModelResult{}, providerError(streamErr)
	}
	if f.Finish() == "" {
		return ModelResult{}, temporal.NewApplicationError("model call failed: the stream ended without a finish", wire.ErrTypeProviderUnavailable)
	}
	a.traceResponse(ctx, f.Content(), f.Finish())
	res, err = c.store(ctx, f, false)
	stored = err == nil
	return res, err
}

// stream runs one provider stream under the call's limits (ModelLimits,
// docs/API.md "Model call limits"), handing each chunk to push. It returns
// the stream's error: the provider's, a *provider.Error for a limit that
// was reached (idle: retryable; total time and output size: not), or one
// for a chunk push refused (the provider broke its own stream, not
// retryable). A cancellation of ctx ends it with ctx's error or nil; the
// caller checks ctx.
func (c *modelCall) stream(ctx context.Context, p provider.Provider, req provider.Request, push func(provider.Chunk) error) error {
	lim := c.a.Limits.resolved()
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(lim.IdleTimeout, func() {
		cancel(&provider.Error{Retryable: true, Code: CodeModelIdle,
			Message: fmt.Sprintf("the model stream sent nothing for %s", lim.IdleTimeout)})
	})
	defer idle.Stop()
	total := time.AfterFunc(lim.CallTimeout, func() {
		cancel(&provider.Error{Code: CodeModelCallTimeout,
			Message: fmt.Sprintf("the model call streamed for %s without finishing", lim.CallTimeout)})
	})
	defer total.Stop()
	// limitErr is the limit that cut the stream, if any.
	limitErr := func() error {
		var pe *provider.Error
		if ctx.Err() == nil && errors.As(context.Cause(sctx), &pe) {
			return pe
		}
		return nil
	}
	output := 0
	for ch, err := range p.Stream(sctx, req) {
		if err != nil {
			if le := limitErr(); le != nil {
				return le
			}
			return err
		}
		idle.Reset(lim.IdleTimeout)
		if output += len(ch.Delta); output > lim.MaxOutputBytes {
			return &provider.Error{Code: CodeModelOutputTooLarge,
				Message: fmt.Sprintf("the model's output exceeds the limit of %d bytes", lim.MaxOutputBytes)}
		}
		if err := push(ch); err != nil {
			// The provider broke its own stream: retrying the same
			// provider is not expected to do better.
			return &provider.Error{Message: err.Error()}
		}
		if sctx.Err() != nil {
			break
		}
	}
	return limitErr()
}

// nextProgress is the heartbeat detail after chunk c, without its text (see
// withShownTail).
func nextProgress(p wire.ModelProgress, f fold, c provider.Chunk) wire.ModelProgress {
	p.Chunks++
	shown := f.ShownLen() > 0
	if c.Type == provider.ChunkReasoning && !shown {
		p.Reasoning = true
	}
	if shown {
		p.Reasoning = false
	}
	return p
}

// withShownTail is p with the last ProgressWindow bytes of the shown text.
func withShownTail(p wire.ModelProgress, f fold) wire.ModelProgress {
	off, tail := f.ShownTail(ProgressWindow)
	p.TextOffset, p.Text = int64(off), tail
	return p
}

// interrupted handles a model call cancelled mid-stream: a genuine
// cancellation of the activity (not a timeout or a worker shutdown, after
// which the call is retried) stores the anchor of what was shown. It
// reports whether the anchor was stored, and returns the cancellation.
func (c *modelCall) interrupted(ctx context.Context, f fold) (bool, error) {
	cause := context.Cause(ctx)
	var canceled *temporal.CanceledError
	if !errors.As(cause, &canceled) || len(f.Interrupted()) == 0 {
		return false, ctx.Err()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), anchorTimeout)
	defer cancel()
	if _, err := c.store(sctx, f, true); err != nil {
		slog.Warn("agent: storing the interrupted anchor of a cancelled model call failed",
			"session", c.in.Ref.SessionID, "turn", c.in.Turn, "step", c.in.Step, "error", err)
		return false, ctx.Err()
	}
	return true, ctx.Err()
}

// store stores the assistant/message of the call (or its interrupted
// anchor) unless the log already holds the step's message. One batch holds,
// in order: a request/context naming the call's route when the last one in
// the log names another (or there is none), the call's recorded chunks as
// assistant/chunk events at the times they arrived, and the message citing
// them all in sourceEventSeqs (docs/FORMAT.md §1.2). It stores nothing, and
// fails with a retryable error, when the log no longer begins with the
// events the conversation was read from.
func (c *modelCall) store(ctx context.Context, f fold, interrupted bool) (ModelResult, error) {
	in := c.in
	content := f.Content()
	if interrupted {
		content = f.Interrupted()
	}
	if content == nil {
		content = []provider.Block{}
	}
	record := f.Record()
	data := assistantData{
		Turn: in.Turn, Step: in.Step,
		Message: assistantBody{
			ID: assistantMessageID(in.Turn, in.Step), Role: provider.RoleAssistant, Content: content,
			Source: messageSource{Kind: sourceKindModel, Provider: in.Provider, Model: in.Model},
		},
		Usage: f.Usage(), Interrupted: interrupted,
	}
	var (
		stored *storedModelCall
		reused bool
	)
	next, err := c.h.Update(ctx, in.From, func(tail []session.Event, next int64) ([]session.Event, error) {
		var err error
		if stored, err = c.find(tail); err != nil {
			return nil, err
		}
		if stored != nil {
			reused = true // a concurrent attempt stored it first
			return nil, nil
		}
		if !c.continues(tail) {
			return nil, temporal.NewApplicationError(fmt.Sprintf(
				"model call of turn %d step %d: the log changed since its conversation was read", in.Turn, in.Step), wire.ErrTypeIO)
		}
		batch, err := c.events(tail, next, record, data)
		if err != nil {
			return nil, err
		}
		stored = &storedModelCall{seq: batch[len(batch)-1].Seq, usage: f.Usage(), interrupted: interrupted, finish: f.Finish()}
		if !interrupted {
			for _, b := range content {
				if b.Type == provider.BlockToolCall {
					t, _ := c.a.lookup(b.Name)
					stored.calls = append(stored.calls, CallRef{ID: b.ID, Name: b.Name, Parallel: t.Parallel, Hint: CallHint(b.Arguments)})
				}
			}
		} else {
			stored.finish = ""
		}
		if recordsCalls(in, interrupted, f.Finish()) {
			calls, err := recordedCalls(in.Turn, in.Step, content, firstGroup(stored.calls, in.ParallelLimit), next+int64(len(batch)), c.a.nowMs())
			if err != nil {
				return nil, err
			}
			batch = append(batch, calls...)
			stored.recorded = len(calls)
		}
		return batch, nil
	})
	if err != nil {
		return ModelResult{}, activities.MapError(err)
	}
	return stored.result(next, reused), nil
}

// recordsCalls reports whether a message stored by the call of in
// (interrupted, or finished with finish) gets its calls' tool/call events
// in its batch: with in.RecordCalls, unless it is an interrupted anchor or
// finished at the max-tokens limit (its calls are closed, not run: they
// keep the tool/call and result pair notRunPair builds).
func recordsCalls(in ModelInput, interrupted bool, finish provider.FinishReason) bool {
	return in.RecordCalls && !interrupted && finish != provider.FinishMaxTokens
}

// firstGroup is the number of calls the workflow starts at once, before
// any finishes: the first call when it is not parallel-safe, else the
// leading parallel-safe calls, at most limit (0: no limit). The harness
// appends a call's tool/call as it starts it.
func firstGroup(calls []CallRef, limit int) int {
	if len(calls) == 0 {
		return 0
	}
	if !calls[0].Parallel {
		return 1
	}
	n := 0
	for n < len(calls) && calls[n].Parallel && (limit <= 0 || n < limit) {
		n++
	}
	return n
}

// recordedCalls builds, from seq, the tool/call of each of the first n
// tool-call blocks of content in model order: the events RunTool would
// store for them (toolCallEvent), with the same data.
func recordedCalls(turn, step int64, content []provider.Block, n int, seq, t int64) ([]session.Event, error) {
	var out []session.Event
	for _, b := range content {
		if b.Type != provider.BlockToolCall || len(out) == n {
			continue
		}
		e, err := session.NewEvent(wire.TypeToolCall, seq+int64(len(out)), t, wire.ToolCall{Turn: turn, Step: step, CallID: b.ID, Name: b.Name, Arguments: b.Arguments})
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// events builds the batch of store from seq next: the request/context if
// the route changed, the chunk events, the message.
func (c *modelCall) events(tail []session.Event, next int64, record []provider.RecordedChunk, data assistantData) ([]session.Event, error) {
	in := c.in
	now := c.a.nowMs()
	batch := make([]session.Event, 0, len(record)+2)
	if route := c.route(); lastRoute(tail) != route {
		e, err := session.NewEvent(wire.TypeRequestContext, next, now, route)
		if err != nil {
			return nil, err
		}
		batch = append(batch, e)
	}
	cites := make([]int64, 0, len(record))
	prefix := `{"turn":` + strconv.FormatInt(in.Turn, 10) + `,"step":` + strconv.FormatInt(in.Step, 10) + `,"chunk":`
	for _, rc := range record {
		seq := next + int64(len(batch))
		// The chunk is canonical JSON, so the data is too, with its keys in
		// the order the store packs runs of deltas in (FORMAT.md §1.6).
		b := make([]byte, 0, len(prefix)+len(rc.Chunk)+1)
		b = append(append(append(b, prefix...), rc.Chunk...), '}')
		e := session.Event{Type: wire.TypeAssistantChunk, Seq: seq, Time: rc.Time, Data: b}
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", session.ErrInvalidEvent, err)
		}
		batch = append(batch, e)
		cites = append(cites, seq)
	}
	e, err := session.NewEvent(wire.TypeAssistantMessage, next+int64(len(batch)), now, data)
	if err != nil {
		return nil, err
	}
	e.SurfaceOp = session.AppendOp()
	e.SourceEventSeqs = cites
	return append(batch, e), nil
}

// lastRoute is the route of the last request/context event of tail, the
// zero route when there is none or it does not decode.
func lastRoute(tail []session.Event) routeData {
	for i := len(tail) - 1; i >= 0; i-- {
		if tail[i].Type == wire.TypeRequestContext {
			var r routeData
			_ = json.Unmarshal(tail[i].Data, &r)
			return r
		}
	}
	return routeData{}
}

// providerError classifies a failed stream.
func providerError(err error) error {
	var pe *provider.Error
	if !errors.As(err, &pe) {
		return temporal.NewApplicationErrorWithCause(fmt.Sprintf("model call failed: %v", err), wire.ErrTypeProviderUnavailable, err)
	}
	if !pe.Retryable {
		return temporal.NewNonRetryableApplicationError(pe.Error(), wire.ErrTypeProviderRefused, err, *pe)
	}
	return temporal.NewApplicationErrorWithOptions(pe.Error(), wire.ErrTypeProviderUnavailable, temporal.ApplicationErrorOptions{
		Cause: err, Details: []any{*pe}, NextRetryDelay: pe.RetryAfter,
	})
}
