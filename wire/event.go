package wire

import (
	"encoding/json"
	"fmt"
)

// MaxSafeInteger is the largest integer a JSON number can carry without loss
// in the reference harness (2^53 - 1). Seqs, times, counts and offsets stay at
// or below it.
const MaxSafeInteger = 1<<53 - 1

// Event is one record of a session log as a client sends and reads it: the
// envelope of docs/FORMAT.md §1.1 as plain data. It encodes to the
// envelope's JSON, keys in the order type, seq, time, data, surfaceOp,
// sourceEventSeqs, ignorable, the optional ones omitted when absent (a nil
// SurfaceOp or SourceEventSeqs, a false Ignorable; an empty, non-nil
// SourceEventSeqs is written as []).
//
// Event checks nothing: the event rules (FORMAT.md §1), the strict decoding
// and the canonical encoding are package session's (session.Event), which
// the workflows decode every request with; session.Wire and session.FromWire
// convert.
type Event struct {
	// Type is the event discriminator, e.g. "turn/start".
	Type string `json:"type"`
	// Seq equals the event's index in the log.
	Seq int64 `json:"seq"`
	// Time is the Unix time in milliseconds at which the event was appended.
	Time int64 `json:"time"`
	// Data is the payload, a JSON object.
	Data json.RawMessage `json:"data"`
	// SurfaceOp is the surface operation of a surface-eligible type,
	// verbatim: "append" or a replace object.
	SurfaceOp json.RawMessage `json:"surfaceOp,omitzero"`
	// SourceEventSeqs lists earlier events this one cites.
	SourceEventSeqs []int64 `json:"sourceEventSeqs,omitzero"`
	// Ignorable marks a log-only event an older reader may skip.
	Ignorable bool `json:"ignorable,omitzero"`
}

// Decode decodes the event's data into v after checking that the event is
// of type typ. It checks no payload rule: it reads what a valid stored event
// holds.
func (e Event) Decode(typ string, v any) error {
	if e.Type != typ {
		return fmt.Errorf("event (seq %d) is a %q event, not %q", e.Seq, e.Type, typ)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("%s event (seq %d): malformed data: %w", e.Type, e.Seq, err)
	}
	return nil
}
