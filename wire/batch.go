package wire

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

// LineParser decodes one JSONL line given for an append into an event and
// returns the event's encoded size as batch limits count it (its encoding
// plus a newline), or why the line is refused.
type LineParser[E any] func(line []byte) (E, int, error)

// ParseEventLine is the LineParser of a client that does not know the event
// rules: it decodes the envelope (a JSON object with the envelope's keys)
// and counts the event's compact encoding; the event rules are left to the
// session's Append validator. session.ParseAppendLineWire applies them
// before anything is sent.
func ParseEventLine(line []byte) (Event, int, error) {
	var e Event
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return Event{}, 0, fmt.Errorf("not a valid event: %w", err)
	}
	if d.More() {
		return Event{}, 0, errors.New("not a valid event: more than one JSON value on the line")
	}
	if e.Type == "" || e.Data == nil {
		return Event{}, 0, errors.New(`not a valid event: it lacks "type" or "data"`)
	}
	enc, err := json.Marshal(e)
	if err != nil {
		return Event{}, 0, fmt.Errorf("not a valid event: %w", err)
	}
	return e, len(enc) + 1, nil
}

// BatchLimits bound the batches a BatchReaderOf returns.
type BatchLimits struct {
	// MaxBytes bounds a batch's encoded size (the LineParser's count).
	MaxBytes int
	// MaxEvents bounds a batch's number of events; at least 1.
	MaxEvents int
	// OversizeAlone makes an event larger than MaxBytes on its own a batch
	// by itself; without it such an event is a *LineError wrapping
	// ErrEventTooLarge.
	OversizeAlone bool
}

// Batch is a run of consecutive plain events of the input.
type Batch = BatchOf[Event]

// BatchOf is a run of consecutive events of the input.
type BatchOf[E any] struct {
	// Events are the batch's events, in input order.
	Events []E
	// End is the input offset after the last line read into the batch
	// (blank lines before the next event included).
	End int64
}

// BatchReaderOf reads events for an append from JSONL, one event per line
// (blank lines are skipped), decoded by its LineParser, and groups them into
// batches within limits.
type BatchReaderOf[E any] struct {
	br     *bufio.Reader
	parse  LineParser[E]
	limits BatchLimits
	batch  []E
	size   int
	offset int64 // input bytes consumed
	lineNo int64
	eof    bool
}

// NewBatchReaderOf returns a BatchReaderOf of r whose lines parse decodes.
func NewBatchReaderOf[E any](r io.Reader, limits BatchLimits, parse LineParser[E]) *BatchReaderOf[E] {
	return &BatchReaderOf[E]{br: bufio.NewReaderSize(r, 64<<10), parse: parse, limits: limits}
}

// Offset is the number of input bytes consumed, blank lines included.
func (r *BatchReaderOf[E]) Offset() int64 { return r.offset }

// Next returns the next batch, or io.EOF after the last. A line that is not
// an appendable event fails with a *LineError and a read failure with the
// reader's error; either way the events read since the last batch returned
// are dropped, so a batch holding a bad line is never returned.
func (r *BatchReaderOf[E]) Next() (BatchOf[E], error) {
	for {
		if len(r.batch) > 0 && (r.eof || len(r.batch) >= r.limits.MaxEvents) {
			return r.take(), nil
		}
		if r.eof {
			return BatchOf[E]{}, io.EOF
		}
		line, rerr := r.br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			r.batch, r.size = nil, 0
			return BatchOf[E]{}, rerr
		}
		var ready *BatchOf[E]
		if len(line) > 0 {
			r.lineNo++
			if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
				e, n, err := r.parse(trimmed)
				if err == nil && n > r.limits.MaxBytes && !r.limits.OversizeAlone {
					err = ErrEventTooLarge
				}
				if err != nil {
					r.batch, r.size = nil, 0
					return BatchOf[E]{}, &LineError{Line: r.lineNo, Size: n, Err: err}
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
func (r *BatchReaderOf[E]) take() BatchOf[E] {
	b := BatchOf[E]{Events: r.batch, End: r.offset}
	r.batch, r.size = nil, 0
	return b
}
