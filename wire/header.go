package wire

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// FormatVersion is the on-disk log format this build writes by default.
const FormatVersion = 3

// FormatVersionV0 is the format of the published DeepSeek Harness
// (session.jsonl[.zstd], header with seedLength and no isSeeded), which this
// build also reads, migrates and, on a root configured for it, writes.
const FormatVersionV0 = 0

// OriginSubagent is the only allowed Header.Origin value.
const OriginSubagent = "subagent"

// Header is the session header of FORMAT.md §2.1: storage metadata kept outside the
// event log as the first record of a log file. Optional string fields are
// absent when empty.
type Header struct {
	// Version is the log format version (FormatVersion).
	Version int `json:"version"`
	// ID is the session id: a non-empty valid UTF-8 string.
	ID string `json:"id"`
	// CreatedAt is the creation time in Unix milliseconds.
	CreatedAt int64 `json:"createdAt"`
	// Cwd is the absolute working directory of the session, or empty.
	Cwd string `json:"cwd,omitempty"`
	// ParentSession is the id of the fork parent, or empty.
	ParentSession string `json:"parentSession,omitempty"`
	// IsSeeded is true iff the session holds a fork-inherited prefix.
	IsSeeded bool `json:"isSeeded"`
	// Origin is empty or OriginSubagent.
	Origin string `json:"origin,omitempty"`
	// DelegationDepth is the recursion budget used so far (0 for a root).
	DelegationDepth int64 `json:"delegationDepth"`
	// AgentPreset names the preset the session was composed from, or empty.
	AgentPreset string `json:"agentPreset,omitempty"`
	// SeedLength is the inherited event count a format v0 header stores
	// (its seedLength field; IsSeeded is true exactly when the field is
	// present). Format v3 does not store it: there the count derives from
	// the inherited end-seed marker, and SeedLength stays 0.
	SeedLength int64 `json:"seedLength,omitempty"`
}

// Errors of header and id validation. Their texts are the reference texts.
var (
	// ErrEmptyID reports an empty session id.
	ErrEmptyID = errors.New("cannot encode an empty path segment")
	// ErrInvalidUTF8ID reports a session id that is not valid UTF-8.
	ErrInvalidUTF8ID = errors.New("session id must be valid UTF-8")
	// ErrCreatedAt reports a createdAt that is not a non-negative safe integer.
	ErrCreatedAt = errors.New("session metadata createdAt must be a non-negative safe integer")
	// ErrSeededWithoutCount: a seeded header needs an inherited event count.
	ErrSeededWithoutCount = errors.New("seeded session header requires an inherited event count")
	// ErrUnseededWithCount: an unseeded header's inherited count must be 0.
	ErrUnseededWithCount = errors.New("unseeded session header inherited event count must be 0")
)

// ValidateID checks that id can name a session: non-empty, valid UTF-8.
func ValidateID(id string) error {
	if id == "" {
		return ErrEmptyID
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w, got %q", ErrInvalidUTF8ID, id)
	}
	return nil
}

// Validate checks the in-memory rules of FORMAT.md §2.1 (version aside).
func (h Header) Validate() error {
	if err := ValidateID(h.ID); err != nil {
		return err
	}
	if h.CreatedAt < 0 || h.CreatedAt > MaxSafeInteger {
		return ErrCreatedAt
	}
	if h.DelegationDepth < 0 || h.DelegationDepth > MaxSafeInteger {
		return errors.New("session header delegationDepth must be a non-negative safe integer")
	}
	if h.Cwd != "" && !isAbsolute(h.Cwd) {
		return fmt.Errorf("session header cwd must be an absolute path, got %q", h.Cwd)
	}
	if h.Origin != "" && h.Origin != OriginSubagent {
		return fmt.Errorf("session header origin must be %q, got %q", OriginSubagent, h.Origin)
	}
	for _, f := range [...]struct{ name, v string }{{"cwd", h.Cwd}, {"parentSession", h.ParentSession}, {"agentPreset", h.AgentPreset}} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("session header %s must be valid UTF-8", f.name)
		}
	}
	return nil
}

// ValidateInheritedCount checks the pairing of IsSeeded with an inherited
// event count (FORMAT.md §2.2). count < 0 means "no count given".
func (h Header) ValidateInheritedCount(count int64) error {
	if h.IsSeeded && count < 0 {
		return ErrSeededWithoutCount
	}
	if !h.IsSeeded && count > 0 {
		return ErrUnseededWithCount
	}
	if count > MaxSafeInteger {
		return errors.New("inherited event count must be a non-negative safe integer")
	}
	return nil
}

// isAbsolute accepts POSIX absolute paths and Windows drive or UNC paths, as
// headers written on either platform must load on both.
func isAbsolute(p string) bool {
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\\`) {
		return true
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') &&
		((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z'))
}
