package session

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// canonCheck recognizes text that is already in the canonical form
// CanonicalJSON writes, without writing anything.
//
// It accepts in only when the canonicalizer would succeed on in and return
// exactly the bytes of in: one lossless JSON value with no insignificant
// whitespace, strings spelled as JSON.stringify spells them, numbers as
// written. Everything the canonicalizer refuses (bad syntax, a non-finite
// number, negative zero, a duplicate key, invalid UTF-8, nesting deeper
// than maxJSONDepth) is refused here too, and so is every valid text whose
// canonical form differs from its spelling. A refusal carries no detail:
// callers then run the canonicalizer, which reports the exact error or
// writes the canonical copy. This keeps a single source for every error
// text, and makes the fast path a pure filter.
type canonCheck struct {
	in  []byte
	pos int
	// keys is a stack of the key spellings of the objects being checked,
	// as spans of in, for the duplicate-key rule.
	keys []span
	// record asks for the members of a top-level object, as offsets into
	// in (which is also the canonical output).
	record  bool
	members []member
	// plain is true when every byte of in is printable ASCII (0x20..0x7f)
	// and none is '\\': then every string ends at the next '"'.
	plain bool
}

// span is a byte range of the checked text.
type span struct{ start, end int }

// reset prepares c for a new text, keeping its scratch slices.
func (c *canonCheck) reset(in []byte, record bool) {
	c.in, c.pos, c.record = in, 0, record
	c.plain = printableASCII(in) && bytes.IndexByte(in, '\\') < 0
	c.keys = c.keys[:0]
	c.members = c.members[:0]
}

// run reports whether c.in is exactly one canonical lossless JSON value.
func (c *canonCheck) run() bool {
	return len(c.in) > 0 && c.value(0) && c.pos == len(c.in)
}

func (c *canonCheck) value(depth int) bool {
	if c.pos >= len(c.in) {
		return false
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		return c.str()
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return false
}

func (c *canonCheck) literal(lit string) bool {
	if len(c.in)-c.pos < len(lit) || string(c.in[c.pos:c.pos+len(lit)]) != lit {
		return false
	}
	c.pos += len(lit)
	return true
}

func (c *canonCheck) object(depth int) bool {
	if depth > maxJSONDepth {
		return false
	}
	c.pos++ // '{'
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		return true
	}
	base := len(c.keys)
	defer func() { c.keys = c.keys[:base] }()
	var large map[string]struct{}
	for {
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return false
		}
		kStart := c.pos
		if !c.str() {
			return false
		}
		// The spelling is canonical, and the canonical spelling of a string
		// value is unique, so comparing spellings compares values (as the
		// canonicalizer does).
		key := c.in[kStart:c.pos]
		if large == nil && len(c.keys)-base < smallObject {
			for _, s := range c.keys[base:] {
				if bytes.Equal(c.in[s.start:s.end], key) {
					return false
				}
			}
			c.keys = append(c.keys, span{kStart, c.pos})
		} else {
			if large == nil {
				large = make(map[string]struct{}, 2*smallObject)
				for _, s := range c.keys[base:] {
					large[string(c.in[s.start:s.end])] = struct{}{}
				}
			}
			if _, dup := large[string(key)]; dup {
				return false
			}
			large[string(key)] = struct{}{}
		}
		kEnd := c.pos
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return false
		}
		c.pos++
		start := c.pos
		if !c.value(depth) {
			return false
		}
		if c.record && depth == 1 {
			c.members = append(c.members, member{keyStart: kStart, keyEnd: kEnd, start: start, end: c.pos})
		}
		if c.pos < len(c.in) && c.in[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.pos < len(c.in) && c.in[c.pos] == '}' {
			c.pos++
			return true
		}
		return false
	}
}

func (c *canonCheck) array(depth int) bool {
	if depth > maxJSONDepth {
		return false
	}
	c.pos++ // '['
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		return true
	}
	for {
		if !c.value(depth) {
			return false
		}
		if c.pos < len(c.in) && c.in[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.pos < len(c.in) && c.in[c.pos] == ']' {
			c.pos++
			return true
		}
		return false
	}
}

