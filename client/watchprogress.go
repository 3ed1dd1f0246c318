package client

// What a turn's watch derives from each loop state and the live text: the
// tool calls' and approvals' progress, the text as it streams, and the
// answer of a turn's stored events.

import (
	"context"
	"fmt"
	"slices"

	"github.com/sessionflow/sessionflow/wire"
	"go.temporal.io/sdk/converter"
)

// toolProgress yields the tool calls of the running step whose state
// changed.
func (w *turnWatch) toolProgress(st wire.LoopState, emit func(TurnProgress) bool) bool {
	for _, call := range st.Calls {
		key := callKey(st.Step, call.ID)
		prev := w.reported[key]
		if prev == call.State {
			continue
		}
		w.reported[key] = call.State
		c := call
		switch call.State {
		case wire.CallRunning:
			if w.begun[key] {
				continue
			}
			w.begun[key] = true
			if !emit(TurnProgress{Kind: ProgressToolStarted, Turn: st.Turn, Step: st.Step, Call: &c}) {
				return false
			}
		case wire.CallDone, wire.CallFailed, wire.CallSkipped:
			if (prev == "" || prev == wire.CallPending) && !w.begun[key] {
				if call.State != wire.CallSkipped {
					w.begun[key] = true
					started := c
					started.State = wire.CallRunning
					if !emit(TurnProgress{Kind: ProgressToolStarted, Turn: st.Turn, Step: st.Step, Call: &started}) {
						return false
					}
				}
			}
			if !emit(TurnProgress{Kind: ProgressToolFinished, Turn: st.Turn, Step: st.Step, Call: &c}) {
				return false
			}
		}
	}
	return true
}

// approvalProgress yields the running turn's approvals not yielded yet,
// in the order asked.
func (w *turnWatch) approvalProgress(st wire.LoopState, emit func(TurnProgress) bool) bool {
	for _, a := range st.Approvals {
		if w.asked[a.ID] || (a.Turn != 0 && a.Turn != w.turn) {
			continue
		}
		w.asked[a.ID] = true
		p := TurnProgress{Kind: ProgressApproval, Turn: w.turn, Step: a.Step, Approval: &a}
		if i := slices.IndexFunc(st.Calls, func(c wire.CallState) bool { return c.ID == a.CallID }); i >= 0 {
			c := st.Calls[i]
			p.Call = &c
		}
		if !emit(p) {
			return false
		}
	}
	return true
}

// textProgress yields the text the running model call streamed since the
// last poll, from the live text when it follows the turn, else from the
// model activity's heartbeat details. A retried call (a new attempt)
// streams its text again from the start: what the earlier attempt showed
// was discarded, and the next text yielded carries Restart.
func (w *turnWatch) textProgress(ctx context.Context, emit func(TurnProgress) bool) bool {
	p, ok := w.live.progress()
	if ok && p.Turn == w.turn && p.Step > w.step {
		return true // a step the polls have not seen start: the next poll will
	}
	if !ok || p.Turn != w.turn {
		// No live text of the turn (yet): the heartbeat details.
		var err error
		p, ok, err = w.c.modelProgress(ctx, w.id)
		if err != nil || !ok {
			return true
		}
	}
	if p.Turn != w.turn || w.textDone[p.Step] {
		return true
	}
	switch {
	case p.Step != w.textStep:
		w.textStep, w.textAttempt, w.restart = p.Step, p.Attempt, false
		w.resetText()
	case p.Attempt < w.textAttempt:
		return true // an earlier attempt's details, not replaced yet
	case p.Attempt > w.textAttempt:
		w.textAttempt = p.Attempt
		w.restart = w.restart || w.shown > 0
		w.resetText()
	}
	if p.Reasoning && p.Text == "" && w.shown == 0 {
		if w.reasoned {
			return true
		}
		w.reasoned = true
		return emit(TurnProgress{Kind: ProgressReasoning, Turn: p.Turn, Step: p.Step})
	}
	end := p.TextOffset + int64(len(p.Text))
	if end <= w.shown {
		return true
	}
	from := w.shown - p.TextOffset
	gap := from < 0
	if gap {
		from = 0
		w.gapped = true
	}
	text := p.Text[from:]
	w.last, w.lastOff = text, end-int64(len(text))
	if !w.gapped {
		w.yielded.WriteString(text)
	}
	w.shown = end
	restart := w.restart
	w.restart = false
	return emit(TurnProgress{Kind: ProgressText, Turn: p.Turn, Step: p.Step, Text: text, Gap: gap, Restart: restart})
}

// resetText forgets the text yielded for the current step.
func (w *turnWatch) resetText() {
	w.shown, w.gapped, w.last, w.lastOff, w.reasoned = 0, false, "", 0, false
	w.yielded.Reset()
}

// modelProgress reads the heartbeat details of the session's pending model
// activity.
func (c *Client) modelProgress(ctx context.Context, id string) (wire.ModelProgress, bool, error) {
	var p wire.ModelProgress
	d, err := c.c.DescribeWorkflow(ctx, wire.WorkflowID(id), "")
	if err != nil {
		return p, false, callError("describe the workflow of session", id, err)
	}
	if d.RawResponse == nil {
		return p, false, nil
	}
	for _, pa := range d.RawResponse.GetPendingActivities() {
		if pa.GetActivityType().GetName() != wire.CallModelActivity || pa.GetHeartbeatDetails() == nil {
			continue
		}
		if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p); err != nil {
			return p, false, fmt.Errorf("decode the model progress of session %q: %w", id, err)
		}
		return p, true, nil
	}
	return p, false, nil
}

// AnswerText returns the text of the last assistant/message of events
// (an ended turn's), or "".
func AnswerText(events []wire.Event) string {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type != wire.TypeAssistantMessage {
			continue
		}
		var m wire.AssistantMessage
		if err := events[i].Decode(wire.TypeAssistantMessage, &m); err != nil {
			return ""
		}
		return messageText(m)
	}
	return ""
}
