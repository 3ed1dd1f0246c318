package jsonl

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// FS is the filesystem seam of the store. Production uses OSFS; tests wrap it
// to inject an error at any operation or to simulate a crash (see package
// jsonl/faultfs), or to lose what no fsync covered at a power loss (see
// package jsonl/crashfs). Paths are absolute.
type FS interface {
	// OpenFile opens a file like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Mkdir creates one directory like os.Mkdir.
	Mkdir(name string, perm os.FileMode) error
	// Link creates newname as a hard link to oldname; it never replaces.
	Link(oldname, newname string) error
	// Rename renames like os.Rename (the summary sidecar, and a deleted
	// session directory moved out of its project directory).
	Rename(oldname, newname string) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Stat follows symlinks like os.Stat.
	Stat(name string) (os.FileInfo, error)
	// Lstat does not follow symlinks.
	Lstat(name string) (os.FileInfo, error)
	// ReadDir lists a directory sorted by name.
	ReadDir(name string) ([]os.DirEntry, error)
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	// Name is the path the file was opened with.
	Name() string
	// Sync flushes the file to stable storage (fsync).
	Sync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Stat describes the open file.
	Stat() (os.FileInfo, error)
	// Seek sets the offset for the next Read or Write.
	Seek(offset int64, whence int) (int64, error)
	// Flock applies or removes an advisory lock (unix.LOCK_EX|unix.LOCK_NB,
	// unix.LOCK_UN).
	Flock(how int) error
}

// OSFS is the real operating-system filesystem.
type OSFS struct{}

// DataSyncer is a File that can flush its data and the metadata needed to
// read that data back (its size) without the rest of its metadata (its
// times): fdatasync(2). The store's appends use it when a File has it
// (OSFS's files do) and Sync otherwise; a wrapper of a File that does not
// declare it is synced with Sync. New files and directories are always
// synced with Sync.
type DataSyncer interface {
	// SyncData flushes the file's data and its size to stable storage.
	SyncData() error
}

type osFile struct{ *os.File }

// SyncData calls fdatasync(2) on the descriptor, retrying on EINTR.
func (f osFile) SyncData() error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Fdatasync(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// Flock calls flock(2) on the descriptor, retrying on EINTR.
func (f osFile) Flock(how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// OpenFile opens a file with O_CLOEXEC (os does so by default).
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Mkdir is os.Mkdir.
func (OSFS) Mkdir(name string, perm os.FileMode) error { return os.Mkdir(name, perm) }

// Link is os.Link.
func (OSFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }

// Rename is os.Rename.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove is os.Remove.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// Stat is os.Stat.
func (OSFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

// Lstat is os.Lstat.
func (OSFS) Lstat(name string) (os.FileInfo, error) { return os.Lstat(name) }

// ReadDir is os.ReadDir.
func (OSFS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }
