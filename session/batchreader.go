package session

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/sessionflow/sessionflow/wire"
)

// ParseAppendLine decodes one JSONL line given for an append into an event
// a reader of this build can read back: valid JSON, the envelope rules of
// Validate, and a type known to this build or marked ignorable. It returns
// the event's encoded size as batch limits count it (its canonical encoding
// plus a newline).
func ParseAppendLine(line []byte) (Event, int, error) {
	var e Event
	if err := json.Unmarshal(line, &e); err != nil {
		return e, 0, fmt.Errorf("not a valid event: %w", err)
	}
	if err := e.Validate(); err != nil {
		return e, 0, fmt.Errorf("not a valid event: %w", err)
	}
	if !e.Interpretable() {
		return e, 0, fmt.Errorf("not a valid event: type %q is unknown to this build and not marked ignorable", e.Type)
	}
	enc, err := e.MarshalJSON()
	if err != nil {
		return e, 0, fmt.Errorf("not a valid event: %w", err)
	}
	return e, len(enc) + 1, nil
}

// NewBatchReader returns a BatchReader of r whose lines ParseAppendLine
// decodes: the batches of the events of this build's rules.
func NewBatchReader(r io.Reader, limits wire.BatchLimits) *wire.BatchReaderOf[Event] {
	return wire.NewBatchReaderOf(r, limits, ParseAppendLine)
}
