package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
	"github.com/sessionflow/sessionflow/jsonl"
)

// Failures of `log check-fs`, matched with errors.Is on a check's error.
var (
	// errRootMissing: the root does not exist.
	errRootMissing = errors.New("the root does not exist")
	// errRootNotDir: the root is not a directory.
	errRootNotDir = errors.New("the root is not a directory")
	// errNoProbeDir: the probe directory could not be created, so the
	// check could not run.
	errNoProbeDir = errors.New("not run: no probe directory")
	// errExclOverwrote: an O_EXCL create of an existing file succeeded.
	errExclOverwrote = errors.New("O_EXCL create of an existing file succeeded")
	// errLinkOverwrote: link(2) onto an existing name succeeded.
	errLinkOverwrote = errors.New("link onto an existing name succeeded instead of failing with EEXIST")
	// errReadMismatch: a file read back differs from what was written.
	errReadMismatch = errors.New("read back other bytes than were written")
	// errRenameLeft: the old name of a renamed file still exists.
	errRenameLeft = errors.New("the old name still exists after rename")
	// errLockNotExclusive: another process took a lock this one held.
	errLockNotExclusive = errors.New("another process took the lock this process holds")
	// errLockNotReleased: another process could not take a released lock.
	errLockNotReleased = errors.New("another process could not take the lock after this process released it")
	// errProbeLeft: a probe file or the probe directory remains.
	errProbeLeft = errors.New("probe files remain after cleanup")
)

// lockProbe asks another process to try the lock on path once (LOCK_EX |
// LOCK_NB) and report whether it got it; it releases it at once.
type lockProbe func(ctx context.Context, path string) (acquired bool, err error)

// fsCheck is one line of `log check-fs`.
type fsCheck struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Error is the reason of a failure.
	Error string `json:"error,omitempty"`
	err   error
}

// fsReport is the outcome of `log check-fs`.
type fsReport struct {
	Root   string    `json:"root"`
	OK     bool      `json:"ok"`
	Checks []fsCheck `json:"checks"`
}

// fsChecker runs the checks through the store's filesystem seam, so that it
// exercises the calls the store makes (jsonl.FS, File.Flock with LOCK_EX |
// LOCK_NB as the store's lease and create locks take them).
type fsChecker struct {
	fs   jsonl.FS
	lock lockProbe
}

// run checks root and returns one line per check.
func (c *fsChecker) run(ctx context.Context, root string) fsReport {
	rep := fsReport{Root: root}
	add := func(name string, err error) {
		ch := fsCheck{Name: name, OK: err == nil, err: err}
		if err != nil {
			ch.Error = err.Error()
		}
		rep.Checks = append(rep.Checks, ch)
	}
	fi, err := c.fs.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = fmt.Errorf("%w: %s", errRootMissing, root)
	case err == nil && !fi.IsDir():
		err = fmt.Errorf("%w: %s", errRootNotDir, root)
	}
	add("root", err)
	if err != nil {
		return rep.done()
	}
	dir := filepath.Join(root, ".check-fs-"+randhex.String(8))
	err = c.fs.Mkdir(dir, 0o700)
	add("mkdir", err)
	if err != nil {
		skip := fmt.Errorf("%w: %w", errNoProbeDir, err)
		for _, name := range []string{"excl-create", "write-fsync", "read-after-write", "link-no-overwrite", "dir-fsync", "rename", "flock-two-processes"} {
			add(name, skip)
		}
		return rep.done()
	}
	a := filepath.Join(dir, "a")
	add("excl-create", c.exclCreate(a))
	body := []byte("sessionflow check-fs " + randhex.String(8) + "\n")
	add("write-fsync", c.writeFile(filepath.Join(dir, "w"), body))
	add("read-after-write", c.readBack(filepath.Join(dir, "w"), body))
	add("link-no-overwrite", c.linkNoOverwrite(dir))
	add("dir-fsync", c.syncDir(dir))
	add("rename", c.rename(dir))
	add("flock-two-processes", c.flockTwoProcesses(ctx, filepath.Join(dir, "lock")))
	add("cleanup", c.cleanup(root, dir))
	return rep.done()
}

