// Package crashfs is a jsonl.FS for tests that models a machine losing
// power, in the manner of pebble's strict in-memory filesystem and of LazyFS.
//
// Every operation is performed on a real directory tree, so file identities
// (os.SameFile), flock(2) and directory listings behave exactly as the store
// sees them in production. Beside it, the FS keeps a model of what stable
// storage holds: for each file, the data its last fsync covered; for each
// directory, the entries its last fsync covered. A write, a truncation or a
// new name (create, mkdir, link, rename, remove) is volatile until the file,
// respectively the directory holding the name, is synced through a handle
// of this FS. PowerLoss then rewrites the tree to a state a power loss could
// leave: what was synced, plus (by the Policy) some, none or all of the
// volatile changes, with volatile appended data possibly cut at any length.
//
// CrashAt stops the process first, at a chosen operation index: that
// operation and every later one fail with ErrCrashed without being
// performed. Operations are counted from 0 after New or PowerLoss; every
// call through the FS or one of its files counts as one.
//
// Everything under root must change through the FS: PowerLoss rebuilds the
// tree from the model, so a name created behind its back is dropped (and
// data written behind its back counts as volatile).
//
// Limits of the model: data written through a descriptor after its file's
// last name was removed is not tracked; a directory's entries are durable
// only through a Sync of that directory (a file's fsync never persists its
// name); unsynced data is lost or kept as a prefix, never replaced by zeros;
// Mixed decides each volatile name on its own, so an unsynced rename may
// leave both names or neither, which journaling filesystems do not (a
// superset of the real outcomes).
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 3,
// beside the store it serves: it may import jsonl, wire, internal/lib/... and
// session.
package crashfs

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
)

// ErrCrashed is returned by every operation from a crash until PowerLoss,
// and by any file opened before the last PowerLoss.
var ErrCrashed = errors.New("crashfs: machine crashed")

// Modes.
const (
	// LoseVolatile keeps only what an fsync covered (pebble's
	// ResetToSyncedState).
	LoseVolatile Mode = iota
	// KeepVolatile keeps every change, as when only the process died.
	KeepVolatile
	// Mixed keeps each volatile name change or not, and each file's
	// volatile data whole, not at all or cut at a random length, by the
	// policy's seed.
	Mixed
)

// Record is one operation as seen by the FS.
type Record struct {
	// Index is the operation's index.
	Index int
	// Op is its kind ("open", "write", "sync", ...) and Path its target.
	Op   string
	Path string
	// Changes is set for an operation that can change the files, the
	// names or what is durable: an open that may create or truncate, a
	// mkdir, link, rename, remove, write, truncate or sync. A crash right
	// after any other operation leaves what a crash right before it leaves.
	Changes bool
	// Crashed is set when the operation failed with ErrCrashed.
	Crashed bool
}

// FS is the power-loss filesystem over one real directory.
type FS struct {
	root string

	mu      sync.Mutex
	top     *node
	n       int
	crashAt int
	crashed bool
	gen     int
	open    map[*file]struct{}
	records []Record
}

// New takes root, an existing directory, and treats everything under it as
// durable. Paths given to the FS must be absolute; only paths under root
// are modelled (others pass through untracked).
func New(root string) (*FS, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	f := &FS{root: root, crashAt: -1, open: map[*file]struct{}{}}
	if err := f.scan(); err != nil {
		return nil, err
	}
	return f, nil
}

// Root is the directory the FS models.
func (f *FS) Root() string { return f.root }

// CrashAt makes operation i and every later one fail with ErrCrashed
// without being performed.
func (f *FS) CrashAt(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashAt = i
}

// Crash makes every later operation fail with ErrCrashed.
func (f *FS) Crash() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashed = true
}

// Crashed reports whether the machine has crashed.
func (f *FS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// Count is the number of operations since New or the last PowerLoss.
func (f *FS) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// Records returns the operations since New or the last PowerLoss.
func (f *FS) Records() []Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Record(nil), f.records...)
}

// changing are the operation kinds that can change what a crash leaves.
var changing = map[string]bool{"mkdir": true, "link": true, "rename": true, "remove": true, "write": true, "truncate": true, "sync": true}

// check counts an operation; the caller holds f.mu.
func (f *FS) check(op, path string) error {
	return f.checkChange(op, path, changing[op])
}

// checkChange counts an operation that changes files, names or what is
// durable when changes is set.
func (f *FS) checkChange(op, path string, changes bool) error {
	idx := f.n
	f.n++
	if f.crashAt >= 0 && idx >= f.crashAt {
		f.crashed = true
	}
	f.records = append(f.records, Record{Index: idx, Op: op, Path: path, Changes: changes, Crashed: f.crashed})
	if f.crashed {
		return &fs.PathError{Op: op, Path: path, Err: ErrCrashed}
	}
	return nil
}

// checkOp counts an operation that does not touch the model.
func (f *FS) checkOp(op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.check(op, path)
}

// rel splits an absolute path under root into its components; ok is false
// for a path outside root.
func (f *FS) rel(name string) ([]string, bool) {
	r, err := filepath.Rel(f.root, filepath.Clean(name))
	if err != nil || r == ".." || strings.HasPrefix(r, "../") || filepath.IsAbs(r) {
		return nil, false
	}
	if r == "." {
		return nil, true
	}
	return strings.Split(r, "/"), true
}

// lookup resolves a path under root in the current model. It returns the
// directory holding the last component and that component (nil parent for
// root itself, or for a path outside root or not in the model).
func (f *FS) lookup(name string) (parent *node, base string, n *node) {
	parts, ok := f.rel(name)
	if !ok {
		return nil, "", nil
	}
	if len(parts) == 0 {
		return nil, "", f.top
	}
	d := f.top
	for _, p := range parts[:len(parts)-1] {
		c := d.entries[p]
		if c == nil || c.kind != fs.ModeDir {
			return nil, "", nil
		}
		d = c
	}
	base = parts[len(parts)-1]
	return d, base, d.entries[base]
}
