package jsonl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf16"

	"github.com/sessionflow/sessionflow/wire"
)

// Layout names (FORMAT.md §3.1).
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
// UTF-16 code units (FORMAT.md §3.2): [A-Za-z0-9._-] is kept, every other code unit
// (including '~') becomes ~XXXX; "." and ".." are escaped whole. An id that
// is not valid UTF-8 is refused: its invalid bytes would all decode to
// U+FFFD and collide with a valid id. An id whose segment would be longer
// than MaxSegmentBytes is refused with ErrIDTooLong (CheckIDLength).
func EncodeSegment(id string) (string, error) {
	if id == "" {
		return "", errors.New("cannot encode an empty path segment")
	}
	if err := wire.ValidateID(id); err != nil {
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

// ProjectKey maps a cwd to its project directory name `--<slug>--` (FORMAT.md §3.3).
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

// generationName is the current generation file of this root's encoding.
func (s *Store) generationName() string {
	if s.comp == CompressionZstd {
		return zstdGeneration
	}
	return rawGeneration
}

func (s *Store) suffix() string {
	if s.comp == CompressionZstd {
		return ".jsonl.zstd"
	}
	return ".jsonl"
}

// parseGeneration reads a generation file name (FORMAT.md §3.4): version 0 is
// session.jsonl, version N >= 1 is session.vN.jsonl with no leading zeros.
// suffix is ".jsonl" or ".jsonl.zstd".
func parseGeneration(name, suffix string) (int64, bool) {
	if !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	stem := strings.TrimSuffix(name, suffix)
	if stem == "session" {
		return 0, true
	}
	digits, ok := strings.CutPrefix(stem, "session.v")
	if !ok || digits == "" || digits[0] == '0' {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > wire.MaxSafeInteger {
		return 0, false
	}
	return n, true
}

// otherSuffix is the suffix of the encoding this root does not use.
func (s *Store) otherSuffix() string {
	if s.comp == CompressionZstd {
		return ".jsonl"
	}
	return ".jsonl.zstd"
}

func (s *Store) encodingMismatch(path string) error {
	return &wire.StoreError{Code: CodeLayout, Path: path, Message: fmt.Sprintf(
		"session artifact %s uses %s, but this backend is configured for compression %q; use a separate root or select the matching compression mode",
		strconv.Quote(path), s.otherSuffix(), string(s.comp))}
}

// sessionDir describes one session directory found under a project.
type sessionDir struct {
	dir        string
	generation string // path of the highest generation file, "" when none
	leased     bool
}

// inspectSessionDir reads a session directory: the highest canonical
// generation of this root's encoding and whether a lease exists. A generation
// of the other encoding is a layout conflict; a symlinked or non-regular
// generation or lease is refused. The caller has checked that dir is a real
// directory.
func (s *Store) inspectSessionDir(dir string) (sessionDir, error) {
	sd := sessionDir{dir: dir}
	entries, err := s.fs.ReadDir(dir)
	if err != nil {
		return sd, err
	}
	best := int64(-1)
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		if name == leaseFile {
			if err := regularEntry("session lease", path, e); err != nil {
				return sd, err
			}
			sd.leased = true
			continue
		}
		if _, ok := parseGeneration(name, s.otherSuffix()); ok && !strings.HasSuffix(name, s.suffix()) {
			return sd, s.encodingMismatch(path)
		}
		v, ok := parseGeneration(name, s.suffix())
		if !ok {
			continue
		}
		if err := regularEntry("session artifact", path, e); err != nil {
			return sd, err
		}
		if v > best {
			best, sd.generation = v, path
		}
	}
	return sd, s.checkGenerations(dir, sd.generation, entries)
}

// regularEntry refuses a directory entry that is not a regular file.
func regularEntry(kind, path string, e fs.DirEntry) error {
	switch {
	case e.Type()&fs.ModeSymlink != 0:
		return symlinkError(kind, path)
	case !e.Type().IsRegular():
		return notRegularError(kind, path)
	}
	return nil
}

// rootEntries lists the project directories of the root (nil when the root
// is absent) and the entries named like project directories that are not
// real directories (symbolic links, files), which are never followed.
func (s *Store) rootEntries() (projects []string, odd []fs.DirEntry, err error) {
	entries, err := s.fs.ReadDir(s.root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	for _, e := range entries {
		if !isProjectDirName(e.Name()) {
			continue
		}
		if e.Type().IsDir() {
			projects = append(projects, filepath.Join(s.root, e.Name()))
		} else {
			odd = append(odd, e)
		}
	}
	return projects, odd, nil
}

// projectDirs lists the project directories of the root for a lookup. An
// entry named like a project directory that is not a real directory is
// refused, not skipped (S1-70): a session it would hold could be neither
// found nor ruled out.
func (s *Store) projectDirs() ([]string, error) {
	projects, odd, err := s.rootEntries()
	if err != nil || len(odd) == 0 {
		return projects, err
	}
	return nil, s.oddProjectError(odd[0])
}

// oddProjectError describes a root entry named like a project directory
// that is not a real directory.
func (s *Store) oddProjectError(e fs.DirEntry) error {
	path := filepath.Join(s.root, e.Name())
	if e.Type()&fs.ModeSymlink != 0 {
		return symlinkError("project directory", path)
	}
	return notDirError("project directory", path)
}

// scanRoot is the root scan of FORMAT.md §3.5, run by List and once on a
// root without a marker: every generation in every session directory must
// use this root's encoding, and no flat legacy file may sit in a project
// directory. It judges names only and follows no symbolic link: a damaged
// entry (a symlink, a FIFO, an unreadable session directory) concerns its
// session alone and is reported by the operations on that session, which
// repeat the encoding check at lookup.
func (s *Store) scanRoot() error {
	projects, _, err := s.rootEntries()
	if err != nil {
		return err
	}
	for _, p := range projects {
		entries, err := s.fs.ReadDir(p)
		if err != nil {
			continue // reported by the lookups in this project directory
		}
		for _, e := range entries {
			if err := s.checkProjectEntry(p, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) checkProjectEntry(project string, e os.DirEntry) error {
	path := filepath.Join(project, e.Name())
	if !e.Type().IsDir() {
		if strings.HasSuffix(e.Name(), ".jsonl") || strings.HasSuffix(e.Name(), ".jsonl.zstd") {
			return &wire.StoreError{Code: CodeLayout, Path: path, Message: fmt.Sprintf(
				"session artifact %s uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading", strconv.Quote(path))}
		}
		return nil
	}
	entries, err := s.fs.ReadDir(path)
	if err != nil {
		return nil // reported by the lookups of this session
	}
	for _, e := range entries {
		if _, ok := parseGeneration(e.Name(), s.otherSuffix()); ok && !strings.HasSuffix(e.Name(), s.suffix()) {
			return s.encodingMismatch(filepath.Join(path, e.Name()))
		}
	}
	return nil
}

// withSession sets the session id of a store error that has none.
func withSession(err error, id string) error {
	var e *wire.StoreError
	if errors.As(err, &e) && e.SessionID == "" {
		c := *e
		c.SessionID = id
		if err == error(e) {
			return &c
		}
	}
	return err
}

// checkSessionDir checks that a session directory is a real directory; an
// absent one is the fs.ErrNotExist error.
func (s *Store) checkSessionDir(id, dir string) error {
	return withSession(s.checkDir("session directory", dir), id)
}

// locateStored locates a session that must exist: an absent one is
// ErrNotFound.
func (s *Store) locateStored(id string) (sessionDir, error) {
	sd, found, err := s.locate(id)
	if err != nil {
		return sd, err
	}
	if !found {
		return sd, notFound(id)
	}
	return sd, nil
}

// locate finds the session directory of id across project directories. It
// returns found=false when no directory holds a generation or a lease.
func (s *Store) locate(id string) (sessionDir, bool, error) {
	seg, err := EncodeSegment(id)
	if err != nil {
		return sessionDir{}, false, invalidArgument(id, err)
	}
	projects, err := s.projectDirs()
	if err != nil {
		return sessionDir{}, false, err
	}
	probed := s.probeProjects(id, seg, projects)
	var found []sessionDir
	for i, p := range projects {
		dir := filepath.Join(p, seg)
		if err := probed[i]; err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return sessionDir{}, false, err
		}
		sd, err := s.inspectSessionDir(dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return sessionDir{}, false, withSession(err, id)
		}
		if sd.generation != "" || sd.leased {
			found = append(found, sd)
		}
	}
	switch len(found) {
	case 0:
		return sessionDir{}, false, nil
	case 1:
		return found[0], true, nil
	}
	return sessionDir{}, false, duplicateID(id)
}

// Lookups in many project directories check them concurrently: each check
// of a directory the cache does not hold waits for the disk, and these
// waits overlap. Fewer directories are checked one after the other.
const (
	concurrentProbeMin = 32
	probeWorkers       = 16
)

// probeProjects checks id's session directory (segment seg) in every
// project directory and returns each check's error, in project order: nil
// for a real directory, fs.ErrNotExist for none. The checks only read, so
// their order does not matter; locate judges the results in project order,
// as it would checking them one by one.
func (s *Store) probeProjects(id, seg string, projects []string) []error {
	errs := make([]error, len(projects))
	probe := func(i int) { errs[i] = s.checkSessionDir(id, filepath.Join(projects[i], seg)) }
	if len(projects) < concurrentProbeMin {
		for i := range projects {
			probe(i)
		}
		return errs
	}
	var (
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range min(probeWorkers, len(projects)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(projects) {
					return
				}
				probe(i)
			}
		}()
	}
	wg.Wait()
	return errs
}

// isDuplicate reports whether err is a duplicateID error.
func isDuplicate(err error) bool {
	var e *wire.StoreError
	return errors.As(err, &e) && e.Code == CodeLayout && e.SessionID != "" && e.Message == duplicateID(e.SessionID).Message
}

// duplicateID reports an id found in more than one project directory.
func duplicateID(id string) *wire.StoreError {
	return &wire.StoreError{Code: CodeLayout, SessionID: id, Message: fmt.Sprintf(
		"duplicate JSONL session id %q appears in multiple project directories", id)}
}

// dirFor is the session directory a header maps to.
func (s *Store) dirFor(h wire.Header) (string, error) {
	project, err := projectDirName(h.Cwd)
	if err != nil {
		return "", err
	}
	seg, err := EncodeSegment(h.ID)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.root, project, seg), nil
}
