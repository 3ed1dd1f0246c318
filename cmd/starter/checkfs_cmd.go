package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/jsonl"
)

// errCheckFSFailed is the error of a `log check-fs` run with a failed check.
var errCheckFSFailed = errors.New("check-fs failed")

// checkFSLockCmd is the hidden subcommand the lock check runs in a second
// process.
const checkFSLockCmd = "check-fs-lock"

// checkDescriptions say what a passed check established.
var checkDescriptions = map[string]string{
	"root":                "the root is a directory",
	"mkdir":               "a probe directory is created in the root",
	"excl-create":         "O_EXCL create refuses an existing file with EEXIST",
	"write-fsync":         "a written file is fsynced",
	"read-after-write":    "a file reopened reads back what was written",
	"link-no-overwrite":   "link(2) publishes a new name and refuses an existing one with EEXIST",
	"dir-fsync":           "a directory is fsynced",
	"rename":              "rename moves a file, the old name is gone",
	"flock-two-processes": "a held flock excludes another process, which takes it once released",
	"cleanup":             "the probe files and directory are removed",
}

func newLogCheckFSCmd(a *app, sf *storeFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check-fs",
		Short: "Check that the root's filesystem provides what the store relies on",
		Long: `Check that the filesystem of the root (a local disk or a shared mount)
provides what the store relies on: O_EXCL create, link(2) that refuses an
existing name (the no-overwrite publication of leases and logs), fsync of a
file and of a directory, rename, read-after-write, and flock exclusion across
two processes (a second starter process must fail to take a lock this one
holds, and take it once released). The checks run in a probe directory
.check-fs-<random> under the root, removed at the end; the root itself is not
changed and no store is opened.

One line per check: ok or FAIL with the reason; --json prints one JSON object
{"root", "ok", "checks": [{"name", "ok", "error"}]}. The exit status is 1 when
any check fails. docs/SCALING.md says what each check means on NFS and SMB.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := a.storeRoot(sf)
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(root)
			if err != nil {
				return err
			}
			c := &fsChecker{fs: jsonl.OSFS{}, lock: lockInOtherProcess}
			rep := c.run(cmd.Context(), abs)
			if asJSON {
				err = writeJSON(a.stdout, rep)
			} else {
				err = renderFSReport(a.stdout, rep)
			}
			if err != nil {
				return err
			}
			if !rep.OK {
				return fmt.Errorf("%w: %d of %d checks failed on %s", errCheckFSFailed, failedChecks(rep), len(rep.Checks), abs)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// renderFSReport writes one line per check.
func renderFSReport(w io.Writer, rep fsReport) error {
	var b strings.Builder
	for _, ch := range rep.Checks {
		if ch.OK {
			fmt.Fprintf(&b, "ok   %-19s %s\n", ch.Name, checkDescriptions[ch.Name])
		} else {
			fmt.Fprintf(&b, "FAIL %-19s %s\n", ch.Name, ch.Error)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func failedChecks(rep fsReport) int {
	n := 0
	for _, ch := range rep.Checks {
		if !ch.OK {
			n++
		}
	}
	return n
}

// Answers of the lock subcommand on its standard output.
const (
	lockAcquired = "acquired"
	lockBusy     = "busy"
)

// lockInOtherProcess runs `starter log check-fs-lock PATH` (this very
// executable) and reads its answer.
func lockInOtherProcess(ctx context.Context, path string) (bool, error) {
	exe, err := os.Executable()
	if err != nil {
		return false, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "log", checkFSLockCmd, path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("%s log %s: %w: %s", exe, checkFSLockCmd, err, strings.TrimSpace(stderr.String()))
	}
	switch out := strings.TrimSpace(stdout.String()); out {
	case lockAcquired:
		return true, nil
	case lockBusy:
		return false, nil
	default:
		return false, fmt.Errorf("%s log %s answered %q", exe, checkFSLockCmd, out)
	}
}

// newLogCheckFSLockCmd is the second process of the lock check: it tries
// the lock on PATH once, through the store's filesystem seam, and prints
// "acquired" (and releases it) or "busy".
func newLogCheckFSLockCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    checkFSLockCmd + " PATH",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			f, err := jsonl.OSFS{}.OpenFile(args[0], os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			err = f.Flock(unix.LOCK_EX | unix.LOCK_NB)
			switch {
			case errors.Is(err, unix.EWOULDBLOCK):
				_, err = fmt.Fprintln(a.stdout, lockBusy)
				return err
			case err != nil:
				return err
			}
			if err := f.Flock(unix.LOCK_UN); err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, lockAcquired)
			return err
		},
	}
}
