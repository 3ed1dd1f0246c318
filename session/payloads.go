package session

import (
	"encoding/json"
	"fmt"

	"github.com/sessionflow/sessionflow/wire"
)

// NewEvent builds an event of type typ at seq and time whose data is v
// encoded by MarshalData (a Go value, or a json.RawMessage). The result must
// pass Validate; a lossless failure matches ErrNotLossless and a broken
// envelope rule matches ErrInvalidEvent. Set SurfaceOp and SourceEventSeqs
// on the result for surface events and Validate again if needed.
func NewEvent(typ string, seq, time int64, v any) (Event, error) {
	data, err := MarshalData(v)
	if err != nil {
		return Event{}, fmt.Errorf("%s event data: %w", typ, err)
	}
	e := Event{Type: typ, Seq: seq, Time: time, Data: data}
	if err := e.Validate(); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return e, nil
}

// payloadError reports a payload that cannot be read.
func payloadError(e Event, format string, args ...any) error {
	return fmt.Errorf("%s event (seq %d): %s", e.Type, e.Seq, fmt.Sprintf(format, args...))
}

// decodePayload checks the event type, that Data is an object holding every
// required key with a non-null value, and decodes it into v.
func decodePayload(e Event, typ string, v any, required ...string) error {
	if e.Type != typ {
		return fmt.Errorf("event (seq %d) is a %q event, not %q", e.Seq, e.Type, typ)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.Data, &fields); err != nil || fields == nil {
		return payloadError(e, "data is not a JSON object")
	}
	for _, k := range required {
		if raw, ok := fields[k]; !ok || string(raw) == "null" {
			return payloadError(e, "data lacks %q", k)
		}
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return payloadError(e, "malformed data: %v", err)
	}
	return nil
}

// checkCount checks that a turn or step number is a safe integer >= min.
func checkCount(e Event, name string, v, min int64) error {
	if v < min || v > wire.MaxSafeInteger {
		return payloadError(e, "data.%s must be a safe integer >= %d, got %d", name, min, v)
	}
	return nil
}

// TurnStart decodes the data of a turn/start event. Turn must be >= 1.
func (e Event) TurnStart() (wire.TurnStart, error) {
	var p wire.TurnStart
	if err := decodePayload(e, wire.TypeTurnStart, &p, "turn"); err != nil {
		return wire.TurnStart{}, err
	}
	if err := checkCount(e, "turn", p.Turn, 1); err != nil {
		return wire.TurnStart{}, err
	}
	return p, nil
}

// TurnEnd decodes the data of a turn/end event; reason.kind must be a
// non-empty string.
func (e Event) TurnEnd() (wire.TurnEnd, error) {
	var p wire.TurnEnd
	if err := decodePayload(e, wire.TypeTurnEnd, &p, "turn", "reason"); err != nil {
		return wire.TurnEnd{}, err
	}
	if err := checkCount(e, "turn", p.Turn, 0); err != nil {
		return wire.TurnEnd{}, err
	}
	if p.Reason.Kind == "" {
		return wire.TurnEnd{}, payloadError(e, "data.reason.kind must be a non-empty string")
	}
	return p, nil
}

// StepStart decodes the data of a step/start event. Step must be >= 1.
func (e Event) StepStart() (wire.StepStart, error) {
	var p wire.StepStart
	if err := decodePayload(e, wire.TypeStepStart, &p, "turn", "step"); err != nil {
		return wire.StepStart{}, err
	}
	if err := checkCount(e, "turn", p.Turn, 0); err != nil {
		return wire.StepStart{}, err
	}
	if err := checkCount(e, "step", p.Step, 1); err != nil {
		return wire.StepStart{}, err
	}
	return p, nil
}

// StepEnd decodes the data of a step/end event.
func (e Event) StepEnd() (wire.StepEnd, error) {
	var p wire.StepEnd
	if err := decodePayload(e, wire.TypeStepEnd, &p, "turn", "step"); err != nil {
		return wire.StepEnd{}, err
	}
	if err := checkCount(e, "turn", p.Turn, 0); err != nil {
		return wire.StepEnd{}, err
	}
	if err := checkCount(e, "step", p.Step, 0); err != nil {
		return wire.StepEnd{}, err
	}
	return p, nil
}

// ToolCall decodes the data of a tool/call event; callId is required.
func (e Event) ToolCall() (wire.ToolCall, error) {
	var p wire.ToolCall
	if err := decodePayload(e, wire.TypeToolCall, &p, "callId"); err != nil {
		return wire.ToolCall{}, err
	}
	if err := checkCount(e, "turn", p.Turn, 0); err != nil {
		return wire.ToolCall{}, err
	}
	if err := checkCount(e, "step", p.Step, 0); err != nil {
		return wire.ToolCall{}, err
	}
	return p, nil
}

