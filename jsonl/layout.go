package jsonl

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/sessionflow/sessionflow/session"
)

// Layout names (SPEC 3.2).
const (
	noCwdDir       = "_no-cwd"
	leaseFile      = "session.lock"
	summaryFile    = "summary.json"
	rawGeneration  = "session.v3.jsonl"
	zstdGeneration = "session.v3.jsonl.zstd"
	revocationsDir = ".revocations"
	maxProjectSlug = 251
)

// EncodeSegment maps an id to one safe path segment, injectively over its
// UTF-16 code units (SPEC 3.3): [A-Za-z0-9._-] is kept, every other code unit
// (including '~') becomes ~XXXX; "." and ".." are escaped whole. An id that
// is not valid UTF-8 is refused: its invalid bytes would all decode to
// U+FFFD and collide with a valid id. An id whose segment would be longer
// than MaxSegmentBytes is refused with ErrIDTooLong (CheckIDLength).
func EncodeSegment(id string) (string, error) {
	if id == "" {
		return "", errors.New("cannot encode an empty path segment")
	}
	if err := session.ValidateID(id); err != nil {
		return "", err
	}
	if err := CheckIDLength(id); err != nil {
		return "", err
	}
	if id == "." {
		return "~002E", nil
	}
	if id == ".." {
		return "~002E~002E", nil
	}
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(id)) {
		if safeUnit(u) {
			b.WriteByte(byte(u))
		} else {
			fmt.Fprintf(&b, "~%04X", u)
		}
	}
	return b.String(), nil
}

// ProjectKey maps a cwd to its project directory name `--<slug>--` (SPEC 3.2).
func ProjectKey(cwd string) (string, error) {
	if cwd == "" {
		return "", errors.New("cannot encode an empty project path")
	}
	var b strings.Builder
	lastSep := false
	for _, u := range utf16.Encode([]rune(cwd)) {
		switch {
		case u == '/' || u == '\\' || u == ':':
			if !lastSep {
				b.WriteByte('-')
			}
			lastSep = true
			continue
		case safeUnit(u):
			b.WriteByte(byte(u))
		default:
			fmt.Fprintf(&b, "~%04X", u)
		}
		lastSep = false
	}
	slug := strings.TrimLeft(b.String(), "-")
	if slug == "" {
		slug = "root"
	}
	if len(slug) > maxProjectSlug {
		slug = slug[:maxProjectSlug]
	}
	return "--" + slug + "--", nil
}

func safeUnit(u uint16) bool {
	return u < 0x80 && (u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z' || u >= '0' && u <= '9' || u == '.' || u == '_' || u == '-')
}

// projectDirName returns the project directory for a header's cwd.
func projectDirName(cwd string) (string, error) {
	if cwd == "" {
		return noCwdDir, nil
	}
	return ProjectKey(cwd)
}

// isProjectDirName reports whether a root entry is a project directory.
func isProjectDirName(name string) bool {
	return name == noCwdDir || (len(name) > 4 && strings.HasPrefix(name, "--") && strings.HasSuffix(name, "--"))
}
