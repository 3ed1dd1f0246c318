package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrEventTooLarge marks an event whose encoding alone exceeds a batch's
// byte limit.
var ErrEventTooLarge = errors.New("event exceeds the batch limit")

// LineError is a JSONL input line that is not an appendable event.
type LineError struct {
	// Line is the 1-based line number in the input.
	Line int64
	// Size is the event's encoded size, set with ErrEventTooLarge.
	Size int
	// Err is why the line is refused: a decoding or validation error, or
	// ErrEventTooLarge.
	Err error
}

// Error returns "line N: <why>".
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns Err.
func (e *LineError) Unwrap() error { return e.Err }

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

// BatchLimits bound the batches a BatchReader returns.
type BatchLimits struct {
	// MaxBytes bounds a batch's encoded size (ParseAppendLine's count).
	MaxBytes int
	// MaxEvents bounds a batch's number of events; at least 1.
	MaxEvents int
	// OversizeAlone makes an event larger than MaxBytes on its own a batch
	// by itself; without it such an event is a *LineError wrapping
	// ErrEventTooLarge.
	OversizeAlone bool
}

// Batch is a run of consecutive events of the input.
type Batch struct {
	// Events are the batch's events, in input order.
	Events []Event
	// End is the input offset after the last line read into the batch
	// (blank lines before the next event included).
	End int64
}

// BatchReader reads events for an append from JSONL, one event per line
// (blank lines are skipped), and groups them into batches within limits.
type BatchReader struct {
	br     *bufio.Reader
	limits BatchLimits
	batch  []Event
	size   int
	offset int64 // input bytes consumed
	lineNo int64
	eof    bool
}

// NewBatchReader returns a BatchReader of r.
func NewBatchReader(r io.Reader, limits BatchLimits) *BatchReader {
	return &BatchReader{br: bufio.NewReaderSize(r, 64<<10), limits: limits}
}

// Offset is the number of input bytes consumed, blank lines included.
func (r *BatchReader) Offset() int64 { return r.offset }

// Next returns the next batch, or io.EOF after the last. A line that is not
// an appendable event fails with a *LineError and a read failure with the
// reader's error; either way the events read since the last batch returned
// are dropped, so a batch holding a bad line is never returned.
func (r *BatchReader) Next() (Batch, error) {
	for {
		if len(r.batch) > 0 && (r.eof || len(r.batch) >= r.limits.MaxEvents) {
			return r.take(), nil
		}
		if r.eof {
			return Batch{}, io.EOF
		}
		line, rerr := r.br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			r.batch, r.size = nil, 0
			return Batch{}, rerr
		}
		var ready *Batch
		if len(line) > 0 {
			r.lineNo++
			if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
				e, n, err := ParseAppendLine(trimmed)
				if err == nil && n > r.limits.MaxBytes && !r.limits.OversizeAlone {
					err = ErrEventTooLarge
				}
				if err != nil {
					r.batch, r.size = nil, 0
					return Batch{}, &LineError{Line: r.lineNo, Size: n, Err: err}
				}
				if len(r.batch) > 0 && r.size+n > r.limits.MaxBytes {
					b := r.take()
					ready = &b
				}
				r.batch = append(r.batch, e)
				r.size += n
			}
			r.offset += int64(len(line))
		}
		if rerr != nil { // io.EOF
			r.eof = true
		}
		if ready != nil {
			return *ready, nil
		}
	}
}

// take returns the events gathered so far as a batch ending at the current
// offset.
func (r *BatchReader) take() Batch {
	b := Batch{Events: r.batch, End: r.offset}
	r.batch, r.size = nil, 0
	return b
}
