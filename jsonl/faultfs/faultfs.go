// Package faultfs wraps a jsonl.FS so tests can fail any filesystem
// operation by its index or kind, or simulate a crash, in the manner of
// pebble's vfs/errorfs. Every call through the FS or one of its files counts
// as one operation; indexes start at 0 after New or Reset.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 3,
// beside the store it serves: it may import jsonl, wire, internal/lib/... and
// session.
package faultfs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/sessionflow/sessionflow/jsonl"
)

// ErrCrashed is returned by every operation after a simulated crash.
var ErrCrashed = errors.New("faultfs: process crashed")

// Op is a kind of filesystem operation.
type Op string

// Operation kinds.
const (
	OpOpen     Op = "open"
	OpMkdir    Op = "mkdir"
	OpLink     Op = "link"
	OpRename   Op = "rename"
	OpRemove   Op = "remove"
	OpStat     Op = "stat"
	OpLstat    Op = "lstat"
	OpReadDir  Op = "readdir"
	OpRead     Op = "read"
	OpWrite    Op = "write"
	OpSync     Op = "sync"
	OpTruncate Op = "truncate"
	OpClose    Op = "close"
	OpFstat    Op = "fstat"
	OpSeek     Op = "seek"
	OpFlock    Op = "flock"
)

// Record is one operation as seen by the FS.
type Record struct {
	// Index is the operation's index.
	Index int
	// Op is its kind and Path its target.
	Op   Op
	Path string
	// Injected is the error returned instead of performing it, if any.
	Injected error
}

// Rule selects operations to fail.
type Rule struct {
	// Index matches the operation with this index; -1 matches any.
	Index int
	// Op matches this kind; "" matches any.
	Op Op
	// PathContains matches paths containing it; "" matches any.
	PathContains string
	// Err is returned instead of performing the operation.
	Err error
	// Times is how many matches fail before the rule expires; 0 = unlimited.
	Times int
	// Crash makes the matching operation and every later one fail with
	// ErrCrashed without being performed.
	Crash bool
}

// FS is a fault-injecting jsonl.FS.
type FS struct {
	inner jsonl.FS

	mu      sync.Mutex
	n       int
	rules   []*Rule
	records []Record
	crashed bool
}

// New wraps inner (jsonl.OSFS{} when nil).
func New(inner jsonl.FS) *FS {
	if inner == nil {
		inner = jsonl.OSFS{}
	}
	return &FS{inner: inner}
}

// Reset clears the counter, the rules, the records and a crash.
func (f *FS) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n, f.rules, f.records, f.crashed = 0, nil, nil, false
}

// Add installs a rule.
func (f *FS) Add(r Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &r)
}

// InjectAt fails operation index i with err.
func (f *FS) InjectAt(i int, err error) { f.Add(Rule{Index: i, Err: err}) }

// CrashAt makes operation i and every later operation fail with ErrCrashed.
func (f *FS) CrashAt(i int) { f.Add(Rule{Index: i, Crash: true}) }

// Count is the number of operations since New or Reset.
func (f *FS) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// Records returns the operations seen since New or Reset.
func (f *FS) Records() []Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Record(nil), f.records...)
}

// Crashed reports whether a crash rule fired.
func (f *FS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// check counts an operation and returns the error to inject, if any.
func (f *FS) check(op Op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	idx := f.n
	f.n++
	var inj error
	if f.crashed {
		inj = ErrCrashed
	}
	for _, r := range f.rules {
		if inj != nil {
			break
		}
		if (r.Index >= 0 && r.Index != idx) || (r.Op != "" && r.Op != op) || (r.PathContains != "" && !strings.Contains(path, r.PathContains)) {
			continue
		}
		if r.Times < 0 {
			continue
		}
		if r.Times > 0 {
			r.Times--
			if r.Times == 0 {
				r.Times = -1
			}
		}
		if r.Crash {
			f.crashed = true
			inj = ErrCrashed
		} else {
			inj = &os.PathError{Op: string(op), Path: path, Err: r.Err}
		}
	}
	f.records = append(f.records, Record{Index: idx, Op: op, Path: path, Injected: inj})
	return inj
}

// String summarizes the records, one per line, for test failure messages.
func (f *FS) String() string {
	var b strings.Builder
	for _, r := range f.Records() {
		fmt.Fprintf(&b, "%d %s %s", r.Index, r.Op, r.Path)
		if r.Injected != nil {
			fmt.Fprintf(&b, " -> %v", r.Injected)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// OpenFile implements jsonl.FS.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// Mkdir implements jsonl.FS.
func (f *FS) Mkdir(name string, perm os.FileMode) error {
	if err := f.check(OpMkdir, name); err != nil {
		return err
	}
	return f.inner.Mkdir(name, perm)
}

// Link implements jsonl.FS.
func (f *FS) Link(oldname, newname string) error {
	if err := f.check(OpLink, newname); err != nil {
		return err
	}
	return f.inner.Link(oldname, newname)
}

// Rename implements jsonl.FS.
func (f *FS) Rename(oldname, newname string) error {
	if err := f.check(OpRename, newname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

// Remove implements jsonl.FS.
func (f *FS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// Stat implements jsonl.FS.
func (f *FS) Stat(name string) (os.FileInfo, error) {
	if err := f.check(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

// Lstat implements jsonl.FS.
func (f *FS) Lstat(name string) (os.FileInfo, error) {
	if err := f.check(OpLstat, name); err != nil {
		return nil, err
	}
	return f.inner.Lstat(name)
}

// ReadDir implements jsonl.FS.
func (f *FS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := f.check(OpReadDir, name); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(name)
}

type faultFile struct {
	jsonl.File
	fs *FS
}

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

// Write fails whole when injected; a torn write can be simulated with a
// rule on OpWrite followed by writing a prefix in the test itself.
func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Stat() (os.FileInfo, error) {
	if err := f.fs.check(OpFstat, f.Name()); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

func (f *faultFile) Seek(offset int64, whence int) (int64, error) {
	if err := f.fs.check(OpSeek, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Seek(offset, whence)
}

func (f *faultFile) Flock(how int) error {
	if err := f.fs.check(OpFlock, f.Name()); err != nil {
		return err
	}
	return f.File.Flock(how)
}

// Close always closes the descriptor, so injected close errors leak nothing.
func (f *faultFile) Close() error {
	err := f.fs.check(OpClose, f.Name())
	cerr := f.File.Close()
	if err != nil {
		return err
	}
	return cerr
}
