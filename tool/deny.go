package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Codes and names of a refused path (docs/API.md "Tools", DECISIONS.md D69).
const (
	// CodePathDenied: the path reaches a directory the worker keeps for
	// itself (BuiltinOptions.Deny): the session store, the dev server's
	// state, the worker's own files.
	CodePathDenied = "PATH_DENIED"
	// NamePathDenied is its ErrorInfo name.
	NamePathDenied = "PathDeniedError"
)

// ErrPathDenied marks a path the built-in tools refuse because it reaches a
// denied directory. A Run error that wraps it becomes a PATH_DENIED result.
var ErrPathDenied = errors.New("path denied")

// denyList is the set of paths (directories or files) the built-in tools
// never reach, whatever the path's spelling: the path a model gives is
// resolved as the kernel would (symbolic links, ".."), and the result and
// each of its ancestors is compared with every denied path by name
// (absolute, symbolic links resolved, case folded) and, when both exist,
// by identity (device and inode, which catches a case-insensitive spelling
// and a bind mount of the same directory).
type denyList struct {
	paths []string
}

// newDenyList returns the deny list of paths; relative paths are taken
// from the worker's working directory.
func newDenyList(paths []string) denyList {
	var d denyList
	for _, p := range paths {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			d.paths = append(d.paths, abs)
		}
	}
	return d
}

// denied is one entry of the list as it is now.
type denied struct {
	names []string // the absolute path, and its resolved form when it exists
	info  fs.FileInfo
}

// snapshot stats the denied paths: they may appear after the tools were
// built (the store root is created by the first session).
func (d denyList) snapshot() []denied {
	out := make([]denied, 0, len(d.paths))
	for _, p := range d.paths {
		e := denied{names: []string{p}}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			e.names = append(e.names, real)
		}
		if info, err := os.Stat(p); err == nil {
			e.info = info
		}
		out = append(out, e)
	}
	return out
}

// check returns an ErrPathDenied error, naming shown, when the model's path
// rel (relative to cwd, as localPath returned it) reaches a denied path: it
// is one or lies inside one. Nothing is denied when the list is empty.
func (d denyList) check(cwd, rel, shown string) error {
	if len(d.paths) == 0 {
		return nil
	}
	real, err := resolveIn(cwd, rel)
	if err != nil {
		return err
	}
	snap := d.snapshot()
	if hit(snap, real) {
		return deniedError(shown)
	}
	return nil
}

// checkEntry reports whether the directory entry name of type typ in the
// directory dirReal (resolved, not denied itself) is, or leads to through
// a symbolic link, a denied path or a path inside one; list_dir marks those
// entries. The directory's ancestors were checked already, so an entry
// that is no link is compared alone.
func checkEntry(snap []denied, dirReal, name string, typ fs.FileMode) bool {
	p := filepath.Join(dirReal, name)
	if typ&fs.ModeSymlink != 0 {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return hit(snap, real)
		}
		return false
	}
	var info fs.FileInfo
	for _, e := range snap {
		for _, n := range e.names {
			if sameName(p, n) {
				return true
			}
		}
		if e.info == nil {
			continue
		}
		if info == nil {
			i, err := os.Lstat(p)
			if err != nil {
				return false
			}
			info = i
		}
		if os.SameFile(info, e.info) {
			return true
		}
	}
	return false
}

// hit reports whether real, an absolute resolved path, is a denied path
// or lies inside one: it or one of its ancestors is one by name or by
// identity.
func hit(snap []denied, real string) bool {
	for p := real; ; p = filepath.Dir(p) {
		var info fs.FileInfo
		statted := false
		for _, e := range snap {
			for _, n := range e.names {
				if sameName(p, n) {
					return true
				}
			}
			if e.info == nil {
				continue
			}
			if !statted {
				// A missing ancestor (of a file to create) has no identity.
				info, _ = os.Stat(p)
				statted = true
			}
			if info != nil && os.SameFile(info, e.info) {
				return true
			}
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
}

// sameName compares two absolute paths, case folded: a case-insensitive
// file system names one directory in many ways, and refusing a
// differently-cased twin on a case-sensitive one costs nothing.
func sameName(a, b string) bool { return strings.EqualFold(a, b) }

// resolveIn resolves rel inside cwd as the kernel would: component by
// component, each symbolic link replaced by its target and ".." taken from
// the resolved directory. The part from the first missing component on is
// joined as written. Only ENOENT means absent: any other failure is
// returned.
func resolveIn(cwd, rel string) (string, error) {
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", fmt.Errorf("cannot resolve the working directory %q: %w", cwd, err)
	}
	missing := false
	cur, err := filepath.EvalSymlinks(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// The tool reports the missing cwd itself; its name is still
		// checked.
		cur, missing = abs, true
	case err != nil:
		return "", fmt.Errorf("cannot resolve the working directory %q: %w", cwd, err)
	}
	for _, c := range strings.Split(filepath.ToSlash(rel), "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		if missing {
			cur = next
			continue
		}
		real, err := filepath.EvalSymlinks(next)
		switch {
		case err == nil:
			cur = real
		case errors.Is(err, fs.ErrNotExist):
			cur, missing = next, true
		default:
			return "", fmt.Errorf("cannot resolve %q: %w", rel, err)
		}
	}
	return cur, nil
}

func deniedError(shown string) error {
	return fmt.Errorf("%w: %q is reserved by the worker (its session store, server state or own files), which tools never reach", ErrPathDenied, shown)
}
