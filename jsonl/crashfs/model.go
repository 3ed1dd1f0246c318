package crashfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

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
