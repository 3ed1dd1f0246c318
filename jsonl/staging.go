package jsonl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// stagedDir is the subdirectory of a session directory holding staged
// payloads (FORMAT.md §6.7). Its name is no generation, lease or sidecar
// name, so every lookup, listing, scan and layout check ignores it, and a
// delete moves it out with the rest of the session directory.
const stagedDir = "staged"

// maxStagedBytes bounds one staged payload.
const maxStagedBytes = 64 << 20

// ErrStagedConflict reports a Stage whose key already holds other bytes:
// another attempt staged first, and its payload stands (read it with
// Staged).
var ErrStagedConflict = errors.New("a different payload is already staged under this key")

// stagedName is the file name of key: the first 16 bytes of its SHA-256,
// in hex, so that any key (a model's call id) maps to a safe, bounded name.
func stagedName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// Stage stores body durably under key in the session's staging area: a
// payload produced outside the log (a finished tool call's result) that must
// survive a crash until it is committed to the log in its turn. The file is
// published as a log is (FORMAT.md §3.6): written to a temp file, fsynced,
// linked to its name without replacing anything, and the directory fsynced;
// when Stage returns nil the payload is durable. Staging the same bytes
// again succeeds without writing (a retried attempt); other bytes under a
// staged key fail with ErrStagedConflict and leave the staged payload.
//
// Stage is a mutation: it needs the write handle, runs under the lease
// check of every mutation (a handle that lost ownership cannot stage) and
// refuses a session that has no log yet. Crash assumptions: a crash before
// the directory fsync may lose the payload, never half of it (the name
// appears only once the complete, fsynced file is linked); a crash after
// Stage returned keeps it.
func (h *Handle) Stage(ctx context.Context, key string, body []byte) error {
	if len(body) > maxStagedBytes {
		return invalidArgument(h.ref.SessionID, fmt.Errorf("staged payload of %d bytes exceeds the limit of %d bytes", len(body), maxStagedBytes))
	}
	return h.staging(ctx, "stage", key, func(s *Store, dir string) error {
		if err := s.mkdirAll(dir); err != nil {
			return err
		}
		name := stagedName(key)
		err := s.publish(dir, name, body)
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		old, err := s.readFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if !bytes.Equal(old, body) {
			return fmt.Errorf("session %q: stage %q: %w", h.ref.SessionID, key, ErrStagedConflict)
		}
		// A retry: make sure the entry the first attempt linked is durable.
		return s.syncDir(dir)
	})
}

// Staged returns the payload staged under key; ok is false when none is.
// It needs the write handle and runs under the lease check, so that it
// sees every payload staged by any process holding the handle.
func (h *Handle) Staged(ctx context.Context, key string) (body []byte, ok bool, err error) {
	err = h.staging(ctx, "read staged", key, func(s *Store, dir string) error {
		b, err := s.readFile(filepath.Join(dir, stagedName(key)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		body, ok = b, true
		return nil
	})
	return body, ok, err
}

// Unstage removes the payload staged under key, once the log holds what it
// carried; removing an absent key is a no-op. The removal is not fsynced: a
// payload that reappears after a crash is one the log already holds, and
// whoever stages reads the log first.
func (h *Handle) Unstage(ctx context.Context, key string) error {
	return h.staging(ctx, "unstage", key, func(s *Store, dir string) error {
		if err := s.fs.Remove(filepath.Join(dir, stagedName(key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}

// staging runs fn on the session's staging directory under the session's
// slot and the lease's mutation lock.
func (h *Handle) staging(ctx context.Context, op, key string, fn func(s *Store, dir string) error) error {
	id := h.ref.SessionID
	if h.state().closed.Load() {
		return handleClosed(id, op)
	}
	if h.ref.Access != AccessWrite {
		return readOnly(id, op)
	}
	if key == "" {
		return invalidArgument(id, errors.New("staging key must not be empty"))
	}
	s := h.s
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := h.writer(ctx, op)
	if err != nil {
		return err
	}
	return s.withWriterLease(ctx, st, func() error {
		if err := s.refresh(st); err != nil {
			return err
		}
		if !st.materialized {
			return invalidArgument(id, fmt.Errorf("session %q: %s: the session has no log yet", id, op))
		}
		dir := filepath.Join(st.dir, stagedDir)
		if err := s.checkDir("staging directory", dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		} else if err != nil && op != "stage" {
			return nil // nothing was ever staged
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		return fn(s, dir)
	})
}
