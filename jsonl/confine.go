package jsonl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/wire"
)

// The store reads and writes only inside its root (docs/DECISIONS.md D15):
// no path component below the root may be a symbolic link, every directory
// it walks is checked with Lstat, every file it opens is opened with
// O_NOFOLLOW, and a file opened to be read or written must be a regular
// file. Opening never blocks on a FIFO: opens carry O_NONBLOCK, and the
// file's type is checked on the open descriptor before any read or write.

// openFlags are added to every open of an existing store file.
const openFlags = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

// symlinkError reports a symbolic link found where the store expects a
// directory or a file of its own.
func symlinkError(kind, path string) *wire.StoreError {
	return &wire.StoreError{Code: CodeLayout, Path: path, Err: errSymlink, Message: fmt.Sprintf(
		"%s %s is a symbolic link; refusing to follow it", kind, strconv.Quote(path))}
}

// errSymlink is the cause of every symlink refusal.
var errSymlink = errors.New("symbolic link under the store root")

// notRegularError reports a FIFO, socket, device or directory where the
// store expects a regular file.
func notRegularError(kind, path string) *wire.StoreError {
	return &wire.StoreError{Code: CodeLayout, Path: path, Message: fmt.Sprintf(
		"%s %s is not a regular file", kind, strconv.Quote(path))}
}

// notDirError reports a non-directory where the store expects a directory.
func notDirError(kind, path string) *wire.StoreError {
	return &wire.StoreError{Code: CodeLayout, Path: path, Err: syscall.ENOTDIR, Message: fmt.Sprintf(
		"%s %s is not a directory", kind, strconv.Quote(path))}
}

// artifactKind names the store file at path for error messages.
func artifactKind(path string) string {
	switch filepath.Base(path) {
	case leaseFile:
		return "session lease"
	case summaryFile:
		return "session summary"
	}
	return "session artifact"
}

// openFile opens an existing store file without following a symbolic link
// and without blocking, and refuses anything but a regular file. It returns
// the open file's description.
func (s *Store) openFile(path string, flag int) (File, os.FileInfo, error) {
	f, err := s.fs.OpenFile(path, flag|openFlags, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			if fi, lerr := s.fs.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return nil, nil, symlinkError(artifactKind(path), path)
			}
		}
		if errors.Is(err, syscall.ENXIO) {
			// O_WRONLY|O_NONBLOCK on a FIFO without a reader.
			return nil, nil, notRegularError(artifactKind(path), path)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, notRegularError(artifactKind(path), path)
	}
	return f, fi, nil
}

// checkDir verifies with Lstat that path is a real directory. An absent
// directory is returned as the fs.ErrNotExist error.
func (s *Store) checkDir(kind, path string) error {
	fi, err := s.fs.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return symlinkError(kind, path)
	}
	if !fi.IsDir() {
		return notDirError(kind, path)
	}
	return nil
}

// dirKind names a directory below the root for error messages by its depth:
// project directories sit in the root, session directories in a project.
func (s *Store) dirKind(dir string) string {
	rel, err := filepath.Rel(s.root, dir)
	if err != nil {
		return "directory"
	}
	switch parts := strings.Split(rel, string(filepath.Separator)); {
	case len(parts) == 1 && isProjectDirName(parts[0]):
		return "project directory"
	case len(parts) == 1:
		return "store directory"
	case len(parts) == 2 && isProjectDirName(parts[0]):
		return "session directory"
	}
	return "directory"
}

// mkdirAll creates dir and its missing parents with mode 0700, fsyncing each
// parent after a creation. Components up to the root are followed as the
// operating system resolves them; every component below the root must be a
// real directory (an existing symbolic link is refused, not followed).
func (s *Store) mkdirAll(dir string) error {
	dir = filepath.Clean(dir)
	if dir == s.root {
		if err := s.mkdirAbove(dir); err != nil {
			return err
		}
		return s.checkRoot() // marks a root created here
	}
	if !strings.HasPrefix(dir, s.root+string(filepath.Separator)) {
		return s.mkdirAbove(dir)
	}
	err := s.checkDir(s.dirKind(dir), dir)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if err := s.mkdirAll(parent); err != nil {
		return err
	}
	if err := s.fs.Mkdir(dir, 0o700); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		// A concurrent creator made it: it must still be a real directory.
		if err := s.checkDir(s.dirKind(dir), dir); err != nil {
			return err
		}
		return nil
	}
	return s.syncDir(parent)
}

// mkdirAbove creates the root and its missing parents, following symbolic
// links as the operating system does (the root is the caller's choice).
func (s *Store) mkdirAbove(dir string) error {
	fi, err := s.fs.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := s.mkdirAbove(parent); err != nil {
			return err
		}
	}
	if err := s.fs.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return s.syncDir(parent)
}

// syncDir fsyncs a directory so entries created in it are durable. It never
// follows a symbolic link.
func (s *Store) syncDir(dir string) error {
	f, err := s.fs.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return symlinkError(s.dirKind(dir), dir)
		}
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// rootDir returns <root>/name, a directory of the store's own (revocations,
// create locks, deleted sessions), after checking that it is not a symbolic
// link. An absent directory is fine.
func (s *Store) rootDir(name string) (string, error) {
	dir := filepath.Join(s.root, name)
	if err := s.checkDir("store directory", dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return dir, nil
}
