package wire

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxSegmentBytes is the longest session directory name the store creates:
// NAME_MAX of the common Linux and macOS file systems. A session id whose
// encoded directory name (jsonl.EncodeSegment) is longer cannot be stored.
const MaxSegmentBytes = 255

// ErrIDTooLong reports a session id whose encoded directory name exceeds
// MaxSegmentBytes. Store operations refuse such an id with CodeInvalidArgument
// before touching the file system.
var ErrIDTooLong = errors.New("session id is too long")

// SegmentUnitKept reports whether the store's directory-name encoding keeps
// the UTF-16 code unit u as it is: A-Z, a-z, 0-9, '.', '_' and '-'. Every
// other unit is escaped as ~XXXX.
func SegmentUnitKept(u uint16) bool {
	return u < 0x80 && (u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z' || u >= '0' && u <= '9' || u == '.' || u == '_' || u == '-')
}

// SegmentLen returns the length in bytes of the directory name the store
// encodes id to, without building it: one byte for each of A-Z, a-z, 0-9,
// '.', '_' and '-', five (~XXXX) for every other UTF-16 code unit, so ten
// for a character outside the Basic Multilingual Plane. It is a pure
// function: workflows use it to refuse an id before any activity runs.
func SegmentLen(id string) int {
	switch id {
	case ".":
		return 5
	case "..":
		return 10
	}
	n := 0
	for _, r := range id {
		switch {
		case r < utf8.RuneSelf && SegmentUnitKept(uint16(r)):
			n++
		case utf16.RuneLen(r) == 2:
			n += 10
		default:
			n += 5
		}
	}
	return n
}

// CheckIDLength refuses an id the store cannot hold: one whose encoded
// directory name is longer than MaxSegmentBytes. The error wraps
// ErrIDTooLong and states the limit.
func CheckIDLength(id string) error {
	if n := SegmentLen(id); n > MaxSegmentBytes {
		return fmt.Errorf("%w: it encodes to a %d-byte directory name and the store's limit is %d bytes "+
			"(at most %d characters from A-Z, a-z, 0-9, '.', '_', '-'; every other character counts 5 bytes, 10 outside the Basic Multilingual Plane)",
			ErrIDTooLong, n, MaxSegmentBytes, MaxSegmentBytes)
	}
	return nil
}
