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
package crashfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/sessionflow/sessionflow/jsonl"
)

// ErrCrashed is returned by every operation from a crash until PowerLoss,
// and by any file opened before the last PowerLoss.
var ErrCrashed = errors.New("crashfs: machine crashed")

// Mode says which volatile changes survive a power loss.
type Mode int

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

// String names the mode.
func (m Mode) String() string {
	switch m {
	case LoseVolatile:
		return "lose"
	case KeepVolatile:
		return "keep"
	case Mixed:
		return "mixed"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Policy selects the state a power loss leaves.
type Policy struct {
	// Mode says which volatile changes survive.
	Mode Mode
	// Seed drives the choices of Mixed.
	Seed uint64
}

// String names the policy.
func (p Policy) String() string {
	if p.Mode == Mixed {
		return fmt.Sprintf("mixed/%d", p.Seed)
	}
	return p.Mode.String()
}

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

// node is a file, directory or symbolic link of the model.
type node struct {
	kind fs.FileMode // 0 (regular), fs.ModeDir or fs.ModeSymlink
	perm fs.FileMode

	// Regular files.
	synced   []byte // what the last fsync covered
	detached []byte // the data when the last name went away; nil while named
	nlink    int

	// Directories: the entries now and those the last fsync covered.
	entries, syncedEntries map[string]*node

	// Symbolic links.
	target string
}

func newDir(perm fs.FileMode) *node {
	return &node{kind: fs.ModeDir, perm: perm, entries: map[string]*node{}, syncedEntries: map[string]*node{}}
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

// scan builds a fully synced model of the real tree.
func (f *FS) scan() error {
	fi, err := os.Lstat(f.root)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: "crashfs", Path: f.root, Err: syscall.ENOTDIR}
	}
	byIno := map[uint64]*node{}
	var walk func(path string, d *node) error
	walk = func(path string, d *node) error {
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := filepath.Join(path, e.Name())
			info, err := os.Lstat(p)
			if err != nil {
				return err
			}
			var n *node
			switch {
			case info.IsDir():
				n = newDir(info.Mode().Perm())
				if err := walk(p, n); err != nil {
					return err
				}
			case info.Mode()&fs.ModeSymlink != 0:
				t, err := os.Readlink(p)
				if err != nil {
					return err
				}
				n = &node{kind: fs.ModeSymlink, target: t}
			case info.Mode().IsRegular():
				ino := info.Sys().(*syscall.Stat_t).Ino
				if n = byIno[ino]; n == nil {
					data, err := os.ReadFile(p)
					if err != nil {
						return err
					}
					n = &node{perm: info.Mode().Perm(), synced: data}
					byIno[ino] = n
				}
				n.nlink++
			default:
				return fmt.Errorf("crashfs: %s: unsupported file type %v", p, info.Mode().Type())
			}
			d.entries[e.Name()] = n
			d.syncedEntries[e.Name()] = n
		}
		return nil
	}
	top := newDir(fi.Mode().Perm())
	if err := walk(f.root, top); err != nil {
		return err
	}
	f.top = top
	return nil
}

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

// unlinking captures the data of n from path before n's last name goes,
// so that a power loss can still bring the name back with that data.
func (f *FS) unlinking(n *node, path string) error {
	if n == nil || n.kind != 0 || n.nlink > 1 {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	n.detached = data
	return nil
}

func (n *node) dropLink() {
	if n != nil && n.kind == 0 {
		n.nlink--
	}
}

// OpenFile implements jsonl.FS. A write-only open is performed read-write,
// so that Sync can capture the data it makes durable.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkChange("open", name, flag&(os.O_CREATE|os.O_TRUNC) != 0); err != nil {
		return nil, err
	}
	parent, base, n := f.lookup(name)
	realFlag := flag
	if flag&(os.O_WRONLY|os.O_RDWR) == os.O_WRONLY {
		realFlag = flag&^os.O_WRONLY | os.O_RDWR
	}
	inner, err := jsonl.OSFS{}.OpenFile(name, realFlag, perm)
	if err != nil {
		return nil, err
	}
	if n == nil && parent != nil && flag&os.O_CREATE != 0 {
		n = &node{perm: perm.Perm(), nlink: 1}
		parent.entries[base] = n
	}
	file := &file{fs: f, inner: inner, node: n, gen: f.gen}
	f.open[file] = struct{}{}
	return file, nil
}

