package session

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/sessionflow/sessionflow/wire"
)

// Error codes of synthetic tool results (FORMAT.md §5.3).
const (
	// ToolOutcomeUnknown is the code of a result synthesized for a call that
	// was recorded (tool/call seen) but has no durable result.
	ToolOutcomeUnknown = "TOOL_OUTCOME_UNKNOWN"
	// ToolNotStarted is the code of a result synthesized for a call the
	// assistant requested but the harness never recorded as started.
	ToolNotStarted = "TOOL_NOT_STARTED"
)

// Error names of synthetic tool results (FORMAT.md §5.3).
const (
	// ToolOutcomeUnknownErrorName goes with ToolOutcomeUnknown.
	ToolOutcomeUnknownErrorName = "ToolOutcomeUnknownError"
	// ToolNotStartedErrorName goes with ToolNotStarted.
	ToolNotStartedErrorName = "ToolNotStartedError"
)

// Model-facing texts of synthetic tool results, byte-for-byte from FORMAT.md §5.3.
const (
	// ToolOutcomeUnknownText is the result text of a recorded call.
	ToolOutcomeUnknownText = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."
	// ToolNotStartedText is the result text of an unrecorded call.
	ToolNotStartedText = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
)

// InterruptedToolResultIDPrefix starts the message id of a synthetic tool
// result: "interrupted-tool-result-<callId>-<seq>", seq being the result's
// own seq.
const InterruptedToolResultIDPrefix = "interrupted-tool-result-"

// PendingCall is a tool call of the open turn that has no result yet.
type PendingCall struct {
	// CallID is the id of the assistant's tool-call block.
	CallID string
	// Step is the step of the assistant message that requested the call.
	Step int64
	// CallSeq is the seq of the tool/call event that recorded the call, or -1
	// when the call was not recorded.
	CallSeq int64
}

// Recorded reports whether a tool/call event recorded the call as started.
func (p PendingCall) Recorded() bool { return p.CallSeq >= 0 }

// OpenTurn describes the unfinished turn at the end of a log (FORMAT.md §5.3).
type OpenTurn struct {
	// Turn is the number of the open turn.
	Turn int64
	// Step is the open step, or 0 when no step is open.
	Step int64
	// PendingCalls are the calls without a result, in insertion order.
	PendingCalls []PendingCall
}

// TurnScanner runs the crash-repair scan of FORMAT.md §5.3 incrementally: feed it
// every event of a log in order with Observe, then ask for the open turn or
// the closers. It keeps only the state of the scan (the open turn, its open
// step and the pending calls of the current step), so a huge log can be
// streamed through it. The zero value is ready to use. A TurnScanner is not
// safe for concurrent use.
type TurnScanner struct {
	open     bool
	turn     int64
	step     int64 // 0 = none
	lastTurn int64 // turn of the last turn/start observed
	observed bool
	lastSeq  int64
	lastTime int64

	// pending is an insertion-ordered map: calls holds the entries (dead ones
	// are tombstones until compaction) and index maps a live call id to its
	// entry.
	calls []pendingEntry
	index map[string]int
	dead  int
}

type pendingEntry struct {
	call PendingCall
	live bool
}

// Observe advances the scan over e, the next event of the log. A
// repair-relevant event whose payload cannot be read (turn/start without a
// turn, step/start without a step, assistant/message without step or
// message.content or with a tool-call block lacking an id, tool/call without
// callId, tool/result without message.source.callId) returns an error and
// leaves the scanner unchanged. Events of other types are only counted.
func (s *TurnScanner) Observe(e Event) error {
	f, err := readRepairFacts(e)
	if err != nil {
		return err
	}
	switch e.Type {
	case wire.TypeTurnStart:
		s.open, s.turn, s.step, s.lastTurn = true, f.turn, 0, f.turn
		s.clearPending()
	case wire.TypeTurnEnd:
		s.open, s.turn, s.step = false, 0, 0
		s.clearPending()
	case wire.TypeStepStart:
		s.step = f.step
	case wire.TypeStepEnd:
		s.step = 0
		s.clearPending()
	case wire.TypeAssistantMessage:
		for _, id := range f.callIDs {
			s.setPending(id, f.step)
		}
	case wire.TypeToolCall:
		if i, ok := s.index[f.callID]; ok && f.hasCallID {
			s.calls[i].call.CallSeq = e.Seq
		}
	case wire.TypeToolResult:
		s.deletePending(f.callID)
	}
	s.observed, s.lastSeq, s.lastTime = true, e.Seq, e.Time
	return nil
}

