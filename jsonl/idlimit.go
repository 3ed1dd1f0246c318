package jsonl

import "github.com/sessionflow/sessionflow/wire"

// The session-id length limit is declared in package wire, so that
// workflows can apply it without importing the store; the names below keep
// the store's API.

// MaxSegmentBytes is the longest session directory name the store creates
// (wire.MaxSegmentBytes). A session id whose EncodeSegment is longer cannot
// be stored.
const MaxSegmentBytes = wire.MaxSegmentBytes

// ErrIDTooLong reports a session id whose encoded directory name exceeds
// MaxSegmentBytes (wire.ErrIDTooLong). Store operations refuse such an id
// with CodeInvalidArgument before touching the file system.
var ErrIDTooLong = wire.ErrIDTooLong

// SegmentLen returns the length in bytes of EncodeSegment(id) without
// building it (wire.SegmentLen).
func SegmentLen(id string) int { return wire.SegmentLen(id) }

// CheckIDLength refuses an id the store cannot hold: one whose encoded
// directory name is longer than MaxSegmentBytes (wire.CheckIDLength). The
// error wraps ErrIDTooLong and states the limit.
func CheckIDLength(id string) error { return wire.CheckIDLength(id) }

// safeUnit reports whether EncodeSegment keeps the code unit u as it is.
func safeUnit(u uint16) bool { return wire.SegmentUnitKept(u) }
