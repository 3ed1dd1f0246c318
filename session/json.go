package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// ErrNotLossless is matched (errors.Is) by every failure of the lossless-JSON
// rule of FORMAT.md §1.4.
var ErrNotLossless = errors.New("value is not losslessly JSON-serializable")

// maxJSONDepth bounds the nesting of a JSON value so hostile input cannot
// exhaust the stack. It is encoding/json's own bound: nothing in a Go
// program could decode a deeper value. The harness has none, and writes
// deep values it is given (docs/DECISIONS.md D80).
const maxJSONDepth = 10000

// smallObject is the key count up to which duplicate keys are detected by a
// linear scan instead of a map.
const smallObject = 16

// LosslessError reports why a value broke the lossless-JSON rule.
type LosslessError struct {
	// Detail names the offending construct.
	Detail string
	// Syntax is true when the text is not JSON at all (as opposed to JSON
	// that breaks the lossless rule).
	Syntax bool
}

// Error describes the failure.
func (e *LosslessError) Error() string { return "not losslessly JSON-serializable: " + e.Detail }

// Is makes errors.Is(err, ErrNotLossless) true.
func (e *LosslessError) Is(target error) bool { return target == ErrNotLossless }

// CanonicalJSON validates raw against the lossless-JSON rule of FORMAT.md §1.4 and
// returns a fresh canonical copy of it.
//
// Refused: text that is not exactly one JSON value (RFC 8259; surrounding
// whitespace is allowed), numbers that are not finite in float64 (1e400),
// negative zero in any spelling (-0, -0.0, -0e3, and -1e-400, which reads as
// -0), duplicate object keys (compared after unescaping, so "a" and "\u0061"
// collide), strings holding invalid UTF-8, and nesting deeper than 10,000.
//
// The canonical form is compact (no insignificant whitespace); numbers keep
// their spelling; strings are written as JavaScript's JSON.stringify writes
// them: '"' and '\' escaped, \b \f \n \r \t for those controls, \u00xx
// (lower-case hex) for the other controls, a lone UTF-16 surrogate as \udxxx,
// and every other character as raw UTF-8 (including '<', '>', '&', U+2028 and
// U+2029). Two spellings of the same value therefore canonicalize to the same
// bytes, and CanonicalJSON is idempotent. The result never aliases raw, so
// later mutation of the caller's bytes cannot reach the copy.
func CanonicalJSON(raw []byte) (json.RawMessage, error) {
	c := canonicalizer{in: raw, out: make([]byte, 0, len(raw))}
	return c.run()
}

// run canonicalizes c.in as one JSON value.
func (c *canonicalizer) run() (json.RawMessage, error) {
	raw := c.in
	c.skipSpace()
	if c.pos == len(raw) {
		return nil, &LosslessError{Detail: "empty input", Syntax: true}
	}
	if err := c.value(0); err != nil {
		return nil, err
	}
	c.skipSpace()
	if c.pos != len(raw) {
		return nil, &LosslessError{Detail: fmt.Sprintf("trailing data after the JSON value at offset %d", c.pos), Syntax: true}
	}
	return c.out, nil
}

// canonicalizer is a single-pass RFC 8259 parser that writes the canonical
// form while it validates.
type canonicalizer struct {
	in  []byte
	pos int
	out []byte
	// record asks for the members of a top-level object, as offsets into
	// out, so a decoder need not walk the output again.
	record  bool
	members []member
}

// member is one key of a canonical object: the offsets of its canonical
// spelling (quotes included) and of its value in the canonical output.
type member struct {
	keyStart, keyEnd int
	start, end       int
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) syntaxError(what string) error {
	if c.pos >= len(c.in) {
		return &LosslessError{Detail: fmt.Sprintf("invalid JSON: unexpected end of input, expected %s", what), Syntax: true}
	}
	return &LosslessError{Detail: fmt.Sprintf("invalid JSON: unexpected byte %q at offset %d, expected %s", c.in[c.pos], c.pos, what), Syntax: true}
}

func (c *canonicalizer) value(depth int) error {
	if c.pos >= len(c.in) {
		return c.syntaxError("a value")
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		_, err := c.str()
		return err
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	default:
		return c.syntaxError("a value")
	}
}