// Mkdir implements jsonl.FS.
func (f *FS) Mkdir(name string, perm os.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("mkdir", name); err != nil {
		return err
	}
	if err := os.Mkdir(name, perm); err != nil {
		return err
	}
	if parent, base, _ := f.lookup(name); parent != nil {
		parent.entries[base] = newDir(perm.Perm())
	}
	return nil
}

// Link implements jsonl.FS.
func (f *FS) Link(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("link", newname); err != nil {
		return err
	}
	if err := os.Link(oldname, newname); err != nil {
		return err
	}
	_, _, n := f.lookup(oldname)
	if parent, base, _ := f.lookup(newname); parent != nil && n != nil {
		parent.entries[base] = n
		n.nlink++
	}
	return nil
}

// Rename implements jsonl.FS.
func (f *FS) Rename(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("rename", newname); err != nil {
		return err
	}
	oldParent, oldBase, n := f.lookup(oldname)
	newParent, newBase, replaced := f.lookup(newname)
	if replaced != nil && replaced != n {
		if err := f.unlinking(replaced, newname); err != nil {
			return err
		}
	}
	if err := os.Rename(oldname, newname); err != nil {
		return err
	}
	if n == nil || oldParent == nil || newParent == nil || replaced == n {
		return nil
	}
	delete(oldParent.entries, oldBase)
	if replaced != nil {
		replaced.dropLink()
	}
	newParent.entries[newBase] = n
	return nil
}

// Remove implements jsonl.FS.
func (f *FS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("remove", name); err != nil {
		return err
	}
	parent, base, n := f.lookup(name)
	if n != nil {
		if err := f.unlinking(n, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Remove(name); err != nil {
		if n != nil && n.kind == 0 && n.nlink == 1 {
			n.detached = nil
		}
		return err
	}
	if parent != nil && n != nil {
		delete(parent.entries, base)
		n.dropLink()
	}
	return nil
}

// Stat implements jsonl.FS.
func (f *FS) Stat(name string) (os.FileInfo, error) {
	if err := f.checkOp("stat", name); err != nil {
		return nil, err
	}
	return os.Stat(name)
}

// Lstat implements jsonl.FS.
func (f *FS) Lstat(name string) (os.FileInfo, error) {
	if err := f.checkOp("lstat", name); err != nil {
		return nil, err
	}
	return os.Lstat(name)
}

// ReadDir implements jsonl.FS.
func (f *FS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := f.checkOp("readdir", name); err != nil {
		return nil, err
	}
	return os.ReadDir(name)
}

// file is an open file of the FS.
type file struct {
	fs    *FS
	inner jsonl.File
	node  *node // nil when untracked
	gen   int
}

// op counts a file operation and refuses it after a crash. A file opened
// before the last power loss belongs to a machine that no longer runs: its
// operations fail and are not counted.
func (h *file) op(op string) error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.gen != h.fs.gen {
		return &fs.PathError{Op: op, Path: h.inner.Name(), Err: ErrCrashed}
	}
	return h.fs.check(op, h.inner.Name())
}

func (h *file) Name() string { return h.inner.Name() }

func (h *file) Read(p []byte) (int, error) {
	if err := h.op("read"); err != nil {
		return 0, err
	}
	return h.inner.Read(p)
}

func (h *file) ReadAt(p []byte, off int64) (int, error) {
	if err := h.op("read"); err != nil {
		return 0, err
	}
	return h.inner.ReadAt(p, off)
}

func (h *file) Write(p []byte) (int, error) {
	if err := h.op("write"); err != nil {
		return 0, err
	}
	return h.inner.Write(p)
}

func (h *file) Truncate(size int64) error {
	if err := h.op("truncate"); err != nil {
		return err
	}
	return h.inner.Truncate(size)
}

func (h *file) Stat() (os.FileInfo, error) {
	if err := h.op("fstat"); err != nil {
		return nil, err
	}
	return h.inner.Stat()
}

func (h *file) Seek(offset int64, whence int) (int64, error) {
	if err := h.op("seek"); err != nil {
		return 0, err
	}
	return h.inner.Seek(offset, whence)
}

func (h *file) Flock(how int) error {
	if err := h.op("flock"); err != nil {
		return err
	}
	return h.inner.Flock(how)
}

// Sync makes the file's data, or a directory's entries, durable.
func (h *file) Sync() error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.gen != f.gen {
		return &fs.PathError{Op: "sync", Path: h.inner.Name(), Err: ErrCrashed}
	}
	if err := f.check("sync", h.inner.Name()); err != nil {
		return err
	}
	if err := h.inner.Sync(); err != nil {
		return err
	}
	n := h.node
	switch {
	case n == nil:
	case n.kind == fs.ModeDir:
		n.syncedEntries = make(map[string]*node, len(n.entries))
		for name, c := range n.entries {
			n.syncedEntries[name] = c
		}
	case n.kind == 0:
		fi, err := h.inner.Stat()
		if err != nil {
			return err
		}
		data := make([]byte, fi.Size())
		if _, err := h.inner.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		n.synced = data
	}
	return nil
}