// repairFacts are the payload fields the crash-repair scan reads from one
// event.
type repairFacts struct {
	turn, step int64
	callIDs    []string // tool-call block ids of an assistant/message
	callID     string   // callId of a tool/call, message.source.callId of a tool/result
	hasCallID  bool     // a tool/call's callId is a string
}

// readRepairFacts decodes what the crash-repair scan needs from e: the rules
// of FORMAT.md §5.3 on repair-relevant payloads. They depend on the event alone,
// never on the scan state, so an append can check a batch with them without
// the log before it. Events of other types have no facts.
func readRepairFacts(e Event) (repairFacts, error) {
	var f repairFacts
	switch e.Type {
	case wire.TypeTurnStart:
		var p turnShape
		if err := decodeShape(e, &p); err != nil {
			return f, err
		}
		if p.Turn == nil {
			return f, payloadError(e, "data lacks %q", "turn")
		}
		if err := checkCount(e, "turn", int64(*p.Turn), 1); err != nil {
			return f, err
		}
		f.turn = int64(*p.Turn)
	case wire.TypeStepStart:
		var p stepShape
		if err := decodeShape(e, &p); err != nil {
			return f, err
		}
		if p.Step == nil {
			return f, payloadError(e, "data lacks %q", "step")
		}
		if err := checkCount(e, "step", int64(*p.Step), 1); err != nil {
			return f, err
		}
		f.step = int64(*p.Step)
	case wire.TypeAssistantMessage:
		var p assistantShape
		if err := decodeShape(e, &p); err != nil {
			return f, err
		}
		ids, err := p.toolCalls(e)
		if err != nil {
			return f, err
		}
		f.step, f.callIDs = int64(*p.Step), ids
	case wire.TypeToolCall:
		var p callShape
		if err := decodeShape(e, &p); err != nil {
			return f, err
		}
		// A callId that is absent or not a string matches no pending call,
		// as in the harness's repair.
		if len(p.CallID) > 0 && p.CallID[0] == '"' {
			if err := json.Unmarshal(p.CallID, &f.callID); err != nil {
				return f, payloadError(e, "malformed data: %v", err)
			}
			f.hasCallID = true
		}
	case wire.TypeToolResult:
		var p resultShape
		if err := decodeShape(e, &p); err != nil {
			return f, err
		}
		id, err := p.callID(e)
		if err != nil {
			return f, err
		}
		f.callID = id
	}
	return f, nil
}

// setPending inserts or re-inserts a call: an existing key keeps its place
// and gets the new step with callSeq reset (JavaScript Map.set semantics).
func (s *TurnScanner) setPending(id string, step int64) {
	if i, ok := s.index[id]; ok {
		s.calls[i].call = PendingCall{CallID: id, Step: step, CallSeq: -1}
		return
	}
	if s.index == nil {
		s.index = make(map[string]int)
	}
	s.index[id] = len(s.calls)
	s.calls = append(s.calls, pendingEntry{call: PendingCall{CallID: id, Step: step, CallSeq: -1}, live: true})
}

// deletePending removes a call if present; a later re-insertion goes last.
func (s *TurnScanner) deletePending(id string) {
	i, ok := s.index[id]
	if !ok {
		return
	}
	delete(s.index, id)
	s.calls[i].live = false
	s.dead++
	if s.dead > 32 && s.dead > len(s.calls)/2 {
		live := s.calls[:0]
		for _, c := range s.calls {
			if c.live {
				s.index[c.call.CallID] = len(live)
				live = append(live, c)
			}
		}
		clear(s.calls[len(live):])
		s.calls, s.dead = live, 0
	}
}

func (s *TurnScanner) clearPending() {
	clear(s.calls)
	s.calls = s.calls[:0]
	clear(s.index)
	s.dead = 0
}

// LastTurn returns the turn of the last turn/start observed, 0 if none.
func (s *TurnScanner) LastTurn() int64 { return s.lastTurn }

// OpenTurn returns the open turn with its open step and pending calls (a
// fresh slice), or false when the observed log is balanced or empty.
func (s *TurnScanner) OpenTurn() (OpenTurn, bool) {
	if !s.open {
		return OpenTurn{}, false
	}
	ot := OpenTurn{Turn: s.turn, Step: s.step}
	for _, c := range s.calls {
		if c.live {
			ot.PendingCalls = append(ot.PendingCalls, c.call)
		}
	}
	return ot, true
}

