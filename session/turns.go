package session

import (
	"fmt"
	"strconv"

	"github.com/sessionflow/sessionflow/wire"
)

// LastTurn returns the turn of the last turn/start in events, 0 if none
// (FORMAT.md §1.3). A turn/start whose payload cannot be read is skipped; use a
// TurnScanner (its Observe reports such payloads) when the log is not
// already validated.
func LastTurn(events []Event) int64 {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type != wire.TypeTurnStart {
			continue
		}
		if p, err := events[i].TurnStart(); err == nil {
			return p.Turn
		}
	}
	return 0
}

// NextTurn returns the number of the next turn: LastTurn(events) + 1.
func NextTurn(events []Event) int64 { return LastTurn(events) + 1 }

// NextSeq returns the seq the next appended event gets: the last event's seq
// + 1, or 0 for an empty log. For a contiguous log this is len(events).
func NextSeq(events []Event) int64 {
	if len(events) == 0 {
		return 0
	}
	return events[len(events)-1].Seq + 1
}

// SeqMismatchError rejects an append batch that does not continue the log
// contiguously (FORMAT.md §4.6).
type SeqMismatchError struct {
	// SessionID names the session.
	SessionID string
	// Expected is the seq the event at Index needed (cursor + Index).
	Expected int64
	// Index is the position of the first offending event in the batch.
	Index int64
	// Got is the seq that event carried.
	Got int64
}

// Error returns the reference text `append seq mismatch for "<id>": expected
// <cursor+k> at index <k>, got <seq>`; the id is written verbatim between the
// quotes, as the reference does.
func (e *SeqMismatchError) Error() string {
	return "append seq mismatch for \"" + e.SessionID + "\": expected " + strconv.FormatInt(e.Expected, 10) +
		" at index " + strconv.FormatInt(e.Index, 10) + ", got " + strconv.FormatInt(e.Got, 10)
}

// CheckContiguous checks that events[k].Seq == cursor + k for every k
// (FORMAT.md §4.6) and returns a *SeqMismatchError for the first violation, nil
// otherwise. An empty batch always passes. A negative cursor is an error.
func CheckContiguous(id string, cursor int64, events []Event) error {
	if cursor < 0 || cursor > wire.MaxSafeInteger {
		return fmt.Errorf("append cursor for %q must be a non-negative safe integer, got %d", id, cursor)
	}
	for k, e := range events {
		if want := cursor + int64(k); e.Seq != want {
			return &SeqMismatchError{SessionID: id, Expected: want, Index: int64(k), Got: e.Seq}
		}
	}
	return nil
}