// number accepts what canonicalizer.number accepts (the canonical form of
// a number is its spelling).
func (c *canonCheck) number() bool {
	end := scanNumber(c.in, c.pos)
	if end < 0 {
		return false
	}
	text := c.in[c.pos:end]
	if !shortInteger(text) {
		f, err := strconv.ParseFloat(string(text), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || (f == 0 && text[0] == '-') {
			return false
		}
	} else if len(text) == 2 && text[0] == '-' && text[1] == '0' {
		return false // -0
	}
	c.pos = end
	return true
}

// shortInteger reports whether text (a valid JSON number) is an integer of
// at most 15 digits, with an optional minus sign: such a number is finite,
// exact in float64 and below MaxSafeInteger, and zero only when it is "0"
// or "-0" (JSON forbids leading zeros).
func shortInteger(text []byte) bool {
	digits := text
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 {
		return false
	}
	for _, d := range digits {
		if d < '0' || d > '9' {
			return false
		}
	}
	return true
}

// str accepts a string literal starting at the opening quote whose
// canonical spelling is itself: plain ASCII, valid multi-byte UTF-8, the
// escapes \" \\ \b \f \n \r \t, and \u00xx (lower-case hex) for the other
// control characters. Any other escape (\/, \u for a printable character, a
// surrogate, upper-case hex) has a different canonical spelling or is an
// error, and is left to the canonicalizer.
func (c *canonCheck) str() bool {
	in := c.in
	i := c.pos + 1 // opening quote
	if c.plain {
		q := bytes.IndexByte(in[i:], '"')
		if q < 0 {
			return false
		}
		c.pos = i + q + 1
		return true
	}
	// Most strings hold neither escapes nor non-ASCII bytes: then the next
	// '"' closes the string, and the bytes before it only need to be
	// printable ASCII and not '\\'.
	if q := bytes.IndexByte(in[i:], '"'); q >= 0 {
		if seg := in[i : i+q]; printableASCII(seg) && bytes.IndexByte(seg, '\\') < 0 {
			c.pos = i + q + 1
			return true
		}
	}
	for {
		i = skipPlain(in, i)
		if i >= len(in) {
			return false
		}
		switch b := in[i]; {
		case b == '"':
			c.pos = i + 1
			return true
		case b < 0x20:
			return false
		case b >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size <= 1 {
				return false
			}
			i += size
		default: // backslash
			if i+1 >= len(in) {
				return false
			}
			switch in[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if !canonicalControlEscape(in[i:]) {
					return false
				}
				i += 6
			default:
				return false
			}
		}
	}
}

// canonicalControlEscape reports whether esc starts with \u00xx, in
// lower-case hex, for a control character that has no short escape: the
// spelling appendCanonicalRune writes for it.
func canonicalControlEscape(esc []byte) bool {
	if len(esc) < 6 || esc[2] != '0' || esc[3] != '0' || (esc[4] != '0' && esc[4] != '1') {
		return false
	}
	lo := esc[5]
	var v byte
	switch {
	case lo >= '0' && lo <= '9':
		v = lo - '0'
	case lo >= 'a' && lo <= 'f':
		v = lo - 'a' + 10
	default:
		return false
	}
	v += (esc[4] - '0') << 4
	switch v {
	case '\b', '\t', '\n', '\f', '\r':
		return false
	}
	return true
}

// printableASCII reports whether every byte of s is in 0x20..0x7f. It tests
// sixteen bytes per step without branching on their values.
func printableASCII(s []byte) bool {
	if len(s) < 8 {
		for _, b := range s {
			if b < 0x20 || b >= utf8.RuneSelf {
				return false
			}
		}
		return true
	}
	// A lane below 0x20 borrows in x-0x20 and so sets its high bit unless a
	// lower lane already did; a lane >= 0x80 has its high bit set in x.
	var acc0, acc1 uint64
	// The last eight bytes, overlapping what the loop tests.
	last := binary.LittleEndian.Uint64(s[len(s)-8:])
	acc1 = (last - lanes01*0x20) | last
	for ; len(s) >= 16; s = s[16:] {
		x0 := binary.LittleEndian.Uint64(s)
		x1 := binary.LittleEndian.Uint64(s[8:])
		acc0 |= (x0 - lanes01*0x20) | x0
		acc1 |= (x1 - lanes01*0x20) | x1
	}
	if len(s) >= 8 {
		x := binary.LittleEndian.Uint64(s)
		acc0 |= (x - lanes01*0x20) | x
	}
	return (acc0|acc1)&lanes80 == 0
}

// SWAR constants: a byte repeated in every lane of a uint64.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// skipPlain returns the index of the first byte at or after i of in that is
// not a plain string byte (see plainStringByte), or len(in). It tests eight
// bytes at a time.
func skipPlain(in []byte, i int) int {
	for ; i+8 <= len(in); i += 8 {
		if m := specialLanes(binary.LittleEndian.Uint64(in[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(in) && plainStringByte[in[i]] {
		i++
	}
	return i
}

// specialLanes returns a mask with the high bit set in the lowest lane of x
// that holds a byte needing attention in a string (a control character,
// '"', '\\' or a byte >= 0x80); higher lanes may be flagged spuriously, but
// the lowest flagged lane is always exact, and the mask is zero when every
// lane is plain.
func specialLanes(x uint64) uint64 {
	q := x ^ (lanes01 * '"')
	b := x ^ (lanes01 * '\\')
	ctl := (x - lanes01*0x20) &^ x // lanes < 0x20
	quote := (q - lanes01) &^ q    // lanes == '"'
	bslash := (b - lanes01) &^ b   // lanes == '\\'
	return (ctl | quote | bslash | x) & lanes80
}
