package client

// WatchTurn: a turn followed from its loop state, its stored events and its
// live text.

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/sessionflow/sessionflow/wire"
)

// EventReader reads a session's stored events [from, to) (to -1 for the
// end), as plain envelopes. The store (*jsonl.Store) is one: it reads them
// through a read handle.
type EventReader interface {
	ReadEvents(ctx context.Context, id string, from, to int64) ([]wire.Event, error)
}

// StoreReader returns st: the store is an EventReader of its own. It is
// kept for the callers that wrapped a *jsonl.Store with it.
func StoreReader(st EventReader) EventReader { return st }

// Turn progress kinds.
const (
	// ProgressQueued: the message waits for a turn.
	ProgressQueued = "queued"
	// ProgressStarted: the turn that claimed the message started.
	ProgressStarted = "started"
	// ProgressText: streamed text of the running model call (Text is the
	// delta since the previous one).
	ProgressText = "text"
	// ProgressReasoning: the model is reasoning (no text yet); yielded
	// once per model call attempt.
	ProgressReasoning = "reasoning"
	// ProgressToolStarted and ProgressToolFinished: a tool call of the
	// running step was dispatched, or finished (Call).
	ProgressToolStarted  = "tool-started"
	ProgressToolFinished = "tool-finished"
	// ProgressApproval: a tool call of the running turn waits for a
	// Decide (Approval; Call is its state then, when LoopState lists it).
	// Each approval is yielded once.
	ProgressApproval = "approval"
	// ProgressEnded: the turn ended (Info; Events when an EventReader
	// is set).
	ProgressEnded = "ended"
)

// TurnProgress is one observation of a watched turn.
type TurnProgress struct {
	// Kind is one of the Progress* constants.
	Kind string `json:"kind"`
	// Turn and Step locate it (Step 0 outside a step).
	Turn int64 `json:"turn,omitempty"`
	Step int64 `json:"step,omitempty"`
	// Text is the new streamed text of a ProgressText.
	Text string `json:"text,omitempty"`
	// Gap reports that text streamed between two polls fell out of the
	// heartbeat's window: Text follows a gap.
	Gap bool `json:"gap,omitempty"`
	// Restart reports that the text yielded so far for this step was
	// discarded (the model call was retried, or the stored answer is not
	// what streamed): Text starts the step's text over.
	Restart bool `json:"restart,omitempty"`
	// Call is the tool call of a tool progress.
	Call *wire.CallState `json:"call,omitempty"`
	// Approval is the question of a ProgressApproval.
	Approval *wire.PendingApproval `json:"approval,omitempty"`
	// Info is the ended turn.
	Info *wire.TurnInfo `json:"info,omitempty"`
	// Events are the ended turn's stored events [StartSeq, EndSeq).
	Events []wire.Event `json:"events,omitempty"`
}

// WatchOptions tune WatchTurn.
type WatchOptions struct {
	// Interval is the poll interval; default 200 ms.
	Interval time.Duration
	// Events, when set, reads the ended turn's events.
	Events EventReader
	// Live, when set, follows the running model call's text where the
	// model activity writes it, beside the log (livetext.Source over the
	// store, for a client that sees the store root): each chunk is yielded
	// as soon as it is written, not at the next poll of the heartbeat
	// details. Until it has followed text of the watched turn (and after
	// it failed) the heartbeat details are polled as without it.
	Live LiveSource
}

// LiveSource follows the live text of a session's running model call
// (docs/API.md "Live text"): chunk, reset and end events (wire.LiveEvent),
// until ctx is done or an error ends the sequence. A livetext.Source
// over the session store is one.
type LiveSource interface {
	FollowLive(ctx context.Context, id string) iter.Seq2[wire.LiveEvent, error]
}