// Close always closes the descriptor.
func (h *file) Close() error {
	f := h.fs
	f.mu.Lock()
	if _, tracked := f.open[h]; !tracked {
		stale := h.gen != f.gen
		f.mu.Unlock()
		if stale {
			return &fs.PathError{Op: "close", Path: h.inner.Name(), Err: ErrCrashed}
		}
		return &fs.PathError{Op: "close", Path: h.inner.Name(), Err: os.ErrClosed}
	}
	err := f.check("close", h.inner.Name())
	delete(f.open, h)
	f.mu.Unlock()
	cerr := h.inner.Close()
	if err != nil {
		return err
	}
	return cerr
}

// PowerLoss ends a crash (or crashes now): every open file is closed and
// fails from now on, the real tree is rewritten to a state the policy picks
// among those a power loss could leave, and that state becomes the new
// durable baseline. The operation count starts again at 0 and no crash is
// armed. It returns one line per volatile change and what became of it, for
// test failure messages.
func (f *FS) PowerLoss(p Policy) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashed = true
	for h := range f.open {
		_ = h.inner.Close()
	}
	f.open = map[*file]struct{}{}
	f.gen++

	c := &chooser{policy: p, rng: rand.New(rand.NewPCG(p.Seed, 0x5eed)), data: map[*node][]byte{}}
	if err := c.currentPaths(f.root, f.top); err != nil {
		return nil, err
	}
	survivors := c.tree(f.root, f.top)
	if err := c.pickData(f.root, survivors); err != nil {
		return nil, err
	}

	entries, err := os.ReadDir(f.root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(f.root, e.Name())); err != nil {
			return nil, err
		}
	}
	if err := c.build(f.root, survivors, map[*node]string{}); err != nil {
		return nil, err
	}
	if err := f.scan(); err != nil {
		return nil, err
	}
	f.n, f.crashAt, f.crashed, f.records = 0, -1, false, nil
	return c.report, nil
}

// chooser picks the surviving state.
type chooser struct {
	policy Policy
	rng    *rand.Rand
	paths  map[*node][]string // the current real paths of each named file
	data   map[*node][]byte   // chosen data of each surviving file
	report []string
}

// survivor is a surviving entry; dirs carry their surviving entries.
type survivor struct {
	n        *node
	children map[string]*survivor
}

func (c *chooser) currentPaths(path string, d *node) error {
	if c.paths == nil {
		c.paths = map[*node][]string{}
	}
	for name, n := range d.entries {
		p := filepath.Join(path, name)
		switch n.kind {
		case fs.ModeDir:
			if err := c.currentPaths(p, n); err != nil {
				return err
			}
		case 0:
			c.paths[n] = append(c.paths[n], p)
		}
	}
	return nil
}

