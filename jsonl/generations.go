package jsonl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sessionflow/sessionflow/wire"
)

// CodeGenerationConflict classifies a session directory holding two
// generation files where the newer is not a migration of the older (for
// instance the published harness created session.jsonl beside an existing
// session.v3.jsonl). Neither is served: either could be the session.
const CodeGenerationConflict Code = "SessionGenerationConflict"

// ErrGenerationConflict matches a generation conflict.
var ErrGenerationConflict = &wire.StoreError{Code: CodeGenerationConflict}

// migrationRecordFile names the record a migration leaves in the session
// directory: which older generation the current one was made from, and that
// file's size at the time, so that a later write to the old file (by a tool
// that reads only the old format) is detected as a conflict.
const migrationRecordFile = "session.migration.json"

// MigrationRecord is the content of a session directory's migration record.
type MigrationRecord struct {
	// From is the file name of the older generation the log was made from.
	From string `json:"from"`
	// To is the file name of the generation the migration published.
	To string `json:"to"`
	// FromVersion and ToVersion are the two format versions.
	FromVersion int `json:"fromVersion"`
	ToVersion   int `json:"toVersion"`
	// SourceSize is the size of From when it was migrated.
	SourceSize int64 `json:"sourceSize"`
	// Events is the number of events the new generation was written with.
	Events int64 `json:"events"`
	// MigratedAt is the migration time in Unix milliseconds.
	MigratedAt int64 `json:"migratedAt"`
}

// generationVersion returns the format version a generation file name
// stands for, in either encoding.
func generationVersion(name string) (int64, bool) {
	if v, ok := parseGeneration(name, ".jsonl"); ok {
		return v, true
	}
	return parseGeneration(name, ".jsonl.zstd")
}

// checkGenerationVersion refuses a log whose header version differs from
// the version its file name stands for: a session.jsonl must hold a v0
// header and a session.v3.jsonl a v3 one.
func checkGenerationVersion(id, path string, h wire.Header) error {
	v, ok := generationVersion(filepath.Base(path))
	if !ok || v == int64(h.Version) {
		return nil
	}
	return &wire.StoreError{Code: CodeCorrupt, SessionID: id, Path: path, Message: fmt.Sprintf(
		"corrupt session log %q: a format v%d header in the generation file of format v%d", path, h.Version, v)}
}

// readMigrationRecord reads a session directory's migration record; nil
// when there is none.
func (s *Store) readMigrationRecord(dir string) (*MigrationRecord, error) {
	b, found, err := s.readSmallFile(filepath.Join(dir, migrationRecordFile), 1<<16)
	if err != nil || !found {
		return nil, err
	}
	var rec MigrationRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, &wire.StoreError{Code: CodeCorrupt, Path: filepath.Join(dir, migrationRecordFile), Err: err, Message: fmt.Sprintf(
			"migration record %q is not valid: %v", filepath.Join(dir, migrationRecordFile), err)}
	}
	return &rec, nil
}

// checkGenerations verifies that every generation of a session directory
// below the current one (current, a path) is the recorded source of its
// migration and unchanged since: anything else is a conflict, reported
// instead of silently serving the highest generation.
func (s *Store) checkGenerations(dir, current string, entries []os.DirEntry) error {
	if current == "" {
		return nil
	}
	var older []string
	for _, e := range entries {
		name := e.Name()
		if _, ok := parseGeneration(name, s.suffix()); ok && name != filepath.Base(current) {
			older = append(older, name)
		}
	}
	if len(older) == 0 {
		return nil
	}
	rec, err := s.readMigrationRecord(dir)
	if err != nil {
		return err
	}
	for _, name := range older {
		path := filepath.Join(dir, name)
		if rec == nil || rec.From != name || rec.To != filepath.Base(current) {
			return s.conflict(dir, current, path, "the newer is not a migration of the older")
		}
		fi, err := s.fs.Stat(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if fi.Size() != rec.SourceSize {
			return s.conflict(dir, current, path, fmt.Sprintf(
				"the older was written after the migration (%d bytes then, %d now)", rec.SourceSize, fi.Size()))
		}
	}
	return nil
}

func (s *Store) conflict(dir, current, older, why string) error {
	return &wire.StoreError{Code: CodeGenerationConflict, Path: dir, Message: fmt.Sprintf(
		"session directory %s holds two generations, %s and %s, and %s; refusing to pick one (move the one that is not the session out of the directory)",
		strconv.Quote(dir), filepath.Base(current), filepath.Base(older), why)}
}

// checkOwnLog verifies that a log found where a pending session of this
// handle is to be materialized was written by that session (an earlier
// attempt of the same handle) and not by another writer that ignores the
// lease, such as the published harness creating the same id: the log's
// header must be the pending header.
func (s *Store) checkOwnLog(st *handleState) error {
	h, ok, err := s.readHeader(st.path)
	if err != nil {
		return err
	}
	if ok && h == st.header {
		return nil
	}
	return refuseMaterialize(st.ref.SessionID, st.path, st.header.Version)
}

// headerProblem explains why the header of the log at path cannot be read
// (readHeader only reports that it cannot), for a List row.
func (s *Store) headerProblem(path string) error {
	f, _, err := s.openFile(path, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxHeaderBytes))
	if err != nil {
		return err
	}
	line, complete, err := s.headerRecord(buf)
	if err == nil && !complete {
		err = errHeaderless
		if s.comp == CompressionZstd {
			err = errZstdHeaderless
		}
	}
	if err == nil {
		_, err = parseHeaderLine(line)
	}
	if err == nil {
		err = errHeaderShape
	}
	return &wire.StoreError{Code: CodeCorrupt, Path: path, Err: err, Message: fmt.Sprintf(
		"session log %s: %v", strconv.Quote(path), err)}
}

// foreignHeader is the List problem of a log whose header names an id
// that does not map to the directory holding it.
func foreignHeader(path string, snap *Snapshot) error {
	return &wire.StoreError{Code: CodeCorrupt, Path: snap.Path, Message: fmt.Sprintf(
		"session directory %s holds a log whose header names session %q, which belongs in another directory",
		strconv.Quote(path), snap.Header.ID)}
}
