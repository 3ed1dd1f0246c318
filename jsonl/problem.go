package jsonl

import (
	"strconv"
	"strings"
	"unicode/utf16"
)

// Problem explains why List cannot serve an entry under the root: a damaged
// session directory (a symbolic link, a FIFO where the log should be, an
// unreadable directory), a session id found in two project directories, a
// project directory that is a symbolic link. List reports such an entry as a
// row of its own and goes on with the others; the operations on the session
// concerned fail with Err.
type Problem struct {
	// Reason is a one-line explanation for people: Err's text.
	Reason string `json:"reason"`
	// Code is Err's store error code, or "" for a plain I/O error.
	Code Code `json:"code,omitempty"`
	// Err is the typed error; match it with errors.Is (ErrLayout,
	// ErrCorrupt, fs.ErrPermission, ...).
	Err error `json:"-"`
}

// Error returns the reason.
func (p *Problem) Error() string { return p.Reason }

// Unwrap returns the typed error.
func (p *Problem) Unwrap() error { return p.Err }

// problemOf describes err as a list-row problem.
func problemOf(err error) *Problem {
	return &Problem{Reason: err.Error(), Code: ErrorCode(err), Err: err}
}

// problemRow is the List row of an entry that cannot be served: the id the
// directory name decodes to (empty when it decodes to none), the entry's
// path and the problem.
func problemRow(id, path string, err error) Snapshot {
	snap := Snapshot{Path: path, Problem: problemOf(err)}
	snap.Header.ID = id
	return snap
}

// decodeSegment inverts EncodeSegment. ok is false when name is not the
// encoding of any valid id.
func decodeSegment(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	units := make([]uint16, 0, len(name))
	for i := 0; i < len(name); {
		c := name[i]
		if c != '~' {
			if !safeUnit(uint16(c)) {
				return "", false
			}
			units = append(units, uint16(c))
			i++
			continue
		}
		if i+5 > len(name) || strings.ToUpper(name[i+1:i+5]) != name[i+1:i+5] {
			return "", false
		}
		u, err := strconv.ParseUint(name[i+1:i+5], 16, 16)
		if err != nil {
			return "", false
		}
		units = append(units, uint16(u))
		i += 5
	}
	id := string(utf16.Decode(units))
	if seg, err := EncodeSegment(id); err != nil || seg != name {
		return "", false
	}
	return id, true
}