// Closers synthesizes the closers of FORMAT.md §5.3 for the observed log, whose
// final event is last (it must be the last event observed): one tool/result
// per pending call in insertion order, then step/end if a step is open, then
// turn/end {interrupted}. Seqs continue from last.Seq+1 and every closer has
// last.Time. It returns nil when no turn is open. The closers are meant to be
// appended as one batch.
func (s *TurnScanner) Closers(last Event) ([]Event, error) {
	if !s.open {
		return nil, nil
	}
	if s.observed && last.Seq != s.lastSeq {
		return nil, fmt.Errorf("closers: last event seq %d is not the last observed seq %d", last.Seq, s.lastSeq)
	}
	if last.Time < -wire.MaxSafeInteger || last.Time > wire.MaxSafeInteger {
		return nil, fmt.Errorf("closers: last event time must be a safe integer, got %d", last.Time)
	}
	ot, _ := s.OpenTurn()
	n := int64(len(ot.PendingCalls)) + 1
	if ot.Step != 0 {
		n++
	}
	if last.Seq < 0 || last.Seq > wire.MaxSafeInteger-n {
		return nil, fmt.Errorf("closers: seqs after %d would exceed the safe-integer range", last.Seq)
	}
	out := make([]Event, 0, n)
	seq := last.Seq + 1
	for _, call := range ot.PendingCalls {
		e, err := interruptedToolResult(ot.Turn, call, seq, last.Time)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		seq++
	}
	if ot.Step != 0 {
		e, err := NewEvent(wire.TypeStepEnd, seq, last.Time, wire.StepEnd{Turn: ot.Turn, Step: ot.Step})
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		seq++
	}
	e, err := NewEvent(wire.TypeTurnEnd, seq, last.Time, wire.TurnEnd{Turn: ot.Turn, Reason: wire.TurnEndReason{Kind: wire.TurnEndInterrupted}})
	if err != nil {
		return nil, err
	}
	return append(out, e), nil
}

// interruptedToolResult builds the synthetic tool/result for one call.
func interruptedToolResult(turn int64, call PendingCall, seq, time int64) (Event, error) {
	text, toolErr := ToolNotStartedText, wire.ToolError{Name: ToolNotStartedErrorName, Code: ToolNotStarted}
	if call.Recorded() {
		text, toolErr = ToolOutcomeUnknownText, wire.ToolError{Name: ToolOutcomeUnknownErrorName, Code: ToolOutcomeUnknown}
	}
	data := wire.ToolResult{
		Turn: turn,
		Step: call.Step,
		Message: wire.ToolResultMessage{
			ID:     InterruptedToolResultIDPrefix + call.CallID + "-" + strconv.FormatInt(seq, 10),
			Role:   wire.RoleUser,
			Source: wire.ToolResultSource{Kind: wire.SourceKindTool, CallID: call.CallID},
			Content: []wire.ToolResultContent{{
				Type:       wire.BlockToolResult,
				ToolCallID: call.CallID,
				IsError:    true,
				Content:    []wire.TextContent{{Type: wire.BlockText, Text: text}},
			}},
		},
		Error: &toolErr,
	}
	e, err := NewEvent(wire.TypeToolResult, seq, time, data)
	if err != nil {
		return Event{}, err
	}
	e.SurfaceOp = AppendOp()
	if call.Recorded() {
		e.SourceEventSeqs = []int64{call.CallSeq}
	}
	if err := e.Validate(); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return e, nil
}

// ScanOpenTurn runs the scan of FORMAT.md §5.3 over a whole log and returns the
// open turn, or false when the log is balanced or empty. Malformed payloads
// of repair-relevant events are errors (see TurnScanner.Observe).
func ScanOpenTurn(events []Event) (OpenTurn, bool, error) {
	var s TurnScanner
	for _, e := range events {
		if err := s.Observe(e); err != nil {
			return OpenTurn{}, false, err
		}
	}
	ot, ok := s.OpenTurn()
	return ot, ok, nil
}

// InterruptedTurnClosers is the pure crash-repair function of FORMAT.md §5.3: the
// events that close the unfinished turn at the end of events (tool results
// for pending calls, step/end if a step is open, turn/end {interrupted}),
// numbered from the last event's seq + 1 and stamped with its time; nil when
// no turn is open.
func InterruptedTurnClosers(events []Event) ([]Event, error) {
	var s TurnScanner
	for _, e := range events {
		if err := s.Observe(e); err != nil {
			return nil, err
		}
	}
	if len(events) == 0 {
		return nil, nil
	}
	return s.Closers(events[len(events)-1])
}
