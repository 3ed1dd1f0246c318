package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/sessionflow/sessionflow/wire"
)

// Event is one record of a session log: the envelope of FORMAT.md §1.1. Data is the
// type-specific payload as canonical (compact, lossless) JSON; it is never nil
// for a valid event.
type Event struct {
	// Type is the event discriminator, e.g. "turn/start".
	Type string
	// Seq equals the event's index in the log.
	Seq int64
	// Time is the Unix time in milliseconds at which the event was appended.
	Time int64
	// Data is the payload as a JSON object.
	Data json.RawMessage
	// SurfaceOp is set only on surface-eligible types (see SurfaceEligible).
	SurfaceOp *SurfaceOp
	// SourceEventSeqs lists earlier events this one cites; surface types only.
	SourceEventSeqs []int64
	// Ignorable marks a log-only event an older reader may skip.
	Ignorable bool
}

// SurfaceOp is the surface operation of a surface-eligible event: either the
// string "append" or a replace object naming the first and last surface
// nodes it replaces (docs/FORMAT.md §1.1). The replace object has two
// spellings of one meaning: {op:"replace", start, end} in v0 logs, the
// published harness's, and {op:"replace", startSeq, endSeq} in v3 logs.
type SurfaceOp struct {
	// Op is SurfaceAppend or SurfaceReplace.
	Op string
	// StartSeq and EndSeq bound the replaced range for SurfaceReplace.
	StartSeq, EndSeq int64
	// Spelling is how a replace object is written: SpellingV3 (the zero
	// value) or SpellingV0.
	Spelling Spelling
}

// Spelling is the wire form of a replace surface operation.
type Spelling uint8

// Spellings of a replace surface operation.
const (
	// SpellingV3 is {"op":"replace","startSeq":a,"endSeq":b}.
	SpellingV3 Spelling = iota
	// SpellingV0 is {"op":"replace","start":a,"end":b}, the published
	// harness's.
	SpellingV0
)

// Surface operations.
const (
	// SurfaceAppend appends the event to the surface.
	SurfaceAppend = "append"
	// SurfaceReplace replaces the surface range [StartSeq, EndSeq].
	SurfaceReplace = "replace"
)

// AppendOp returns the "append" surface operation.
func AppendOp() *SurfaceOp { return &SurfaceOp{Op: SurfaceAppend} }

// MarshalJSON encodes the operation in its wire form.
func (o SurfaceOp) MarshalJSON() ([]byte, error) {
	switch o.Op {
	case SurfaceAppend:
		return []byte(`"append"`), nil
	case SurfaceReplace:
		if o.Spelling == SpellingV0 {
			return fmt.Appendf(nil, `{"op":"replace","start":%d,"end":%d}`, o.StartSeq, o.EndSeq), nil
		}
		return fmt.Appendf(nil, `{"op":"replace","startSeq":%d,"endSeq":%d}`, o.StartSeq, o.EndSeq), nil
	default:
		return nil, fmt.Errorf("session: unknown surface operation %q", o.Op)
	}
}

// UnmarshalJSON decodes the wire form of a surface operation, in either
// spelling of a replace object.
func (o *SurfaceOp) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s != SurfaceAppend {
			return fmt.Errorf("surfaceOp must be \"append\" or a replace object, got %q", s)
		}
		*o = SurfaceOp{Op: SurfaceAppend}
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("surfaceOp must be \"append\" or a replace object: %w", err)
	}
	var op string
	startKey, endKey, spelling := "startSeq", "endSeq", SpellingV3
	if _, ok := raw["start"]; ok {
		startKey, endKey, spelling = "start", "end", SpellingV0
	}
	_, hasEnd := raw[endKey]
	if err := json.Unmarshal(raw["op"], &op); err != nil || op != SurfaceReplace || len(raw) != 3 || !hasEnd {
		return errors.New(`surfaceOp object must be exactly {op:"replace", start, end} or {op:"replace", startSeq, endSeq}`)
	}
	start, err := ParseSafeInt(raw[startKey])
	if err != nil {
		return fmt.Errorf("surfaceOp %s: %w", startKey, err)
	}
	end, err := ParseSafeInt(raw[endKey])
	if err != nil {
		return fmt.Errorf("surfaceOp %s: %w", endKey, err)
	}
	*o = SurfaceOp{Op: SurfaceReplace, StartSeq: start, EndSeq: end, Spelling: spelling}
	return nil
}

