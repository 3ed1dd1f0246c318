package agent

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// abortedBeforeDispatchText is the model-facing text of the result of a
// call the turn never dispatched.
const abortedBeforeDispatchText = "Error: tool call aborted before dispatch"

// stepCalls is what the log holds about the tool calls of one
// assistant/message: the calls in model order, the seq of each call's
// tool/call and each call's tool/result, among the events of the message's
// step that follow it.
type stepCalls struct {
	turn, step int64
	msgSeq     int64
	calls      []wire.ContentBlock
	callSeq    map[string]int64
	result     map[string]session.Event
	// asked are the calls' approval/asked events, by call id; decided the
	// outcomes of approval/decided, by approval id.
	asked   map[string]askedEvent
	decided map[string]string
	// closed reports that the message's step has ended (or another step or
	// turn began): nothing may be stored for its calls any more.
	closed bool
	// opened reports that the step ended with the next one opened at once
	// (the step/end of step, then the step/start of step+1).
	opened bool
}

// scanStep reads the calls of the assistant/message at tail[0] (seq
// msgSeq) of turn: the events after it up to the end of its step.
func scanStep(tail []session.Event, msgSeq, turn int64) (*stepCalls, error) {
	if len(tail) == 0 || tail[0].Seq != msgSeq || tail[0].Type != wire.TypeAssistantMessage {
		return nil, invalidLog("no assistant/message at seq %d", msgSeq)
	}
	m, err := tail[0].AssistantMessage()
	if err != nil {
		return nil, invalidLog("assistant/message at seq %d: %v", msgSeq, err)
	}
	if m.Turn != turn {
		return nil, invalidLog("the assistant/message at seq %d belongs to turn %d, not %d", msgSeq, m.Turn, turn)
	}
	sc := &stepCalls{turn: turn, step: m.Step, msgSeq: msgSeq, calls: m.ToolCalls(), callSeq: map[string]int64{}, result: map[string]session.Event{}, asked: map[string]askedEvent{}, decided: map[string]string{}}
	for i, e := range tail[1:] {
		switch e.Type {
		case wire.TypeStepEnd, wire.TypeTurnEnd, wire.TypeAssistantMessage, wire.TypeStepStart, wire.TypeTurnStart:
			sc.closed = true
			sc.opened = opensNextStep(tail[1+i:], turn, m.Step)
			return sc, nil
		case wire.TypeToolCall:
			c, err := e.ToolCall()
			if err != nil {
				return nil, err
			}
			if _, ok := sc.callSeq[c.CallID]; !ok {
				sc.callSeq[c.CallID] = e.Seq
			}
		case wire.TypeApprovalAsked:
			var a askedData
			if err := json.Unmarshal(e.Data, &a); err != nil {
				return nil, invalidLog("approval/asked at seq %d: %v", e.Seq, err)
			}
			if _, ok := sc.asked[a.CallID]; !ok && a.CallID != "" {
				sc.asked[a.CallID] = askedEvent{askedData: a, seq: e.Seq}
			}
		case wire.TypeApprovalDecided:
			var d decidedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return nil, invalidLog("approval/decided at seq %d: %v", e.Seq, err)
			}
			if _, ok := sc.decided[d.ID]; !ok {
				sc.decided[d.ID] = d.Outcome
			}
		case wire.TypeToolResult:
			r, err := e.ToolResult()
			if err != nil {
				return nil, err
			}
			if _, ok := sc.result[r.Message.Source.CallID]; !ok {
				sc.result[r.Message.Source.CallID] = e.Clone()
			}
		}
	}
	return sc, nil
}

// opensNextStep reports whether events begin with the end of step of turn
// and the start of step+1.
func opensNextStep(events []session.Event, turn, step int64) bool {
	if len(events) < 2 || events[0].Type != wire.TypeStepEnd || events[1].Type != wire.TypeStepStart {
		return false
	}
	se, err := events[0].StepEnd()
	if err != nil || se.Turn != turn || se.Step != step {
		return false
	}
	ss, err := events[1].StepStart()
	return err == nil && ss.Turn == turn && ss.Step == step+1
}

// nextStepEvents are the end of step of turn and the start of step+1, at
// seq and seq+1.
func nextStepEvents(turn, step, seq, t int64) ([]session.Event, error) {
	end, err := session.NewEvent(wire.TypeStepEnd, seq, t, wire.StepEnd{Turn: turn, Step: step})
	if err != nil {
		return nil, err
	}
	start, err := session.NewEvent(wire.TypeStepStart, seq+1, t, wire.StepStart{Turn: turn, Step: step + 1})
	if err != nil {
		return nil, err
	}
	return []session.Event{end, start}, nil
}

// block returns the tool-call block of call id.
func (sc *stepCalls) block(id string) (wire.ContentBlock, int, bool) {
	for i, c := range sc.calls {
		if c.ID == id {
			return c, i, true
		}
	}
	return wire.ContentBlock{}, -1, false
}

