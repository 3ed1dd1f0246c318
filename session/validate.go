package session

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sessionflow/sessionflow/wire"
)

// ErrInvalidEvent is matched (errors.Is) by SnapshotBatch and NewEvent
// failures that break an envelope rule of Validate.
var ErrInvalidEvent = errors.New("invalid session event")

// ErrBatchNotLossless is matched (errors.Is) by a SnapshotBatch failure of the
// lossless-JSON rule. Its text is the reference's TypeError message.
var ErrBatchNotLossless = errors.New("session event batch is not losslessly JSON-serializable because it contains non-JSON-serializable data")

// BatchNotLosslessError is the error SnapshotBatch returns when an event's
// data breaks the lossless-JSON rule. Error() is exactly the text of
// ErrBatchNotLossless; the detail is reachable through errors.Is/As (it
// matches ErrBatchNotLossless, ErrNotLossless and *LosslessError).
type BatchNotLosslessError struct {
	// Index is the position of the offending event in the batch.
	Index int
	// Seq is the offending event's seq.
	Seq int64
	// Err is the lossless-JSON failure (a *LosslessError).
	Err error
}

// Error returns the reference text, without the detail.
func (e *BatchNotLosslessError) Error() string { return ErrBatchNotLossless.Error() }

// Unwrap exposes ErrBatchNotLossless and the detailed cause.
func (e *BatchNotLosslessError) Unwrap() []error { return []error{ErrBatchNotLossless, e.Err} }

// Detail describes the offending event and construct, for logs.
func (e *BatchNotLosslessError) Detail() string {
	return fmt.Sprintf("event at index %d (seq %d): data: %v", e.Index, e.Seq, e.Err)
}

// Validate checks the envelope rules of FORMAT.md §1.1:
//   - Type is a non-empty valid UTF-8 string;
//   - Seq and Time are non-negative safe integers (0..MaxSafeInteger);
//   - Data is present, a JSON object, and lossless JSON (CanonicalJSON);
//   - SurfaceOp appears only on surface-eligible types (SurfaceEligible), is
//     "append" or "replace", and a replace range satisfies
//     0 <= StartSeq <= EndSeq < Seq;
//   - SourceEventSeqs (nil = absent) appears only on surface-eligible types,
//     never on assistant/message, is non-empty when present, and holds
//     non-negative safe integers;
//   - Ignorable is not set on a surface-eligible type.
//
// The error is a descriptive one-line text (no sentinel); the store quotes it
// as the detail of a corrupt-log error.
func (e Event) Validate() error {
	if err := e.validateEnvelope(); err != nil {
		return err
	}
	return validateData(e.Data)
}

// validateEnvelope checks everything but the data.
func (e Event) validateEnvelope() error {
	if !utf8.ValidString(e.Type) {
		return fmt.Errorf("event type %q is not valid UTF-8", e.Type)
	}
	if e.Seq < 0 || e.Seq > wire.MaxSafeInteger {
		return fmt.Errorf("event seq must be a non-negative safe integer, got %d", e.Seq)
	}
	if e.Time < -wire.MaxSafeInteger || e.Time > wire.MaxSafeInteger {
		return fmt.Errorf("event time must be a safe integer, got %d", e.Time)
	}
	surface := SurfaceEligible(e.Type)
	if op := e.SurfaceOp; op != nil {
		if !surface {
			return fmt.Errorf("surfaceOp is not allowed on %q events", e.Type)
		}
		switch op.Op {
		case SurfaceAppend:
		case SurfaceReplace:
			// The range names surface nodes, which are earlier events; whether
			// they are on the surface, and in order, is the fold's rule
			// (FoldSurface): after a replacement the surface is not in seq
			// order, so start may exceed end.
			if op.StartSeq < 0 || op.EndSeq < 0 || op.StartSeq >= e.Seq || op.EndSeq >= e.Seq {
				return fmt.Errorf("surfaceOp replace range must name earlier events, got start %d, end %d, seq %d",
					op.StartSeq, op.EndSeq, e.Seq)
			}
		default:
			return fmt.Errorf("surfaceOp must be %q or %q, got %q", SurfaceAppend, SurfaceReplace, op.Op)
		}
	}
	if e.SourceEventSeqs != nil {
		switch {
		case !surface:
			return fmt.Errorf("sourceEventSeqs is not allowed on %q events", e.Type)
		case len(e.SourceEventSeqs) == 0 && e.Type != wire.TypeAssistantMessage:
			// An assistant/message may cite nothing: a message assembled
			// from no recorded chunk.
			return errors.New("sourceEventSeqs must be non-empty when present, except on assistant/message")
		}
		seen := make(map[int64]struct{}, len(e.SourceEventSeqs))
		for i, s := range e.SourceEventSeqs {
			if s < 0 || s > wire.MaxSafeInteger {
				return fmt.Errorf("sourceEventSeqs[%d] must be a non-negative safe integer, got %d", i, s)
			}
			if s >= e.Seq {
				return fmt.Errorf("sourceEventSeqs must cite earlier events: %d >= seq %d", s, e.Seq)
			}
			if _, dup := seen[s]; dup {
				return fmt.Errorf("sourceEventSeqs must not repeat a seq: %d", s)
			}
			seen[s] = struct{}{}
		}
	}
	if e.Ignorable && HarnessSurfaceEligible(e.Type) {
		return fmt.Errorf("ignorable is not allowed on surface-eligible %q events", e.Type)
	}
	return nil
}

