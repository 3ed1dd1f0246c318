package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// openCwd opens the call's working directory as an os.Root, the boundary
// every file operation of the built-in tools goes through. A call without a
// working directory is refused with ErrOutsideCwd.
func openCwd(cwd string) (*os.Root, error) {
	if cwd == "" {
		return nil, fmt.Errorf("%w: this session has no working directory, so file tools are unavailable", ErrOutsideCwd)
	}
	root, err := os.OpenRoot(cwd)
	if err != nil {
		return nil, fmt.Errorf("cannot open the working directory %q: %w", cwd, err)
	}
	return root, nil
}

// statInCwd opens cwd as a root and stats the model's path p inside it,
// naming p as shown in its errors; a path reaching a denied one is refused
// first. It returns the root, which the caller
// closes, the path relative to it and the file's information.
func statInCwd(deny denyList, cwd, p, shown string) (*os.Root, string, fs.FileInfo, error) {
	rel, err := localPath(cwd, p)
	if err != nil {
		return nil, "", nil, err
	}
	if err := deny.check(cwd, rel, shown); err != nil {
		return nil, "", nil, err
	}
	root, err := openCwd(cwd)
	if err != nil {
		return nil, "", nil, err
	}
	info, err := root.Stat(rel)
	if err != nil {
		root.Close()
		return nil, "", nil, escapeError(shown, err)
	}
	return root, rel, info, nil
}

// localPath turns a path the model gave into a path relative to cwd. A
// relative path must stay inside cwd lexically; an absolute path is accepted
// only when it lies inside cwd. Symbolic links are checked by os.Root when
// the path is used (see escapeError).
func localPath(cwd, p string) (string, error) {
	if p == "" {
		p = "."
	}
	if filepath.IsAbs(p) {
		abs, err := filepath.Abs(cwd)
		if err != nil {
			return "", fmt.Errorf("cannot resolve the working directory %q: %w", cwd, err)
		}
		rel, err := filepath.Rel(abs, filepath.Clean(p))
		if err != nil || !filepath.IsLocal(rel) && rel != "." {
			return "", fmt.Errorf("%w: path %q is outside the working directory %s", ErrOutsideCwd, p, abs)
		}
		return rel, nil
	}
	if clean := filepath.Clean(p); clean != "." && !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%w: path %q leaves the working directory", ErrOutsideCwd, p)
	}
	return p, nil
}

// escapeError reports err, from an os.Root operation on p, as ErrOutsideCwd
// when os.Root refused p for leaving the root (through a symbolic link);
// other errors are returned with p in a plain text. os.Root's escape error is
// not exported, so it is recognised by its text.
func escapeError(p string, err error) error {
	if isEscape(err) {
		return fmt.Errorf("%w: path %q resolves outside the working directory (through a symbolic link)", ErrOutsideCwd, p)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%q does not exist: %w", p, fs.ErrNotExist)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%q: permission denied: %w", p, fs.ErrPermission)
	}
	return err
}

// isEscape reports whether err's chain holds os.Root's "path escapes from
// parent" error (it may be nested in several *fs.PathError).
func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		var pe *fs.PathError
		if !errors.As(e, &pe) {
			return false
		}
		if pe.Err.Error() == "path escapes from parent" {
			return true
		}
		e = pe
	}
	return false
}