// WatchTurn follows the turn that claims message messageID of session id
// (the id Followup returned) until it ends: it polls the LoopState query and
// the workflow's pending activities (the model activity's heartbeat details
// are an wire.ModelProgress), or with opts.Live follows the model call's
// live text as it is written, and yields the streamed text, the tool calls
// started and finished, and finally the ended turn (TurnInfo) and, with
// opts.Events, its stored events; a call that waits for an approval is
// yielded as a ProgressApproval (answer it with Decide). Beside the polls it waits on the turn's
// end (WaitTurn), so the end is seen when the turn ends, not at the next
// poll. An error ends the sequence.
func (c *Client) WatchTurn(ctx context.Context, id, messageID string, opts WatchOptions) iter.Seq2[TurnProgress, error] {
	if opts.Interval <= 0 {
		opts.Interval = 200 * time.Millisecond
	}
	return func(yield func(TurnProgress, error) bool) {
		w := turnWatch{c: c, id: id, msg: messageID, opts: opts, reported: map[string]string{}, textDone: map[int64]bool{}, asked: map[string]bool{}, begun: map[string]bool{}}
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		var liveWake <-chan struct{}
		if opts.Live != nil {
			w.live = newLiveText()
			liveWake = w.live.wake
			done := make(chan struct{})
			defer func() { stop(); <-done }()
			go func() {
				defer close(done)
				w.live.follow(wctx, opts.Live, id)
			}()
		}
		// ended is closed when the turn ended; a failed wait (an older
		// server, a message not pending) leaves the polls to tell.
		ended := make(chan struct{})
		var endedCh <-chan struct{} = ended
		go func() {
			if _, err := c.WaitTurn(wctx, id, wire.WaitTurnRequest{MessageID: messageID}); err == nil {
				close(ended)
			}
		}()
		for {
			// The LoopState query runs beside the live text: a slow answer
			// (a busy worker) holds up the polls, never the text of the
			// step they follow.
			fetched := make(chan loopFetch, 1)
			go func() {
				st, err := c.LoopState(wctx, id)
				fetched <- loopFetch{st: st, err: err}
			}()
			var f loopFetch
		wait:
			for {
				select {
				case <-ctx.Done():
					yield(TurnProgress{}, ctx.Err())
					return
				case f = <-fetched:
					break wait
				case <-liveWake:
					if w.liveOnly() && !w.textProgress(ctx, w.emit(yield)) {
						return
					}
				}
			}
			done, err := w.poll(ctx, yield, f.st, f.err)
			if err != nil {
				yield(TurnProgress{}, err)
				return
			}
			if done {
				return
			}
			tick := time.After(opts.Interval)
			for {
				select {
				case <-ctx.Done():
					yield(TurnProgress{}, ctx.Err())
					return
				case <-tick:
				case <-endedCh:
					endedCh = nil
				case <-liveWake:
					if w.liveOnly() {
						// Text of the step the polls follow: yielded at
						// once, without a poll.
						if !w.textProgress(ctx, w.emit(yield)) {
							return
						}
						continue
					}
				}
				break
			}
		}
	}
}

// emit returns the yield of poll's progress: false once the consumer
// stopped.
func (w *turnWatch) emit(yield func(TurnProgress, error) bool) func(TurnProgress) bool {
	return func(p TurnProgress) bool {
		if w.stopped {
			return false
		}
		if !yield(p, nil) {
			w.stopped = true
		}
		return !w.stopped
	}
}

// liveOnly reports whether the live text holds text of the step the polls
// follow, so that it can be yielded without a poll.
func (w *turnWatch) liveOnly() bool {
	p, ok := w.live.progress()
	return ok && w.started && w.step != 0 && p.Turn == w.turn && p.Step == w.step
}

// turnWatch is the state of one WatchTurn.
type turnWatch struct {
	c    *Client
	id   string
	msg  string
	opts WatchOptions

	queued  bool
	turn    int64
	started bool
	// The text yielded for step textStep, as streamed by attempt
	// textAttempt of its model call: shown is the offset it reaches,
	// yielded the text (contiguous unless gapped), last the last piece
	// yielded and lastOff its offset; restart is set when the attempt
	// changed and the next text starts over.
	textStep    int64
	textAttempt int32
	shown       int64
	yielded     strings.Builder
	gapped      bool
	last        string
	lastOff     int64
	restart     bool
	// reasoned is set once the step's attempt was yielded reasoning.
	reasoned bool
	// textDone holds the steps whose stored answer was yielded.
	textDone map[int64]bool
	// reported holds the last state yielded per call (callKey).
	reported map[string]string
	// asked holds the ids of the approvals yielded.
	asked map[string]bool
	// begun holds the calls whose start was yielded (callKey): a call
	// that asked for approval runs, from LoopState's view, twice (the
	// asking, then the approved run) and is yielded started once.
	begun map[string]bool
	// step is the running step the last poll saw.
	step    int64
	stopped bool
	// live is the followed live text (WatchOptions.Live), or nil.
	live *liveText
}

