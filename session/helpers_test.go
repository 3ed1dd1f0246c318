package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// mk builds an event with raw JSON data at seq and time 1000+seq.
func mk(typ string, seq int64, data string) Event {
	return Event{Type: typ, Seq: seq, Time: 1000 + seq, Data: json.RawMessage(data)}
}

// encodeLine marshals an event the way the store writes it.
func encodeLine(t *testing.T, e Event) string {
	t.Helper()
	b, err := e.MarshalJSON()
	require.NoError(t, err)
	return string(b)
}

// decodeLine strictly decodes one event line.
func decodeLine(line string) (Event, error) {
	var e Event
	err := json.Unmarshal([]byte(line), &e)
	return e, err
}

func negZero() float64 { z := 0.0; return -z }

func nan() float64 { z := 0.0; return z / z }
