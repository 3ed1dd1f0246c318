package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkFS runs `starter log check-fs --root root args...` as cmd
// prepares it and returns its output and exit status.
func checkFS(t *testing.T, prepare func(*exec.Cmd), root string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCheckFS(t, bin.starter, prepare, root, args...)
}

func runCheckFS(t *testing.T, exe string, prepare func(*exec.Cmd), root string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(exe, append([]string{"log", "check-fs", "--root", root}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if prepare != nil {
		prepare(cmd)
	}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	}
	t.Fatalf("running %s: %v", exe, err)
	return "", "", 0
}

func TestCheckFSPassesOnATempDir(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := checkFS(t, nil, root)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Empty(t, errOut)
	require.Equal(t, `ok   root                the root is a directory
ok   mkdir               a probe directory is created in the root
ok   excl-create         O_EXCL create refuses an existing file with EEXIST
ok   write-fsync         a written file is fsynced
ok   read-after-write    a file reopened reads back what was written
ok   link-no-overwrite   link(2) publishes a new name and refuses an existing one with EEXIST
ok   dir-fsync           a directory is fsynced
ok   rename              rename moves a file, the old name is gone
ok   flock-two-processes a held flock excludes another process, which takes it once released
ok   cleanup             the probe files and directory are removed
`, out)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, entries, "the probe files are removed")
}

type checkFSReport struct {
	Root   string `json:"root"`
	OK     bool   `json:"ok"`
	Checks []struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	} `json:"checks"`
}

func decodeCheckFS(t *testing.T, out string) checkFSReport {
	t.Helper()
	var rep checkFSReport
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep), out)
	return rep
}

func TestCheckFSJSON(t *testing.T) {
	root := t.TempDir()
	out, _, code := checkFS(t, nil, root, "--json")
	require.Equal(t, 0, code, out)
	rep := decodeCheckFS(t, out)
	require.Equal(t, root, rep.Root)
	require.True(t, rep.OK)
	var names []string
	for _, ch := range rep.Checks {
		require.True(t, ch.OK, ch.Name)
		require.Empty(t, ch.Error, ch.Name)
		names = append(names, ch.Name)
	}
	require.Equal(t, []string{"root", "mkdir", "excl-create", "write-fsync", "read-after-write", "link-no-overwrite", "dir-fsync", "rename", "flock-two-processes", "cleanup"}, names)
}

func TestCheckFSMissingRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "absent")
	out, errOut, code := checkFS(t, nil, root)
	require.Equal(t, 1, code)
	require.Equal(t, "FAIL root                the root does not exist: "+root+"\n", out)
	require.Equal(t, "starter: check-fs failed: 1 of 1 checks failed on "+root+"\n", errOut)
	_, err := os.Lstat(root)
	require.ErrorIs(t, err, os.ErrNotExist, "the check creates no root")
}

func TestCheckFSFileAsRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(root, []byte("x"), 0o600))
	out, errOut, code := checkFS(t, nil, root, "--json")
	require.Equal(t, 1, code)
	rep := decodeCheckFS(t, out)
	require.False(t, rep.OK)
	require.Len(t, rep.Checks, 1)
	require.Equal(t, "root", rep.Checks[0].Name)
	require.Equal(t, "the root is not a directory: "+root, rep.Checks[0].Error)
	require.Equal(t, "starter: check-fs failed: 1 of 1 checks failed on "+root+"\n", errOut)
}

// A read-only root fails at the probe directory, and every later check
// says it did not run. Root bypasses permission bits, so under root the
// command runs as the unprivileged user nobody.
func TestCheckFSReadOnlyRoot(t *testing.T) {
	base, err := os.MkdirTemp("", "checkfs-ro-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	exe := filepath.Join(base, "starter")
	copyFile(t, bin.starter, exe)
	root := filepath.Join(base, "ro")
	require.NoError(t, os.Mkdir(root, 0o555))
	require.NoError(t, os.Chmod(root, 0o555))
	var prepare func(*exec.Cmd)
	if os.Geteuid() == 0 {
		prepare = func(c *exec.Cmd) {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			c.Dir = base
		}
	}
	out, errOut, code := runCheckFS(t, exe, prepare, root)
	require.Equal(t, 1, code, out)
	const notRun = "not run: no probe directory: mkdir "
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 9, out)
	require.Equal(t, "ok   root                the root is a directory", lines[0])
	require.True(t, strings.HasPrefix(lines[1], "FAIL mkdir               mkdir "+root+"/.check-fs-"), lines[1])
	require.True(t, strings.HasSuffix(lines[1], ": permission denied"), lines[1])
	for i, name := range []string{"excl-create", "write-fsync", "read-after-write", "link-no-overwrite", "dir-fsync", "rename", "flock-two-processes"} {
		line := lines[2+i]
		require.True(t, strings.HasPrefix(line, "FAIL "+name), line)
		require.Contains(t, line, notRun+root+"/.check-fs-", line)
	}
	require.Equal(t, "starter: check-fs failed: 8 of 9 checks failed on "+root+"\n", errOut)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}