// loopFetch is the answer of one LoopState query.
type loopFetch struct {
	st  wire.LoopState
	err error
}

// poll makes one observation from st, the LoopState query's answer (or
// its error err); it reports whether the turn ended or the consumer
// stopped.
func (w *turnWatch) poll(ctx context.Context, yield func(TurnProgress, error) bool, st wire.LoopState, err error) (bool, error) {
	emit := w.emit(yield)
	if err != nil {
		// A query no worker answered in time (a worker restarting) is
		// asked again at the next interval while the watch's context lives.
		if ctx.Err() == nil && unanswered(err) {
			return false, nil
		}
		return false, err
	}
	i := slices.IndexFunc(st.Recent, func(s wire.TurnInfo) bool { return slices.Contains(s.Claimed, w.msg) })
	if i < 0 {
		if !slices.Contains(st.Pending.NextTurn, w.msg) && !slices.Contains(st.Pending.NextStep, w.msg) {
			return false, invalidArgument(w.id, "message %q of session %q is neither pending nor claimed by a recent turn (discarded by a cancel, or older than the recent turns)", w.msg, w.id)
		}
		if !w.queued {
			w.queued = true
			return !emit(TurnProgress{Kind: ProgressQueued}), nil
		}
		return false, nil
	}
	sum := st.Recent[i]
	w.turn = sum.Turn
	if !w.started {
		w.started = true
		if !emit(TurnProgress{Kind: ProgressStarted, Turn: sum.Turn}) {
			return true, nil
		}
	}
	if sum.Reason == nil && st.Turn == sum.Turn {
		if st.Step != w.step && (w.step != 0 || st.Step > 1) && w.opts.Events != nil {
			// A new step, or a first look that finds a later step running:
			// the earlier steps' text and calls that finished since the last
			// poll (or before the first) are read from the log and yielded
			// before the running step's text.
			evs, err := w.opts.Events.ReadEvents(ctx, w.id, sum.StartSeq, st.NextSeq)
			if err != nil {
				return false, fmt.Errorf("read the events of turn %d of session %q: %w", sum.Turn, w.id, err)
			}
			if !w.replay(evs, true, emit) {
				return true, nil
			}
		}
		w.step = st.Step
		if len(st.Calls) > 0 && !w.textDone[st.Step] && w.opts.Events != nil {
			// The step's answer is stored before its calls run: its text
			// the polls missed comes before the calls.
			evs, err := w.opts.Events.ReadEvents(ctx, w.id, sum.StartSeq, st.NextSeq)
			if err != nil {
				return false, fmt.Errorf("read the events of turn %d of session %q: %w", sum.Turn, w.id, err)
			}
			if !w.replay(evs, false, emit) {
				return true, nil
			}
		}
		if !w.toolProgress(st, emit) {
			return true, nil
		}
		if !w.approvalProgress(st, emit) {
			return true, nil
		}
		if !w.textProgress(ctx, emit) {
			return true, nil
		}
		return false, nil
	}
	if sum.Reason == nil {
		return false, nil
	}
	end := TurnProgress{Kind: ProgressEnded, Turn: sum.Turn, Info: &sum}
	if w.opts.Events != nil {
		evs, err := w.opts.Events.ReadEvents(ctx, w.id, sum.StartSeq, sum.EndSeq)
		if err != nil {
			return false, fmt.Errorf("read the events of turn %d of session %q: %w", sum.Turn, w.id, err)
		}
		end.Events = evs
		// Text and tool calls that streamed between two polls.
		if !w.replay(evs, true, emit) {
			return true, nil
		}
	}
	emit(end)
	return true, nil
}