func (c *canonicalizer) literal(lit string) error {
	if len(c.in)-c.pos < len(lit) || string(c.in[c.pos:c.pos+len(lit)]) != lit {
		return c.syntaxError(strconv.Quote(lit))
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	return nil
}

func (c *canonicalizer) object(depth int) error {
	if depth > maxJSONDepth {
		return &LosslessError{Detail: "nesting too deep"}
	}
	c.pos++ // '{'
	c.out = append(c.out, '{')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	var small []string
	var large map[string]struct{}
	for n := 0; ; n++ {
		if n > 0 {
			c.out = append(c.out, ',')
		}
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.syntaxError("an object key")
		}
		keyStart := len(c.out)
		key, err := c.str()
		if err != nil {
			return err
		}
		// The canonical spelling is unique per string value, so comparing
		// spellings compares values.
		k := string(key)
		if large == nil && len(small) < smallObject {
			for _, s := range small {
				if s == k {
					return &LosslessError{Detail: "duplicate object key " + k}
				}
			}
			small = append(small, k)
		} else {
			if large == nil {
				large = make(map[string]struct{}, 2*smallObject)
				for _, s := range small {
					large[s] = struct{}{}
				}
			}
			if _, dup := large[k]; dup {
				return &LosslessError{Detail: "duplicate object key " + k}
			}
			large[k] = struct{}{}
		}
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.syntaxError("':'")
		}
		c.pos++
		c.out = append(c.out, ':')
		c.skipSpace()
		start := len(c.out)
		if err := c.value(depth); err != nil {
			return err
		}
		if c.record && depth == 1 {
			c.members = append(c.members, member{keyStart: keyStart, keyEnd: keyStart + len(key), start: start, end: len(c.out)})
		}
		c.skipSpace()
		if c.pos < len(c.in) && c.in[c.pos] == ',' {
			c.pos++
			c.skipSpace()
			continue
		}
		if c.pos < len(c.in) && c.in[c.pos] == '}' {
			c.pos++
			c.out = append(c.out, '}')
			return nil
		}
		return c.syntaxError("',' or '}'")
	}
}

func (c *canonicalizer) array(depth int) error {
	if depth > maxJSONDepth {
		return &LosslessError{Detail: "nesting too deep"}
	}
	c.pos++ // '['
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			c.out = append(c.out, ',')
		}
		if err := c.value(depth); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos < len(c.in) && c.in[c.pos] == ',' {
			c.pos++
			c.skipSpace()
			continue
		}
		if c.pos < len(c.in) && c.in[c.pos] == ']' {
			c.pos++
			c.out = append(c.out, ']')
			return nil
		}
		return c.syntaxError("',' or ']'")
	}
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// scanNumber returns the end of the RFC 8259 number starting at in[pos], or
// -1 when the text there is not one.
func scanNumber(in []byte, pos int) int {
	i := pos
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	default:
		return -1
	}
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) || !isDigit(in[i]) {
			return -1
		}
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || !isDigit(in[i]) {
			return -1
		}
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	}
	return i
}

func (c *canonicalizer) number() error {
	end := scanNumber(c.in, c.pos)
	if end < 0 {
		return c.syntaxError("a number")
	}
	text := c.in[c.pos:end]
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return &LosslessError{Detail: "non-finite number " + string(text)}
	}
	if f == 0 && text[0] == '-' {
		return &LosslessError{Detail: "negative zero " + string(text)}
	}
	c.pos = end
	c.out = append(c.out, text...)
	return nil
}

func hexVal(b byte) rune {
	switch {
	case b >= '0' && b <= '9':
		return rune(b - '0')
	case b >= 'a' && b <= 'f':
		return rune(b-'a') + 10
	case b >= 'A' && b <= 'F':
		return rune(b-'A') + 10
	}
	return -1
}

// hex4 decodes the four hex digits at in[pos:], or returns -1.
func hex4(in []byte, pos int) rune {
	if len(in)-pos < 4 {
		return -1
	}
	var r rune
	for i := range 4 {
		v := hexVal(in[pos+i])
		if v < 0 {
			return -1
		}
		r = r<<4 | v
	}
	return r
}

