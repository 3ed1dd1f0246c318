package jsonl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// createLocksDir holds the per-id create locks (docs/DECISIONS.md D13).
const createLocksDir = ".create-locks"

// lockCreate takes the root-wide create lock of session id, across
// processes, and returns its release. Create holds it from the check that no
// project directory holds the id until its own lease is published, so that
// two creators of one id with different working directories (different
// project directories) cannot both pass the check: a session id lives in at
// most one project directory.
//
// The lock is an flock on <root>/.create-locks/<hash of id>. The kernel
// drops it when its holder dies, so a crash mid-create never blocks the id;
// the file a crashed holder leaves is taken over by the next creator. The
// holder unlinks the file before it unlocks; a waiter that locked an
// unlinked file sees that its path names another inode (or none) and opens
// the path again.
func (s *Store) lockCreate(ctx context.Context, id string) (func(), error) {
	dir, err := s.rootDir(createLocksDir)
	if err != nil {
		return nil, err
	}
	if err := s.mkdirAll(dir); err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(id))
	path := filepath.Join(dir, hex.EncodeToString(sum[:16]))
	for {
		f, err := s.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|openFlags, 0o600)
		if err != nil {
			if errors.Is(err, unix.ELOOP) {
				return nil, symlinkError("create lock", path)
			}
			return nil, err
		}
		fi, err := f.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = notRegularError("create lock", path)
		}
		if err == nil {
			err = s.flock(ctx, f)
		}
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		pi, err := s.fs.Lstat(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			_ = f.Close()
			return nil, err
		}
		if err != nil || !os.SameFile(fi, pi) {
			_ = f.Close() // closing drops the flock
			continue
		}
		return func() {
			_ = s.fs.Remove(path)
			_ = f.Close()
		}, nil
	}
}