func (r fsReport) done() fsReport {
	r.OK = true
	for _, ch := range r.Checks {
		r.OK = r.OK && ch.OK
	}
	return r
}

// exclCreate creates path with O_EXCL, then expects a second O_EXCL create
// to fail with EEXIST.
func (c *fsChecker) exclCreate(path string) error {
	f, err := c.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("O_EXCL create: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	f, err = c.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_ = f.Close()
		return errExclOverwrote
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("a second O_EXCL create failed with another error than EEXIST: %w", err)
	}
	return nil
}

// writeFile writes body to a new file and fsyncs it.
func (c *fsChecker) writeFile(path string, body []byte) error {
	f, err := c.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
		if err != nil {
			err = fmt.Errorf("fsync: %w", err)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readBack opens path afresh and expects body.
func (c *fsChecker) readBack(path string, body []byte) error {
	f, err := c.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, body) {
		return fmt.Errorf("%w: %d bytes written, %d read", errReadMismatch, len(body), len(got))
	}
	return nil
}

// linkNoOverwrite publishes a file under a new name with link(2), as the
// store publishes leases and logs, and expects a second link onto that name
// to fail with EEXIST and leave it as it was.
func (c *fsChecker) linkNoOverwrite(dir string) error {
	first, second, target := filepath.Join(dir, "l1"), filepath.Join(dir, "l2"), filepath.Join(dir, "published")
	if err := c.writeFile(first, []byte("first\n")); err != nil {
		return err
	}
	if err := c.writeFile(second, []byte("second\n")); err != nil {
		return err
	}
	if err := c.fs.Link(first, target); err != nil {
		return fmt.Errorf("link onto a new name: %w", err)
	}
	err := c.fs.Link(second, target)
	if err == nil {
		return errLinkOverwrote
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("link onto an existing name failed with another error than EEXIST: %w", err)
	}
	if err := c.readBack(target, []byte("first\n")); err != nil {
		return fmt.Errorf("the published file after a refused link: %w", err)
	}
	return nil
}

// syncDir fsyncs a directory, as the store does after publishing an entry.
func (c *fsChecker) syncDir(dir string) error {
	f, err := c.fs.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync of a directory: %w", err)
	}
	return nil
}

// rename moves a file and expects the old name gone and the content under
// the new one.
func (c *fsChecker) rename(dir string) error {
	from, to := filepath.Join(dir, "r1"), filepath.Join(dir, "r2")
	body := []byte("renamed\n")
	if err := c.writeFile(from, body); err != nil {
		return err
	}
	if err := c.fs.Rename(from, to); err != nil {
		return err
	}
	if _, err := c.fs.Lstat(from); !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			return fmt.Errorf("stat of the old name: %w", err)
		}
		return errRenameLeft
	}
	return c.readBack(to, body)
}

// flockTwoProcesses holds an exclusive flock on path and expects another
// process to fail to take it, then, once released, to take it.
func (c *fsChecker) flockTwoProcesses(ctx context.Context, path string) error {
	f, err := c.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Flock(unix.LOCK_EX | unix.LOCK_NB); err != nil {
		return fmt.Errorf("flock: %w", err)
	}
	got, err := c.lock(ctx, path)
	if err != nil {
		_ = f.Flock(unix.LOCK_UN)
		return fmt.Errorf("the other process: %w", err)
	}
	if got {
		_ = f.Flock(unix.LOCK_UN)
		return errLockNotExclusive
	}
	if err := f.Flock(unix.LOCK_UN); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	got, err = c.lock(ctx, path)
	if err != nil {
		return fmt.Errorf("the other process: %w", err)
	}
	if !got {
		return errLockNotReleased
	}
	return nil
}

// cleanup removes the probe files and directory, fsyncs the root and
// expects the probe directory gone.
func (c *fsChecker) cleanup(root, dir string) error {
	entries, err := c.fs.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if err := c.fs.Remove(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.fs.Remove(dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", errProbeLeft, err)
	}
	if _, err := c.fs.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", errProbeLeft, dir)
	}
	return c.syncDir(root)
}