// AssistantMessage decodes the data of an assistant/message event; step and
// message.content are required, and every tool-call block needs an id.
func (e Event) AssistantMessage() (wire.AssistantMessage, error) {
	var p wire.AssistantMessage
	if err := decodePayload(e, wire.TypeAssistantMessage, &p, "step", "message"); err != nil {
		return wire.AssistantMessage{}, err
	}
	var shape assistantShape
	if err := json.Unmarshal(e.Data, &shape); err != nil {
		return wire.AssistantMessage{}, payloadError(e, "malformed data: %v", err)
	}
	if _, err := shape.toolCalls(e); err != nil {
		return wire.AssistantMessage{}, err
	}
	if err := checkCount(e, "turn", p.Turn, 0); err != nil {
		return wire.AssistantMessage{}, err
	}
	if err := checkCount(e, "step", p.Step, 0); err != nil {
		return wire.AssistantMessage{}, err
	}
	return p, nil
}

// ToolResult decodes the data of a tool/result event; message.source.callId
// is required.
func (e Event) ToolResult() (wire.ToolResult, error) {
	var p wire.ToolResult
	if err := decodePayload(e, wire.TypeToolResult, &p, "message"); err != nil {
		return wire.ToolResult{}, err
	}
	var shape resultShape
	if err := json.Unmarshal(e.Data, &shape); err != nil {
		return wire.ToolResult{}, payloadError(e, "malformed data: %v", err)
	}
	if _, err := shape.callID(e); err != nil {
		return wire.ToolResult{}, err
	}
	if err := checkCount(e, "turn", p.Turn, 0); err != nil {
		return wire.ToolResult{}, err
	}
	if err := checkCount(e, "step", p.Step, 0); err != nil {
		return wire.ToolResult{}, err
	}
	return p, nil
}

// EndSeed decodes the data of a session/end-seed event. An inherited value
// other than a boolean (or null) is an error.
func (e Event) EndSeed() (wire.EndSeed, error) {
	var p wire.EndSeed
	if err := decodePayload(e, wire.TypeEndSeed, &p); err != nil {
		return wire.EndSeed{}, err
	}
	return p, nil
}

// The shapes below are the minimal views crash repair decodes, with pointers
// so that a missing field is told apart from a zero value.

type turnShape struct {
	Turn *wholeNumber `json:"turn"`
}

type stepShape struct {
	Step *wholeNumber `json:"step"`
}

// callShape is a tool/call's callId as the harness's repair reads it: a
// call whose callId is not a string matches no pending call.
type callShape struct {
	CallID json.RawMessage `json:"callId"`
}

type assistantShape struct {
	Step    *wholeNumber `json:"step"`
	Message *struct {
		Content *[]struct {
			// Type is compared with "tool-call" as the harness's repair
			// compares it: any other value, of any JSON type, is not a call.
			Type json.RawMessage `json:"type"`
			ID   *string         `json:"id"`
		} `json:"content"`
	} `json:"message"`
}

// wholeNumber is a JSON number with an integer value in any spelling the
// harness's JSON.parse reads as one (2, 2.0, 2e0), in the safe range.
type wholeNumber int64

// UnmarshalJSON decodes a whole number.
func (n *wholeNumber) UnmarshalJSON(b []byte) error {
	v, err := parseSafeIntSigned(b)
	if err != nil {
		return err
	}
	*n = wholeNumber(v)
	return nil
}

// toolCalls returns the ids of the tool-call blocks, in order.
func (s assistantShape) toolCalls(e Event) ([]string, error) {
	if s.Step == nil {
		return nil, payloadError(e, "data lacks %q", "step")
	}
	if err := checkCount(e, "step", int64(*s.Step), 0); err != nil {
		return nil, err
	}
	if s.Message == nil || s.Message.Content == nil {
		return nil, payloadError(e, "data lacks %q", "message.content")
	}
	var ids []string
	for i, b := range *s.Message.Content {
		if string(b.Type) != `"`+wire.BlockToolCall+`"` {
			continue
		}
		if b.ID == nil {
			return nil, payloadError(e, "tool-call block %d lacks %q", i, "id")
		}
		ids = append(ids, *b.ID)
	}
	return ids, nil
}

type resultShape struct {
	Message *struct {
		Source *struct {
			CallID *string `json:"callId"`
		} `json:"source"`
	} `json:"message"`
}

// callID returns message.source.callId.
func (s resultShape) callID(e Event) (string, error) {
	if s.Message == nil || s.Message.Source == nil || s.Message.Source.CallID == nil {
		return "", payloadError(e, "data lacks %q", "message.source.callId")
	}
	return *s.Message.Source.CallID, nil
}

// decodeShape decodes the event's data into a crash-repair shape.
func decodeShape(e Event, v any) error {
	if first := firstNonSpace(e.Data); first < 0 || e.Data[first] != '{' {
		return payloadError(e, "data is not a JSON object")
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return payloadError(e, "malformed data: %v", err)
	}
	return nil
}