// stagingKey names the staged result of a call: a call id is unique within
// its step.
func stagingKey(turn, step int64, callID string) string {
	return "tool-result/" + strconv.FormatInt(turn, 10) + "/" + strconv.FormatInt(step, 10) + "/" + callID
}

// stagedResult is a finished call's result waiting for its turn in model
// order: the tool's result, or the outcome-unknown result of a call that
// must not run again.
type stagedResult struct {
	Result  *tool.Result `json:"result,omitempty"`
	Unknown bool         `json:"unknown,omitempty"`
	Reran   bool         `json:"reran,omitempty"`
}

// event builds the tool/result of the staged result at seq.
func (r stagedResult) event(turn, step int64, callID string, callSeq, seq, t int64) (session.Event, error) {
	if r.Unknown || r.Result == nil {
		return session.OutcomeUnknownResult(turn, step, callID, callSeq, seq, t)
	}
	return toolResultEvent(turn, step, callID, callSeq, seq, t, *r.Result)
}

// outcome classifies the staged result.
func (r stagedResult) outcome() (isError bool, code string) {
	if r.Unknown || r.Result == nil {
		return true, session.ToolOutcomeUnknown
	}
	if r.Result.Error != nil {
		code = r.Result.Error.Code
	}
	return r.Result.IsError, code
}

// toolResultID is the message id of a call's tool/result.
func toolResultID(turn, step int64, callID string) string {
	return "tool-result-" + strconv.FormatInt(turn, 10) + "-" + strconv.FormatInt(step, 10) + "-" + callID
}

// toolResultEvent builds the tool/result of a tool's result at seq, citing
// the tool/call at callSeq.
func toolResultEvent(turn, step int64, callID string, callSeq, seq, t int64, r tool.Result) (session.Event, error) {
	content := []wire.TextContent{}
	for _, b := range r.Content {
		if b.Type == provider.BlockText {
			content = append(content, wire.TextContent{Type: wire.BlockText, Text: b.Text})
		}
	}
	data := wire.ToolResult{
		Turn: turn, Step: step,
		Message: wire.ToolResultMessage{
			ID: toolResultID(turn, step, callID), Role: wire.RoleUser,
			Source: wire.ToolResultSource{Kind: wire.SourceKindTool, CallID: callID},
			Content: []wire.ToolResultContent{{
				Type: wire.BlockToolResult, ToolCallID: callID, IsError: r.IsError, Content: content,
			}},
		},
	}
	if r.IsError {
		te := wire.ToolError{Name: tool.NameFailed, Code: tool.CodeFailed}
		if r.Error != nil {
			te.Name, te.Code = r.Error.Name, r.Error.Code
			if r.Error.Reason != "" {
				reason, err := json.Marshal(r.Error.Reason)
				if err != nil {
					return session.Event{}, err
				}
				te.Reason = reason
			}
		}
		data.Error = &te
	}
	if len(r.Meta) > 0 {
		if json.Valid(r.Meta) {
			data.Meta = r.Meta
		} else {
			slog.Warn("agent: a tool result's meta is not JSON; it is not stored", "callId", callID)
		}
	}
	return surfaceEvent(wire.TypeToolResult, seq, t, data, callSeq)
}

// surfaceEvent builds an appended surface event citing callSeq.
func surfaceEvent(typ string, seq, t int64, data any, callSeq int64) (session.Event, error) {
	e, err := session.NewEvent(typ, seq, t, data)
	if err != nil {
		return session.Event{}, err
	}
	e.SurfaceOp = session.AppendOp()
	if callSeq >= 0 {
		e.SourceEventSeqs = []int64{callSeq}
	}
	if err := e.Validate(); err != nil {
		return session.Event{}, fmt.Errorf("%w: %w", session.ErrInvalidEvent, err)
	}
	return e, nil
}

// toolCallEvent builds the tool/call of a call at seq.
func toolCallEvent(turn, step int64, c wire.ContentBlock, seq, t int64) (session.Event, error) {
	args, err := argumentsText(c.Arguments)
	if err != nil {
		return session.Event{}, err
	}
	return session.NewEvent(wire.TypeToolCall, seq, t, wire.ToolCall{Turn: turn, Step: step, CallID: c.ID, Name: c.Name, Arguments: args})
}

// notRunPair builds the tool/call and the result res of a call that was
// never run, at seq and seq+1.
func notRunPair(turn, step int64, c wire.ContentBlock, seq, t int64, res tool.Result) ([]session.Event, error) {
	call, err := toolCallEvent(turn, step, c, seq, t)
	if err != nil {
		return nil, err
	}
	r, err := toolResultEvent(turn, step, c.ID, seq, seq+1, t, res)
	if err != nil {
		return nil, err
	}
	return []session.Event{call, r}, nil
}

// resultOutcome classifies a stored tool/result.
func resultOutcome(e session.Event) (isError bool, code string) {
	r, err := e.ToolResult()
	if err != nil {
		return false, ""
	}
	for _, c := range r.Message.Content {
		isError = isError || c.IsError
	}
	if r.Error != nil {
		code = r.Error.Code
	}
	return isError, code
}
