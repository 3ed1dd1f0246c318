package jsonl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
)

// deletedDir holds session directories being deleted (docs/DECISIONS.md
// D14).
const deletedDir = ".deleted"

// Delete removes a session: its directory with the log, the sidecar, temp
// files and anything else in it. It refuses while a lease is held and is a
// no-op for an unknown id.
//
// A delete is all or nothing for every other operation: under a lease of its
// own it moves the session directory out of its project directory, into
// <root>/.deleted, with one rename, and only then removes the files. If the
// rename fails, the whole session stays as it was (and the delete's lease is
// withdrawn); once it succeeded, the session is gone for every operation,
// and a failure to remove its files is reported as such (the files stay in
// <root>/.deleted, which the next Delete of any id sweeps).
func (s *Store) Delete(ctx context.Context, id string) error {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	sd, found, err := s.locate(id)
	if err != nil {
		return err
	}
	s.sweepDeleted()
	if !found {
		return s.deleteSidecarOnly(id)
	}
	if sd.leased {
		return alreadyOwned(id)
	}
	trash, err := s.rootDir(deletedDir)
	if err != nil {
		return err
	}
	if err := s.mkdirAll(trash); err != nil {
		return err
	}
	// Hold a lease of our own while deleting so no writer can start.
	handle := "delete/" + randhex.String(8)
	if err := s.acquireLease(sd.dir, s.newLease(handle, Owner{})); err != nil {
		if errors.Is(err, errLeaseHeld) {
			return alreadyOwned(id)
		}
		return err
	}
	dest := filepath.Join(trash, randhex.String(16))
	if err := s.fs.Rename(sd.dir, dest); err != nil {
		if rerr := s.releaseLease(sd.dir, handle); rerr != nil {
			return &AggregateError{Message: fmt.Sprintf("session %q: delete failed and its lock release failed", id), Errors: []error{err, rerr}}
		}
		return fmt.Errorf("session %q: delete failed; the session is unchanged: %w", id, err)
	}
	err = s.syncDir(filepath.Dir(sd.dir))
	if serr := s.syncDir(trash); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("session %q: deleted, but making the deletion durable failed: %w", id, err)
	}
	if err := s.removeTree(dest); err != nil {
		return fmt.Errorf("session %q: deleted, but removing its files from %q failed (the next delete retries): %w", id, dest, err)
	}
	return s.syncDir(trash)
}

// sweepDeleted removes what earlier deletes left in <root>/.deleted,
// best-effort.
func (s *Store) sweepDeleted() {
	trash, err := s.rootDir(deletedDir)
	if err != nil {
		return
	}
	entries, err := s.fs.ReadDir(trash)
	if err != nil || len(entries) == 0 {
		return
	}
	for _, e := range entries {
		_ = s.removeTree(filepath.Join(trash, e.Name()))
	}
	_ = s.syncDir(trash)
}

// removeTree removes path and, for a real directory, everything in it. It
// never follows a symbolic link: a link is removed, not its target.
func (s *Store) removeTree(path string) error {
	fi, err := s.fs.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if fi.IsDir() {
		entries, err := s.fs.ReadDir(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		var errs []error
		for _, e := range entries {
			if err := s.removeTree(filepath.Join(path, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	if err := s.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// deleteSidecarOnly removes summary-only session directories of id (a
// summary written before any log) from every project directory.
func (s *Store) deleteSidecarOnly(id string) error {
	seg, err := EncodeSegment(id)
	if err != nil {
		return invalidArgument(id, err)
	}
	projects, err := s.projectDirs()
	if err != nil {
		return err
	}
	for _, p := range projects {
		dir := filepath.Join(p, seg)
		if err := s.checkSessionDir(id, dir); err != nil {
			continue // absent, or refused by the lookup before
		}
		if err := s.fs.Remove(filepath.Join(dir, summaryFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		_ = s.fs.Remove(dir)
	}
	return nil
}