// replay yields, from the turn's stored events, the progress the polls
// missed: for each stored assistant/message, the rest of its text (all of
// it when the polls saw none of its step, or saw text the stored answer
// does not continue, with Restart), and each tool call that ran between
// two polls (unless calls is false: the running step's calls are followed
// by the polls).
func (w *turnWatch) replay(evs []wire.Event, calls bool, emit func(TurnProgress) bool) bool {
	names := map[string]string{}
	for _, e := range evs {
		switch e.Type {
		case wire.TypeAssistantMessage:
			var m wire.AssistantMessage
			err := e.Decode(wire.TypeAssistantMessage, &m)
			if err != nil || m.Turn != w.turn || w.textDone[m.Step] {
				continue
			}
			w.textDone[m.Step] = true
			if p, ok := w.storedText(m.Step, messageText(m)); ok && !emit(p) {
				return false
			}
		case wire.TypeToolCall:
			if !calls {
				continue
			}
			var c wire.ToolCall
			err := e.Decode(wire.TypeToolCall, &c)
			if err != nil {
				continue
			}
			names[callKey(c.Step, c.CallID)] = c.Name
		case wire.TypeToolResult:
			var r wire.ToolResult
			err := e.Decode(wire.TypeToolResult, &r)
			if err != nil || !calls {
				continue
			}
			key := callKey(r.Step, r.Message.Source.CallID)
			prev := w.reported[key]
			if prev == wire.CallDone || prev == wire.CallFailed || prev == wire.CallSkipped {
				continue
			}
			call := wire.CallState{ID: r.Message.Source.CallID, Name: names[key], State: wire.CallDone}
			if len(r.Message.Content) > 0 {
				call.IsError = r.Message.Content[0].IsError
			}
			if r.Error != nil {
				call.Code = r.Error.Code
			}
			if call.Code == wire.CodeAbortedBeforeDispatch || call.Code == wire.CodeMaxTokensNotRun {
				call.State = wire.CallSkipped
			} else if prev != wire.CallRunning && prev != wire.CallAwaitingApproval && !w.begun[key] {
				// (A call last seen waiting for its approval may have been
				// rejected, never run: as in toolProgress, no start.)
				w.begun[key] = true
				started := call
				started.State, started.IsError, started.Code = wire.CallRunning, false, ""
				if !emit(TurnProgress{Kind: ProgressToolStarted, Turn: r.Turn, Step: r.Step, Call: &started}) {
					return false
				}
			}
			w.reported[key] = call.State
			if !emit(TurnProgress{Kind: ProgressToolFinished, Turn: r.Turn, Step: r.Step, Call: &call}) {
				return false
			}
		}
	}
	return true
}

// storedText is the text progress that completes step's yielded text with
// stored, the step's stored answer; ok is false when nothing is left.
func (w *turnWatch) storedText(step int64, stored string) (TurnProgress, bool) {
	p := TurnProgress{Kind: ProgressText, Turn: w.turn, Step: step, Text: stored}
	if step != w.textStep || w.shown == 0 {
		p.Restart = step == w.textStep && w.restart
		return p, p.Text != "" || p.Restart
	}
	continues := int64(len(stored)) >= w.shown && !w.restart
	if continues && w.gapped {
		continues = stored[w.lastOff:w.lastOff+int64(len(w.last))] == w.last
	} else if continues {
		continues = strings.HasPrefix(stored, w.yielded.String())
	}
	if continues {
		p.Text = stored[w.shown:]
		return p, p.Text != ""
	}
	p.Restart = true
	return p, true
}

// messageText is the text of an assistant message's text blocks.
func messageText(m wire.AssistantMessage) string {
	var text strings.Builder
	for _, b := range m.Message.Content {
		if b.Type == wire.BlockText {
			text.WriteString(b.Text)
		}
	}
	return text.String()
}

// callKey names a tool call of a turn: its step and call id.
func callKey(step int64, id string) string { return fmt.Sprintf("%d/%s", step, id) }