// keep decides whether a volatile change survives.
func (c *chooser) keep() bool {
	switch c.policy.Mode {
	case KeepVolatile:
		return true
	case Mixed:
		return c.rng.IntN(2) == 1
	}
	return false
}

// tree picks the surviving entries of directory d at path, in name order
// so that a seed always makes the same choices.
func (c *chooser) tree(path string, d *node) map[string]*survivor {
	names := make([]string, 0, len(d.entries)+len(d.syncedEntries))
	for name := range d.entries {
		names = append(names, name)
	}
	for name := range d.syncedEntries {
		if _, ok := d.entries[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := map[string]*survivor{}
	for _, name := range names {
		p := filepath.Join(path, name)
		synced, current := d.syncedEntries[name], d.entries[name]
		n := synced
		if synced != current {
			if c.keep() {
				n = current
			}
			c.report = append(c.report, fmt.Sprintf("%s: volatile name %s", p, describeChoice(synced, current, n)))
		}
		if n == nil {
			continue
		}
		s := &survivor{n: n}
		if n.kind == fs.ModeDir {
			s.children = c.tree(p, n)
		}
		out[name] = s
	}
	return out
}

func describeChoice(synced, current, chosen *node) string {
	what := func(n *node) string {
		if n == nil {
			return "absent"
		}
		return "present"
	}
	if synced != nil && current != nil {
		if chosen == current {
			return "replacement kept"
		}
		return "replacement lost"
	}
	if chosen == current {
		return what(synced) + " -> " + what(current) + " kept"
	}
	return what(synced) + " -> " + what(current) + " lost"
}

// fileData picks the surviving data of a file, once per file.
func (c *chooser) fileData(path string, n *node) ([]byte, error) {
	if d, ok := c.data[n]; ok {
		return d, nil
	}
	current := n.detached
	names := c.paths[n]
	if len(names) > 0 {
		d, err := os.ReadFile(names[0])
		if err != nil {
			return nil, err
		}
		current = d
		sort.Strings(names)
		path = strings.Join(names, " = ")
	}
	chosen := n.synced
	if string(current) != string(n.synced) {
		switch c.policy.Mode {
		case KeepVolatile:
			chosen = current
		case Mixed:
			extends := len(current) > len(n.synced) && string(current[:len(n.synced)]) == string(n.synced)
			switch k := c.rng.IntN(3); {
			case k == 1:
				chosen = current
			case k == 2 && extends && len(current)-len(n.synced) > 1:
				chosen = current[:len(n.synced)+1+c.rng.IntN(len(current)-len(n.synced)-1)]
			}
		}
		c.report = append(c.report, fmt.Sprintf("%s: volatile data, %d synced bytes, %d now, %d kept", path, len(n.synced), len(current), len(chosen)))
	}
	c.data[n] = chosen
	return chosen, nil
}

// pickData chooses the data of every surviving file while the current
// tree still exists.
func (c *chooser) pickData(path string, entries map[string]*survivor) error {
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := entries[name]
		p := filepath.Join(path, name)
		switch s.n.kind {
		case fs.ModeDir:
			if err := c.pickData(p, s.children); err != nil {
				return err
			}
		case 0:
			if _, err := c.fileData(p, s.n); err != nil {
				return err
			}
		}
	}
	return nil
}

// build writes the surviving tree under path; files already written under
// another name are hard-linked.
func (c *chooser) build(path string, entries map[string]*survivor, written map[*node]string) error {
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := entries[name]
		p := filepath.Join(path, name)
		switch s.n.kind {
		case fs.ModeDir:
			if err := os.Mkdir(p, s.n.perm|0o700); err != nil {
				return err
			}
			if err := c.build(p, s.children, written); err != nil {
				return err
			}
		case fs.ModeSymlink:
			if err := os.Symlink(s.n.target, p); err != nil {
				return err
			}
		default:
			if first, ok := written[s.n]; ok {
				if err := os.Link(first, p); err != nil {
					return err
				}
				continue
			}
			if err := os.WriteFile(p, c.data[s.n], s.n.perm|0o600); err != nil {
				return err
			}
			written[s.n] = p
		}
	}
	return nil
}