// MarshalJSON encodes the event with the key order type, seq, time, data,
// surfaceOp, sourceEventSeqs, ignorable, omitting absent optionals (a nil
// SurfaceOp or SourceEventSeqs, a false Ignorable). Strings and Data are
// written in the canonical form of CanonicalJSON (strings as JSON.stringify
// writes them, numbers of Data as spelled), so equal events encode to equal
// bytes and a decoded event re-encodes identically. It does not apply Validate;
// it only refuses a Data that is not lossless JSON (an empty Data is written
// as null) and an unknown surface operation.
//
// json.Marshal re-escapes '<', '>', '&', U+2028 and U+2029 in the result; to
// keep the canonical bytes call MarshalJSON directly or use a json.Encoder
// with SetEscapeHTML(false).
func (e Event) MarshalJSON() ([]byte, error) {
	data := json.RawMessage("null")
	if len(e.Data) > 0 {
		var err error
		if data, err = CanonicalJSON(e.Data); err != nil {
			return nil, fmt.Errorf("event data: %w", err)
		}
	}
	out := make([]byte, 0, len(data)+len(e.Type)+64)
	out = append(out, `{"type":`...)
	out = appendString(out, e.Type)
	out = append(out, `,"seq":`...)
	out = strconv.AppendInt(out, e.Seq, 10)
	out = append(out, `,"time":`...)
	out = strconv.AppendInt(out, e.Time, 10)
	out = append(out, `,"data":`...)
	out = append(out, data...)
	if e.SurfaceOp != nil {
		op, err := e.SurfaceOp.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, `,"surfaceOp":`...)
		out = append(out, op...)
	}
	if e.SourceEventSeqs != nil {
		out = append(out, `,"sourceEventSeqs":[`...)
		for i, s := range e.SourceEventSeqs {
			if i > 0 {
				out = append(out, ',')
			}
			out = strconv.AppendInt(out, s, 10)
		}
		out = append(out, ']')
	}
	if e.Ignorable {
		out = append(out, `,"ignorable":true`...)
	}
	return append(out, '}'), nil
}

// UnmarshalJSON decodes an event strictly: the whole record must be lossless
// JSON (CanonicalJSON: no duplicate keys, no -0, no non-finite number), every
// key must be an envelope key, type a non-empty string, seq a non-negative
// safe integer (never -0), time a safe integer, data a JSON object, surfaceOp
// "append" or a replace object, sourceEventSeqs an array of non-negative safe
// integers, and ignorable may only be true. Data is kept canonical. The event
// rules that span fields (which types may carry what) are Validate's.
func (e *Event) UnmarshalJSON(b []byte) error {
	canon, err := CanonicalJSON(b)
	if err != nil {
		return fmt.Errorf("event is not lossless JSON: %w", err)
	}
	return e.decodeCanonical(canon)
}

// decodeCanonical decodes the output of CanonicalJSON; values alias canon.
func (e *Event) decodeCanonical(canon []byte) error {
	return e.decodeMembers(canon, nil, nil)
}

// envelopeFields are the envelope keys in the order they are decoded (and
// so the order in which their errors are reported).
var envelopeFields = [...]string{"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"}

// envelopeIndex returns the index in envelopeFields of a key's canonical
// spelling (without quotes), or -1.
func envelopeIndex(key []byte) int {
	for i, k := range envelopeFields {
		if string(key) == k {
			return i
		}
	}
	return -1
}

// decodeMembers decodes a canonical object from its top-level members
// (computed from canon when nil). Surface operations come from d when it is
// not nil.
func (e *Event) decodeMembers(canon []byte, members []member, d *LineDecoder) error {
	if canon[0] != '{' {
		return errors.New("event is not a JSON object")
	}
	if members == nil {
		members = splitCanonicalObject(canon)
	}
	var vals [len(envelopeFields)][]byte
	// unknown is the least unexpected key (in byte order), reported first.
	var unknown []byte
	hasUnknown := false
	for _, m := range members {
		key := canon[m.keyStart+1 : m.keyEnd-1]
		i := envelopeIndex(key)
		if i < 0 {
			if !hasUnknown || bytes.Compare(key, unknown) < 0 {
				unknown, hasUnknown = key, true
			}
			continue
		}
		vals[i] = canon[m.start:m.end:m.end]
	}
	if hasUnknown {
		return fmt.Errorf("unexpected event field %q", unknown)
	}
	for i, k := range envelopeFields[:4] {
		if vals[i] == nil {
			return fmt.Errorf("event lacks required field %q", k)
		}
	}
	var ev Event
	for i, k := range envelopeFields {
		v := vals[i]
		if v == nil {
			continue
		}
		var err error
		switch k {
		case "type":
			if v[0] != '"' {
				err = errors.New("must be a string")
			} else {
				ev.Type, err = unquoteCanonical(v)
			}
		case "seq":
			if n, ok := shortUint(v); ok {
				ev.Seq = n
			} else {
				ev.Seq, err = ParseSafeInt(v)
			}
		case "time":
			if n, ok := shortUint(v); ok {
				ev.Time = n
			} else {
				ev.Time, err = parseSafeIntSigned(v)
			}
		case "data":
			ev.Data = v // part of canon
		case "surfaceOp":
			ev.SurfaceOp = d.newSurfaceOp()
			if string(v) == `"append"` {
				*ev.SurfaceOp = SurfaceOp{Op: SurfaceAppend}
			} else {
				err = ev.SurfaceOp.UnmarshalJSON(v)
			}
		case "sourceEventSeqs":
			ev.SourceEventSeqs, err = parseSeqArray(v)
		case "ignorable":
			if string(v) != "true" {
				err = fmt.Errorf("may only be true, got %s", abbreviate(v))
			}
			ev.Ignorable = true
		}
		if err != nil {
			return fmt.Errorf("event field %q: %w", k, err)
		}
	}
	*e = ev
	return nil
}

