package session

import (
	"encoding/json"
	"fmt"

	"github.com/sessionflow/sessionflow/wire"
)

// Wire returns the event as the plain envelope a client sends and reads
// (wire.Event): the same JSON, its data canonical.
func (e Event) Wire() wire.Event {
	w := wire.Event{Type: e.Type, Seq: e.Seq, Time: e.Time, Data: e.Data, Ignorable: e.Ignorable}
	if e.SurfaceOp != nil {
		if op, err := e.SurfaceOp.MarshalJSON(); err == nil {
			w.SurfaceOp = op
		}
	}
	if e.SourceEventSeqs != nil {
		w.SourceEventSeqs = append(make([]int64, 0, len(e.SourceEventSeqs)), e.SourceEventSeqs...)
	}
	return w
}

// WireEvents converts events to plain envelopes (Event.Wire); nil stays nil.
func WireEvents(events []Event) []wire.Event {
	if events == nil {
		return nil
	}
	out := make([]wire.Event, len(events))
	for i, e := range events {
		out[i] = e.Wire()
	}
	return out
}

// FromWire decodes a plain envelope with this package's rules: the strict
// decoding of Event.UnmarshalJSON (not the event rules of Validate).
func FromWire(w wire.Event) (Event, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return Event{}, fmt.Errorf("event (seq %d): %w", w.Seq, err)
	}
	var e Event
	if err := e.UnmarshalJSON(b); err != nil {
		return Event{}, fmt.Errorf("event (seq %d): %w", w.Seq, err)
	}
	return e, nil
}

// FromWireEvents decodes plain envelopes with FromWire; nil stays nil.
func FromWireEvents(events []wire.Event) ([]Event, error) {
	if events == nil {
		return nil, nil
	}
	out := make([]Event, len(events))
	for i, w := range events {
		e, err := FromWire(w)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// ParseAppendLineWire is ParseAppendLine as a wire.LineParser: a client
// that sets it (client.Options.ParseLine) refuses, before anything is sent,
// a line this build's rules refuse, and counts sizes as the session's
// Append validator does.
func ParseAppendLineWire(line []byte) (wire.Event, int, error) {
	e, n, err := ParseAppendLine(line)
	if err != nil {
		return wire.Event{}, n, err
	}
	return e.Wire(), n, nil
}