// validateData checks that data is present, then applies the lossless-JSON
// rule. Any JSON value is a payload, as the harness takes it; the payloads
// sessionflow reads are checked where they are read (CheckAppendable).
func validateData(data []byte) error {
	first := firstNonSpace(data)
	if first < 0 {
		return errors.New("event data is missing")
	}
	if _, err := CanonicalJSON(data); err != nil {
		return fmt.Errorf("event data: %w", err)
	}
	return nil
}

// firstNonSpace returns the index of the first byte of b that is not JSON
// whitespace, or -1.
func firstNonSpace(b []byte) int {
	for i, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return i
		}
	}
	return -1
}

// SnapshotBatch validates a batch for append and returns a deep copy taken at
// call time, each Data canonicalized through CanonicalJSON, so later mutation
// of the caller's slice, events or bytes cannot reach the copy (FORMAT.md
// §1.4). The returned slice shares no memory with events; an empty batch gives
// an empty slice.
//
// Lossless-JSON failures are checked over the whole batch first, as the
// reference snapshots the batch in one traversal: the first one returns a
// *BatchNotLosslessError, whose Error() is exactly ErrBatchNotLossless's
// text and which matches ErrBatchNotLossless and ErrNotLossless. Then each
// event must pass Validate; a failure returns an error wrapping
// ErrInvalidEvent and the Validate error, naming the index and seq.
// Contiguity is not checked here (see CheckContiguous).
func SnapshotBatch(events []Event) ([]Event, error) {
	out := make([]Event, len(events))
	for i, e := range events {
		if firstNonSpace(e.Data) < 0 {
			continue // reported as a missing data below
		}
		data, err := CanonicalJSON(e.Data)
		if err != nil {
			return nil, &BatchNotLosslessError{Index: i, Seq: e.Seq, Err: err}
		}
		out[i].Data = data
	}
	for i, e := range events {
		c := Event{
			Type:      e.Type,
			Seq:       e.Seq,
			Time:      e.Time,
			Data:      out[i].Data,
			Ignorable: e.Ignorable,
		}
		if e.SurfaceOp != nil {
			op := *e.SurfaceOp
			c.SurfaceOp = &op
		}
		if e.SourceEventSeqs != nil {
			c.SourceEventSeqs = append(make([]int64, 0, len(e.SourceEventSeqs)), e.SourceEventSeqs...)
		}
		if err := c.validateEnvelope(); err != nil {
			return nil, fmt.Errorf("%w at index %d (seq %d): %w", ErrInvalidEvent, i, e.Seq, err)
		}
		if c.Data == nil {
			return nil, fmt.Errorf("%w at index %d (seq %d): event data is missing", ErrInvalidEvent, i, e.Seq)
		}
		out[i] = c
	}
	return out, nil
}
