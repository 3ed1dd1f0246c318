package crashfs

import (
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/sessionflow/sessionflow/jsonl"
)

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

func (f *FS) Stat(name string) (os.FileInfo, error) {
	if err := f.checkOp("stat", name); err != nil {
		return nil, err
	}
	return os.Stat(name)
}

func (f *FS) Lstat(name string) (os.FileInfo, error) {
	if err := f.checkOp("lstat", name); err != nil {
		return nil, err
	}
	return os.Lstat(name)
}

func (f *FS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := f.checkOp("readdir", name); err != nil {
		return nil, err
	}
	return os.ReadDir(name)
}

type file struct {
	fs    *FS
	inner jsonl.File
	node  *node // nil when untracked
	gen   int
}

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
