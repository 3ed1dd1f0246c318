package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
)

// The lock probe of these tests runs this test binary as the second
// process: TestCheckFSLockHelperProcess acts as `starter log check-fs-lock
// PATH` when CHECKFS_LOCK_PATH is set, so the second process runs the
// command's own code.
const envLockPath = "CHECKFS_LOCK_PATH"

func TestCheckFSLockHelperProcess(t *testing.T) {
	path := os.Getenv(envLockPath)
	if path == "" {
		return // not the helper process
	}
	os.Exit(runContext(context.Background(), []string{"log", checkFSLockCmd, path}, nil, os.Stdout, os.Stderr))
}

// helperLock is lockInOtherProcess with this test binary as the other
// process.
func helperLock(ctx context.Context, path string) (bool, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCheckFSLockHelperProcess$")
	cmd.Env = append(os.Environ(), envLockPath+"="+path)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("%w: %s", err, errOut.String())
	}
	switch s := strings.TrimSpace(out.String()); s {
	case "acquired":
		return true, nil
	case "busy":
		return false, nil
	default:
		return false, fmt.Errorf("helper answered %q", s)
	}
}

// results maps each check to its error text ("" when ok).
func results(t *testing.T, rep fsReport) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, ch := range rep.Checks {
		require.Equal(t, ch.OK, ch.Error == "", ch.Name)
		m[ch.Name] = ch.Error
	}
	return m
}

func checkOf(t *testing.T, rep fsReport, name string) fsCheck {
	t.Helper()
	for _, ch := range rep.Checks {
		if ch.Name == name {
			return ch
		}
	}
	t.Fatalf("no check %q in %+v", name, rep.Checks)
	return fsCheck{}
}

var allChecks = []string{"root", "mkdir", "excl-create", "write-fsync", "read-after-write", "link-no-overwrite", "dir-fsync", "rename", "flock-two-processes", "cleanup"}

func requireOnlyFailure(t *testing.T, rep fsReport, failed string, want error, msg string) {
	t.Helper()
	require.False(t, rep.OK)
	var names []string
	for _, ch := range rep.Checks {
		names = append(names, ch.Name)
		if ch.Name == failed {
			require.False(t, ch.OK, ch.Name)
			require.ErrorIs(t, ch.err, want)
			require.Equal(t, msg, ch.Error)
			continue
		}
		require.True(t, ch.OK, "%s: %s", ch.Name, ch.Error)
	}
	require.Equal(t, allChecks, names)
}

// requireNoProbe checks that the root holds nothing after the run.
func requireNoProbe(t *testing.T, root string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestCheckFSPassesOnALocalDir(t *testing.T) {
	root := t.TempDir()
	rep := (&fsChecker{fs: jsonl.OSFS{}, lock: helperLock}).run(context.Background(), root)
	require.True(t, rep.OK, "%+v", rep.Checks)
	m := results(t, rep)
	require.Len(t, m, len(allChecks))
	for _, name := range allChecks {
		require.Equal(t, "", m[name], name)
	}
	requireNoProbe(t, root)
}

// noLockFS hands out files whose Flock does nothing: the other process
// then takes the lock "held" by this one, and the check must say so.
type noLockFS struct{ jsonl.OSFS }

type noLockFile struct{ jsonl.File }

func (noLockFile) Flock(int) error { return nil }

func (f noLockFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noLockFile{file}, nil
}

func TestCheckFSFailsWhenTheLockDoesNotExclude(t *testing.T) {
	root := t.TempDir()
	rep := (&fsChecker{fs: noLockFS{}, lock: helperLock}).run(context.Background(), root)
	requireOnlyFailure(t, rep, "flock-two-processes", errLockNotExclusive, "another process took the lock this process holds")
	requireNoProbe(t, root)
}

// A lock the other process cannot take even after release fails the
// check's second half.
func TestCheckFSFailsWhenTheLockIsNeverReleased(t *testing.T) {
	root := t.TempDir()
	busy := func(context.Context, string) (bool, error) { return false, nil }
	rep := (&fsChecker{fs: jsonl.OSFS{}, lock: busy}).run(context.Background(), root)
	requireOnlyFailure(t, rep, "flock-two-processes", errLockNotReleased, "another process could not take the lock after this process released it")
}

// overwriteLinkFS links by renaming over the target, as a filesystem whose
// link replaces would.
type overwriteLinkFS struct{ jsonl.OSFS }

func (overwriteLinkFS) Link(oldname, newname string) error { return os.Rename(oldname, newname) }

func TestCheckFSFailsWhenLinkOverwrites(t *testing.T) {
	root := t.TempDir()
	rep := (&fsChecker{fs: overwriteLinkFS{}, lock: helperLock}).run(context.Background(), root)
	requireOnlyFailure(t, rep, "link-no-overwrite", errLinkOverwrote, "link onto an existing name succeeded instead of failing with EEXIST")
}

// noExclFS drops O_EXCL, as NFSv2 does.
type noExclFS struct{ jsonl.OSFS }

func (f noExclFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	return f.OSFS.OpenFile(name, flag&^os.O_EXCL, perm)
}

func TestCheckFSFailsWithoutExclusiveCreate(t *testing.T) {
	root := t.TempDir()
	rep := (&fsChecker{fs: noExclFS{}, lock: helperLock}).run(context.Background(), root)
	require.False(t, rep.OK)
	ch := checkOf(t, rep, "excl-create")
	require.ErrorIs(t, ch.err, errExclOverwrote)
	require.Equal(t, "O_EXCL create of an existing file succeeded", ch.Error)
	require.True(t, checkOf(t, rep, "cleanup").OK)
	requireNoProbe(t, root)
}

// noDirSyncFS fails fsync of a directory with EINVAL, as some network
// filesystems do.
type noDirSyncFS struct{ jsonl.OSFS }

type noSyncFile struct{ jsonl.File }

func (noSyncFile) Sync() error { return &os.PathError{Op: "sync", Path: "dir", Err: syscall.EINVAL} }

func (f noDirSyncFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if fi, err := file.Stat(); err == nil && fi.IsDir() {
		return noSyncFile{file}, nil
	}
	return file, nil
}

func TestCheckFSFailsWithoutDirectoryFsync(t *testing.T) {
	root := t.TempDir()
	rep := (&fsChecker{fs: noDirSyncFS{}, lock: helperLock}).run(context.Background(), root)
	require.False(t, rep.OK)
	ch := checkOf(t, rep, "dir-fsync")
	require.ErrorIs(t, ch.err, syscall.EINVAL)
	require.Equal(t, "fsync of a directory: sync dir: invalid argument", ch.Error)
	// The cleanup fsyncs the root as well.
	require.ErrorIs(t, checkOf(t, rep, "cleanup").err, syscall.EINVAL)
	require.True(t, checkOf(t, rep, "flock-two-processes").OK)
}

func TestCheckFSRootMissingOrNotADirectory(t *testing.T) {
	dir := t.TempDir()
	rep := (&fsChecker{fs: jsonl.OSFS{}, lock: helperLock}).run(context.Background(), filepath.Join(dir, "absent"))
	require.False(t, rep.OK)
	require.Len(t, rep.Checks, 1)
	require.ErrorIs(t, rep.Checks[0].err, errRootMissing)

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	rep = (&fsChecker{fs: jsonl.OSFS{}, lock: helperLock}).run(context.Background(), file)
	require.False(t, rep.OK)
	require.Len(t, rep.Checks, 1)
	require.True(t, errors.Is(rep.Checks[0].err, errRootNotDir))
}
