package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/sessionflow/sessionflow/wire"
)

// rootMarkerFile is the root marker (FORMAT.md §3.5, docs/DECISIONS.md D50):
// it records the root's encoding, so that a store checks its root in O(1)
// instead of scanning every session directory.
const rootMarkerFile = ".sessionflow-root"

// rootMarkerVersion is the version of the marker's layout this build writes
// and reads.
const rootMarkerVersion = 1

// rootMarkerStore is the marker's "store" field.
const rootMarkerStore = "sessionflow"

// ErrRootMismatch matches (errors.Is) the refusal of a root whose marker
// disagrees with the store: another encoding, or a marker version this
// build does not know. Such an error is also a SessionLayoutConflict
// (ErrLayout) or, for a newer marker version, a FormatUnsupported.
var ErrRootMismatch = errors.New("store root marker disagrees with this store")

// rootMarker is the content of the root marker file.
type rootMarker struct {
	Store       string      `json:"store"`
	Version     int         `json:"version"`
	Compression Compression `json:"compression"`
}

// errNoMarker is the cause of readRootMarker when no marker exists (only
// ENOENT means absent).
var errNoMarker = errors.New("no root marker")

// rootMarkerPath is the marker file of this store's root.
func (s *Store) rootMarkerPath() string { return filepath.Join(s.root, rootMarkerFile) }

// readRootMarker reads the marker. It returns errNoMarker when the marker
// (or the root) is absent, and any other error as it is: a permission
// error, a root that is not a directory (ENOTDIR), a marker that is a
// symbolic link or not a regular file, a damaged marker (ErrCorrupt).
func (s *Store) readRootMarker() (rootMarker, error) {
	var m rootMarker
	path := s.rootMarkerPath()
	body, found, err := s.readSmallFile(path, 4<<10)
	if err != nil {
		return m, err
	}
	if !found {
		return m, errNoMarker
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil || m.Store != rootMarkerStore || m.Version < 1 {
		if err == nil {
			err = errors.New(`not a sessionflow root marker (want "store": "sessionflow" and a version >= 1)`)
		}
		return m, &wire.StoreError{Code: CodeCorrupt, Path: path, Err: err, Message: fmt.Sprintf(
			"store root marker %s is damaged: %v; restore it or remove it to have the root scanned again", strconv.Quote(path), err)}
	}
	return m, nil
}

// agree checks a marker against this store's configuration.
func (s *Store) agree(m rootMarker) error {
	path := s.rootMarkerPath()
	if m.Version > rootMarkerVersion {
		return &wire.StoreError{Code: CodeFormatUnsupported, Path: path, Err: ErrRootMismatch, Message: fmt.Sprintf(
			"store root marker %s has version %d, newer than the version %d this build reads; use a newer build",
			strconv.Quote(path), m.Version, rootMarkerVersion)}
	}
	if m.Compression != s.comp {
		return &wire.StoreError{Code: CodeLayout, Path: path, Err: ErrRootMismatch, Message: fmt.Sprintf(
			"store root %s is marked for compression %q (%s), but this backend is configured for compression %q; use a separate root or select the matching compression mode",
			strconv.Quote(s.root), string(m.Compression), strconv.Quote(path), string(s.comp))}
	}
	return nil
}

// writeRootMarker publishes the marker once: a temp file, fsynced, linked
// without overwriting, the root fsynced (FORMAT.md §3.6). A marker another
// store published first is read and checked instead.
func (s *Store) writeRootMarker() error {
	body, err := json.Marshal(rootMarker{Store: rootMarkerStore, Version: rootMarkerVersion, Compression: s.comp})
	if err != nil {
		return err
	}
	err = s.publish(s.root, rootMarkerFile, append(body, '\n'))
	if errors.Is(err, fs.ErrExist) {
		m, rerr := s.readRootMarker()
		if rerr != nil {
			return rerr
		}
		return s.agree(m)
	}
	return err
}

// checkRoot checks the root before the first operation of this store
// (FORMAT.md §3.5): in O(1) against the root marker when there is one. A
// root without a marker, written by an earlier version, is scanned once
// (scanRoot) and then marked; an absent root is marked when it is created
// (markRoot). Only ENOENT means absent: any other failure to read the
// marker is returned.
func (s *Store) checkRoot() error {
	s.mu.Lock()
	done := s.rootOK
	s.mu.Unlock()
	if done {
		return nil
	}
	m, err := s.readRootMarker()
	switch {
	case err == nil:
		if err := s.agree(m); err != nil {
			return err
		}
	case !errors.Is(err, errNoMarker):
		return err
	default:
		fi, err := s.fs.Stat(s.root)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // nothing to check; the root is marked when created
		case err != nil:
			return err
		case !fi.IsDir():
			return &fs.PathError{Op: "open", Path: s.root, Err: syscall.ENOTDIR}
		}
		if err := s.scanRoot(); err != nil {
			return err
		}
		if err := s.writeRootMarker(); err != nil {
			if !readOnlyRoot(err) {
				return err
			}
			// A root this process may read but not write (a read-only
			// mount, another user's root) stays unmarked: it is served,
			// and scanned again by the next store.
			s.log.Warn("jsonl: cannot mark the store root; it is scanned again by every new store",
				"root", s.root, "err", err)
		}
	}
	s.mu.Lock()
	s.rootOK = true
	s.mu.Unlock()
	return nil
}

// readOnlyRoot reports whether a failure to write the marker comes from a
// root this process may not write.
func readOnlyRoot(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// RootCompression returns the encoding the marker of the store root at root
// records (FORMAT.md §3.5), so that a tool can open a root in its own
// encoding without being told it. found is false when the root or its
// marker does not exist (only ENOENT means absent); a root without a marker
// (absent, or written before the marker existed) has no recorded encoding.
// A damaged marker, or one naming an encoding this build does not know, is
// ErrCorrupt; a marker of a newer version is FormatUnsupported
// (ErrRootMismatch); any other failure to read it is returned as it is.
func RootCompression(root string) (c Compression, found bool, err error) {
	s, err := NewStore(Options{Root: root, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", false, err
	}
	m, err := s.readRootMarker()
	switch {
	case errors.Is(err, errNoMarker):
		return "", false, nil
	case err != nil:
		return "", false, err
	case m.Version > rootMarkerVersion:
		return "", false, s.agree(m)
	}
	if _, perr := ParseCompression(string(m.Compression)); perr != nil {
		path := s.rootMarkerPath()
		return "", false, &wire.StoreError{Code: CodeCorrupt, Path: path, Err: perr, Message: fmt.Sprintf(
			"store root marker %s is damaged: %v; restore it or remove it to have the root scanned again", strconv.Quote(path), perr)}
	}
	return m.Compression, true, nil
}