// plainStringByte marks the bytes a JSON string copies as they are: not a
// control character, not '"' or '\\', and ASCII.
var plainStringByte = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// str parses the string starting at the opening quote and writes its
// canonical spelling; it returns that spelling (quotes included).
func (c *canonicalizer) str() ([]byte, error) {
	start := len(c.out)
	c.pos++ // opening quote
	c.out = append(c.out, '"')
	for {
		// Copy the run of bytes that need no attention.
		run := c.pos
		for c.pos < len(c.in) && plainStringByte[c.in[c.pos]] {
			c.pos++
		}
		c.out = append(c.out, c.in[run:c.pos]...)
		if c.pos >= len(c.in) {
			return nil, &LosslessError{Detail: "invalid JSON: unterminated string", Syntax: true}
		}
		switch b := c.in[c.pos]; {
		case b == '"':
			c.pos++
			c.out = append(c.out, '"')
			return c.out[start:], nil
		case b < 0x20:
			return nil, c.syntaxError("no control character in a string")
		case b >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(c.in[c.pos:])
			if r == utf8.RuneError && size <= 1 {
				return nil, &LosslessError{Detail: fmt.Sprintf("invalid UTF-8 in string at offset %d", c.pos)}
			}
			c.out = append(c.out, c.in[c.pos:c.pos+size]...)
			c.pos += size
		default: // backslash
			if err := c.escape(); err != nil {
				return nil, err
			}
		}
	}
}

// escape decodes the escape sequence at in[pos] and writes its canonical
// form.
func (c *canonicalizer) escape() error {
	if c.pos+1 >= len(c.in) {
		return &LosslessError{Detail: "invalid JSON: unterminated string", Syntax: true}
	}
	e := c.in[c.pos+1]
	switch e {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		c.pos += 2
		c.out = appendCanonicalRune(c.out, simpleEscape(e))
		return nil
	case 'u':
	default:
		c.pos++
		return c.syntaxError("a valid escape character")
	}
	r := hex4(c.in, c.pos+2)
	if r < 0 {
		c.pos += 2
		return c.syntaxError("four hex digits")
	}
	c.pos += 6
	if r >= 0xD800 && r < 0xDC00 && c.pos+1 < len(c.in) && c.in[c.pos] == '\\' && c.in[c.pos+1] == 'u' {
		if lo := hex4(c.in, c.pos+2); lo >= 0xDC00 && lo < 0xE000 {
			c.pos += 6
			c.out = utf8.AppendRune(c.out, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
			return nil
		}
	}
	if r >= 0xD800 && r < 0xE000 {
		// A lone surrogate has no UTF-8 form: keep it escaped.
		c.out = fmt.Appendf(c.out, `\u%04x`, r)
		return nil
	}
	c.out = appendCanonicalRune(c.out, r)
	return nil
}

// simpleEscape maps the character after a backslash to the rune it stands
// for (one of "\/bfnrt).
func simpleEscape(e byte) rune {
	switch e {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return rune(e)
}

// appendCanonicalRune writes r (not a surrogate) as JSON.stringify would
// inside a string literal.
func appendCanonicalRune(out []byte, r rune) []byte {
	switch r {
	case '"':
		return append(out, '\\', '"')
	case '\\':
		return append(out, '\\', '\\')
	case '\b':
		return append(out, '\\', 'b')
	case '\f':
		return append(out, '\\', 'f')
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	case '\t':
		return append(out, '\\', 't')
	}
	if r < 0x20 {
		return fmt.Appendf(out, `\u%04x`, r)
	}
	return utf8.AppendRune(out, r)
}

// appendString appends s as a canonical JSON string. Invalid UTF-8 in s is
// written as U+FFFD (Go strings reaching here come from decoded JSON or from
// callers; validators refuse invalid UTF-8 where it matters).
func appendString(out []byte, s string) []byte {
	out = append(out, '"')
	for _, r := range s {
		out = appendCanonicalRune(out, r)
	}
	return append(out, '"')
}

// MarshalData encodes v as a lossless JSON payload. It is the way to build
// Event.Data from Go values.
func MarshalData(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &LosslessError{Detail: err.Error()}
	}
	return CanonicalJSON(b)
}
