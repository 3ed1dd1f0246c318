package wire

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// workflowIDEscape starts an escaped byte of a workflow id part.
const workflowIDEscape = '%'

// ErrBadWorkflowID reports a workflow id that no session id encodes to.
var ErrBadWorkflowID = errors.New("not a session workflow id")

// WorkflowID returns the workflow id of a session: SessionWorkflowIDPrefix followed
// by the session id encoded by EncodeWorkflowIDPart. Temporal sends the
// workflow id in a gRPC header, which carries printable ASCII only, so the
// encoding keeps printable ASCII (other than '%') and percent-escapes every
// other byte: "cli-x" → "session/cli-x", "é" → "session/%C3%A9".
func WorkflowID(sessionID string) string {
	return SessionWorkflowIDPrefix + EncodeWorkflowIDPart(sessionID)
}

// SessionIDFromWorkflowID returns the session id whose workflow id is wid,
// or an error wrapping ErrBadWorkflowID when wid is not WorkflowID of any
// session id.
func SessionIDFromWorkflowID(wid string) (string, error) {
	rest, ok := strings.CutPrefix(wid, SessionWorkflowIDPrefix)
	if !ok {
		return "", fmt.Errorf("%w: %q does not start with %q", ErrBadWorkflowID, wid, SessionWorkflowIDPrefix)
	}
	id, err := DecodeWorkflowIDPart(rest)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %w", ErrBadWorkflowID, wid, err)
	}
	return id, nil
}

// keptInWorkflowID reports whether EncodeWorkflowIDPart keeps byte b as is:
// printable ASCII from space to '~', except the escape '%'.
func keptInWorkflowID(b byte) bool {
	return b >= 0x20 && b <= 0x7E && b != workflowIDEscape
}

// EncodeWorkflowIDPart encodes s into printable ASCII, reversibly: every byte
// of s that is printable ASCII (0x20 to 0x7E) other than '%' is kept, every
// other byte (the bytes of non-ASCII characters, control characters, '%')
// becomes '%' and two upper-case hex digits. An ASCII id without '%' and
// control characters is therefore its own encoding. The encoding is a pure
// function, used by workflows and clients alike.
func EncodeWorkflowIDPart(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !keptInWorkflowID(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hexDigits = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keptInWorkflowID(c) {
			b = append(b, c)
			continue
		}
		b = append(b, workflowIDEscape, hexDigits[c>>4], hexDigits[c&0xF])
	}
	return string(b)
}

// DecodeWorkflowIDPart inverts EncodeWorkflowIDPart. It accepts only the
// canonical encoding, so DecodeWorkflowIDPart(p) succeeds exactly when p is
// EncodeWorkflowIDPart of a valid UTF-8 string: every byte is printable
// ASCII, '%' is followed by two upper-case hex digits naming a byte the
// encoding escapes, and the decoded bytes are valid UTF-8.
func DecodeWorkflowIDPart(p string) (string, error) {
	if !strings.ContainsRune(p, workflowIDEscape) {
		for i := 0; i < len(p); i++ {
			if !keptInWorkflowID(p[i]) {
				return "", fmt.Errorf("byte 0x%02X at offset %d is not printable ASCII", p[i], i)
			}
		}
		return p, nil
	}
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != workflowIDEscape {
			if !keptInWorkflowID(c) {
				return "", fmt.Errorf("byte 0x%02X at offset %d is not printable ASCII", c, i)
			}
			b = append(b, c)
			continue
		}
		if i+2 >= len(p) {
			return "", fmt.Errorf("truncated escape at offset %d", i)
		}
		hi, ok1 := upperHex(p[i+1])
		lo, ok2 := upperHex(p[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("escape at offset %d is not '%%' and two upper-case hex digits", i)
		}
		v := hi<<4 | lo
		if keptInWorkflowID(v) {
			return "", fmt.Errorf("escape at offset %d encodes %q, which is written as itself", i, rune(v))
		}
		b = append(b, v)
		i += 2
	}
	if !utf8.Valid(b) {
		return "", errors.New("the escaped bytes are not valid UTF-8")
	}
	return string(b), nil
}

func upperHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