// shortUint returns the value of v when it is 1 to 15 decimal digits with
// no leading zero (other than "0" itself): a non-negative safe integer that
// ParseSafeInt and parseSafeIntSigned accept with this value.
func shortUint(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 15 || (v[0] == '0' && len(v) > 1) {
		return 0, false
	}
	var n int64
	for _, d := range v {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

// parseSeqArray decodes a JSON array of non-negative safe integers. The
// result is non-nil (possibly empty) on success.
func parseSeqArray(v json.RawMessage) ([]int64, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil || items == nil {
		return nil, fmt.Errorf("must be an array, got %s", abbreviate(v))
	}
	seqs := make([]int64, len(items))
	for i, s := range items {
		n, err := ParseSafeInt(s)
		if err != nil {
			return nil, fmt.Errorf("index %d: %w", i, err)
		}
		seqs[i] = n
	}
	return seqs, nil
}

// abbreviate shortens a JSON text for an error message.
func abbreviate(v []byte) string {
	const max = 64
	if len(v) <= max {
		return string(v)
	}
	return string(v[:max]) + "..."
}

// Clone returns a deep copy of the event.
func (e Event) Clone() Event {
	c := e
	c.Data = append(json.RawMessage(nil), e.Data...)
	if e.SurfaceOp != nil {
		op := *e.SurfaceOp
		c.SurfaceOp = &op
	}
	if e.SourceEventSeqs != nil {
		// An empty list is kept: on an assistant/message it says the
		// message cites nothing, and is written as [].
		c.SourceEventSeqs = append(make([]int64, 0, len(e.SourceEventSeqs)), e.SourceEventSeqs...)
	}
	return c
}

// CloneEvents deep-copies a slice of events.
func CloneEvents(events []Event) []Event {
	if events == nil {
		return nil
	}
	out := make([]Event, len(events))
	for i, e := range events {
		out[i] = e.Clone()
	}
	return out
}

// ParseSafeInt decodes a JSON number that must be a non-negative safe integer
// written without a fraction, an exponent or a minus sign (so -0 is refused).
func ParseSafeInt(raw json.RawMessage) (int64, error) {
	n, err := parseSafeIntSigned(raw)
	if err != nil {
		return 0, err
	}
	if n < 0 || bytes.HasPrefix(bytes.TrimSpace(raw), []byte("-")) {
		return 0, fmt.Errorf("must be a non-negative safe integer, got %s", raw)
	}
	return n, nil
}

// parseSafeIntSigned decodes a JSON number that must be a safe integer, not
// -0. Integral values written with an exponent or a zero fraction (1e3, 2.0)
// are accepted, as JavaScript reads them as integers; text that is not a JSON
// number (01, +1, 0x10, 1_0, NaN) is refused.
func parseSafeIntSigned(raw json.RawMessage) (int64, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || scanNumber(b, 0) != len(b) {
		return 0, fmt.Errorf("must be a safe integer, got %s", abbreviate(raw))
	}
	s := string(b)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > wire.MaxSafeInteger || n < -wire.MaxSafeInteger {
			return 0, fmt.Errorf("must be a safe integer, got %s", s)
		}
		if n == 0 && s[0] == '-' {
			return 0, fmt.Errorf("must not be -0")
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > wire.MaxSafeInteger {
		return 0, fmt.Errorf("must be a safe integer, got %s", abbreviate(b))
	}
	if f == 0 && s[0] == '-' {
		return 0, fmt.Errorf("must not be -0")
	}
	return int64(f), nil
}

// splitCanonicalObject lists the top-level members of a canonical JSON
// object (the output of CanonicalJSON: compact, valid, no duplicate keys).
func splitCanonicalObject(canon []byte) []member {
	var members []member
	i := 1
	for i < len(canon) && canon[i] != '}' {
		if canon[i] == ',' {
			i++
		}
		kEnd := skipCanonical(canon, i)
		vStart := kEnd + 1 // past ':'
		vEnd := skipCanonical(canon, vStart)
		members = append(members, member{keyStart: i, keyEnd: kEnd, start: vStart, end: vEnd})
		i = vEnd
	}
	return members
}

// skipCanonical returns the end offset of the canonical JSON value that
// starts at i.
func skipCanonical(b []byte, i int) int {
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(b)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipCanonical(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		return j
	}
}

// unquoteCanonical decodes a canonical JSON string, without a second
// parser pass when it holds no escapes.
func unquoteCanonical(v []byte) (string, error) {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		if t, ok := builtinTypeNames[string(inner)]; ok {
			return t, nil // shared, rather than one copy per event
		}
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// ErrUnparsable marks a log line that is not JSON at all (as opposed to JSON
// that is not a valid event).
var ErrUnparsable = errors.New("not valid JSON")

// DecodeEventLine decodes one stored event line and checks the envelope
// rules of Validate, in one pass over the line. When the line is not JSON,
// the error matches ErrUnparsable. When the line is JSON but not a valid
// event, the returned Event carries whatever Type could be read, so a
// scanner can still tell a turn/end from other records. The event never
// aliases line.
func DecodeEventLine(line []byte) (Event, error) {
	var c canonCheck
	c.reset(line, true)
	if c.run() {
		// The line is its own canonical form: copy it as it is.
		return decodeCanonicalLine(bytes.Clone(line), c.members, nil)
	}
	return decodeEventLineSlow(line, nil)
}

// decodeEventLineSlow is DecodeEventLine through the canonicalizer, which
// writes a canonical copy of line or reports why it cannot.
func decodeEventLineSlow(line []byte, d *LineDecoder) (Event, error) {
	c := canonicalizer{in: line, out: make([]byte, 0, len(line)), record: true}
	canon, err := c.run()
	if err != nil {
		var le *LosslessError
		if errors.As(err, &le) && le.Syntax {
			return Event{}, fmt.Errorf("%w: %w", ErrUnparsable, err)
		}
		return Event{}, fmt.Errorf("event is not lossless JSON: %w", err)
	}
	return decodeCanonicalLine(canon, c.members, d)
}

// decodeCanonicalLine decodes a canonical event line from its top-level
// members and checks the envelope; on a decoding failure the event carries
// the type, when one could be read.
//
// A line whose type is the tag of a packed chunk row (IsChunkRowType) is
// decoded as a row: the event returned carries the tag, the row's seq0 and
// time0 and its data; ExpandChunkRow gives the events it stands for.
func decodeCanonicalLine(canon []byte, members []member, d *LineDecoder) (Event, error) {
	var ev Event
	if err := ev.decodeMembers(canon, members, d); err != nil {
		if members == nil && len(canon) > 0 && canon[0] == '{' {
			members = splitCanonicalObject(canon)
		}
		for _, m := range members {
			if string(canon[m.keyStart:m.keyEnd]) == `"type"` && canon[m.start] == '"' {
				ev.Type, _ = unquoteCanonical(canon[m.start:m.end])
			}
		}
		if IsChunkRowType(ev.Type) {
			return decodeChunkRow(canon, members, ev.Type)
		}
		return ev, err
	}
	if IsChunkRowType(ev.Type) {
		return decodeChunkRow(canon, members, ev.Type)
	}
	return ev, ev.validateEnvelope()
}

// LineDecoder decodes stored event lines with the results and errors of
// DecodeEventLine, for a reader that decodes many lines of a buffer it
// keeps and never modifies: a line already in canonical form (as the store
// writes every line) is validated without being copied, so the Data of the
// returned event aliases line; other lines are canonicalized into a fresh
// copy. Surface operations are allocated in blocks. Every line is fully
// validated either way.
//
// A LineDecoder is not safe for concurrent use. Events it returned stay
// valid after later calls; the zero value is ready to use.
type LineDecoder struct {
	check canonCheck
	ops   []SurfaceOp
}

// Decode decodes one stored event line (without its newline), as
// DecodeEventLine does; line must not be modified while the event is in
// use.
func (d *LineDecoder) Decode(line []byte) (Event, error) {
	d.check.reset(line, true)
	if d.check.run() {
		return decodeCanonicalLine(line[:len(line):len(line)], d.check.members, d)
	}
	return decodeEventLineSlow(line, d)
}

// surfaceOpBlock is the number of surface operations a LineDecoder
// allocates at once.
const surfaceOpBlock = 256

// newSurfaceOp returns a zero surface operation, from d's current block
// when d is not nil.
func (d *LineDecoder) newSurfaceOp() *SurfaceOp {
	if d == nil {
		return new(SurfaceOp)
	}
	if len(d.ops) == 0 {
		d.ops = make([]SurfaceOp, surfaceOpBlock)
	}
	op := &d.ops[0]
	d.ops = d.ops[1:]
	return op
}
