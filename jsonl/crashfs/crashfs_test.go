package crashfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/crashfs"
)

var (
	lose = crashfs.Policy{Mode: crashfs.LoseVolatile}
	keep = crashfs.Policy{Mode: crashfs.KeepVolatile}
)

// newFS returns a crashfs over a fresh directory holding the given durable
// files (name -> content).
func newFS(t *testing.T, files map[string]string) (*crashfs.FS, string) {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(data), 0o600))
	}
	f, err := crashfs.New(root)
	require.NoError(t, err)
	return f, root
}

// appendTo writes data at the end of path, creating it, and fsyncs the file
// when sync is set.
func appendTo(t *testing.T, fsys jsonl.FS, path, data string, sync bool) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	require.NoError(t, f.Close())
}

// syncDir fsyncs a directory through fsys.
func syncDir(t *testing.T, fsys jsonl.FS, dir string) {
	t.Helper()
	f, err := fsys.OpenFile(dir, os.O_RDONLY, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// powerLoss applies p and fails the test on error.
func powerLoss(t *testing.T, f *crashfs.FS, p crashfs.Policy) {
	t.Helper()
	_, err := f.PowerLoss(p)
	require.NoError(t, err)
}

// content returns a file's content, or "<absent>".
func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	require.NoError(t, err)
	return string(b)
}

func TestWriteWithoutFsyncIsLost(t *testing.T) {
	f, root := newFS(t, map[string]string{"log": "a"})
	path := filepath.Join(root, "log")
	appendTo(t, f, path, "bc", false)
	require.Equal(t, "abc", content(t, path), "the write is visible before the crash")
	powerLoss(t, f, lose)
	require.Equal(t, "a", content(t, path))
}

func TestWriteWithoutFsyncSurvivesAProcessCrash(t *testing.T) {
	f, root := newFS(t, map[string]string{"log": "a"})
	path := filepath.Join(root, "log")
	appendTo(t, f, path, "bc", false)
	powerLoss(t, f, keep)
	require.Equal(t, "abc", content(t, path))
}

func TestFsyncedWriteSurvives(t *testing.T) {
	f, root := newFS(t, map[string]string{"log": "a"})
	path := filepath.Join(root, "log")
	appendTo(t, f, path, "bc", true)
	appendTo(t, f, path, "de", false)
	powerLoss(t, f, lose)
	require.Equal(t, "abc", content(t, path))
}

func TestTruncateWithoutFsyncIsLost(t *testing.T) {
	f, root := newFS(t, map[string]string{"log": "hello"})
	path := filepath.Join(root, "log")
	h, err := f.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, h.Truncate(2))
	require.NoError(t, h.Close())
	powerLoss(t, f, lose)
	require.Equal(t, "hello", content(t, path))

	h, err = f.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, h.Truncate(2))
	require.NoError(t, h.Sync())
	require.NoError(t, h.Close())
	powerLoss(t, f, lose)
	require.Equal(t, "he", content(t, path))
}

func TestNewFileNeedsItsDirectoryFsync(t *testing.T) {
	f, root := newFS(t, nil)
	path := filepath.Join(root, "new")
	appendTo(t, f, path, "data", true)
	powerLoss(t, f, lose)
	require.Equal(t, "<absent>", content(t, path), "a file fsync does not persist the file's name")

	appendTo(t, f, path, "data", true)
	syncDir(t, f, root)
	powerLoss(t, f, lose)
	require.Equal(t, "data", content(t, path))
}

func TestNewNameWithUnsyncedDataKeepsTheNameOnly(t *testing.T) {
	f, root := newFS(t, nil)
	path := filepath.Join(root, "new")
	appendTo(t, f, path, "data", false)
	syncDir(t, f, root)
	powerLoss(t, f, lose)
	require.Equal(t, "", content(t, path), "the name is durable, the data is not")
}

func TestLinkNeedsADirectoryFsync(t *testing.T) {
	f, root := newFS(t, nil)
	tmp, final := filepath.Join(root, "tmp"), filepath.Join(root, "final")
	appendTo(t, f, tmp, "lease", true)
	syncDir(t, f, root)
	require.NoError(t, f.Link(tmp, final))
	powerLoss(t, f, lose)
	require.Equal(t, "<absent>", content(t, final))
	require.Equal(t, "lease", content(t, tmp))

	require.NoError(t, f.Link(tmp, final))
	syncDir(t, f, root)
	require.NoError(t, f.Remove(tmp))
	powerLoss(t, f, lose)
	require.Equal(t, "lease", content(t, final))
	require.Equal(t, "lease", content(t, tmp), "the unsynced remove of the temp name is lost")
	a, err := os.Stat(tmp)
	require.NoError(t, err)
	b, err := os.Stat(final)
	require.NoError(t, err)
	require.True(t, os.SameFile(a, b), "both names still name one file")
}

func TestRemoveNeedsADirectoryFsync(t *testing.T) {
	f, root := newFS(t, map[string]string{"lock": "owner"})
	path := filepath.Join(root, "lock")
	appendTo(t, f, path, " more", false)
	require.NoError(t, f.Remove(path))
	powerLoss(t, f, lose)
	require.Equal(t, "owner", content(t, path), "the name comes back with its synced data")

	require.NoError(t, f.Remove(path))
	powerLoss(t, f, keep)
	require.Equal(t, "<absent>", content(t, path))

	appendTo(t, f, path, "x", true)
	syncDir(t, f, root)
	require.NoError(t, f.Remove(path))
	syncDir(t, f, root)
	powerLoss(t, f, lose)
	require.Equal(t, "<absent>", content(t, path))
}

func TestRemovedFileKeptByAProcessCrashHasItsLastData(t *testing.T) {
	f, root := newFS(t, map[string]string{"a": "one"})
	path := filepath.Join(root, "a")
	appendTo(t, f, path, " two", false)
	require.NoError(t, f.Remove(path))
	// Only the data survives the process crash; the remove is lost by the
	// mixed policy for some seed, which then shows the last data or a part.
	seen := map[string]bool{}
	for seed := uint64(0); seed < 64; seed++ {
		g, groot := newFS(t, map[string]string{"a": "one"})
		gpath := filepath.Join(groot, "a")
		appendTo(t, g, gpath, " two", false)
		require.NoError(t, g.Remove(gpath))
		powerLoss(t, g, crashfs.Policy{Mode: crashfs.Mixed, Seed: seed})
		got := content(t, gpath)
		require.True(t, got == "<absent>" || strings.HasPrefix("one two", got) && strings.HasPrefix(got, "one"), "seed %d: %q", seed, got)
		seen[got] = true
	}
	require.True(t, seen["<absent>"] && seen["one"] && seen["one two"], "%v", seen)
	powerLoss(t, f, keep)
	require.Equal(t, "<absent>", content(t, path))
}

func TestRenameNeedsADirectoryFsync(t *testing.T) {
	f, root := newFS(t, map[string]string{"a": "A", "b": "B"})
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	require.NoError(t, f.Rename(a, b))
	powerLoss(t, f, lose)
	require.Equal(t, "A", content(t, a))
	require.Equal(t, "B", content(t, b), "the replaced file comes back")

	require.NoError(t, f.Rename(a, b))
	powerLoss(t, f, keep)
	require.Equal(t, "<absent>", content(t, a))
	require.Equal(t, "A", content(t, b))
}

func TestNewDirectoryNeedsItsParentFsync(t *testing.T) {
	f, root := newFS(t, nil)
	dir := filepath.Join(root, "d")
	path := filepath.Join(dir, "f")
	require.NoError(t, f.Mkdir(dir, 0o700))
	appendTo(t, f, path, "x", true)
	syncDir(t, f, dir)
	powerLoss(t, f, lose)
	require.NoDirExists(t, dir, "the directory's own fsync does not persist its name")

	require.NoError(t, f.Mkdir(dir, 0o700))
	appendTo(t, f, path, "x", true)
	syncDir(t, f, dir)
	syncDir(t, f, root)
	powerLoss(t, f, lose)
	require.Equal(t, "x", content(t, path))
}

func TestMixedKeepsLosesAndTearsVolatileData(t *testing.T) {
	const head, tail = "head-", "0123456789abcdefghijklmnopqrstuvwxyz"
	lengths := map[int]bool{}
	names := map[bool]bool{}
	for seed := uint64(0); seed < 64; seed++ {
		f, root := newFS(t, map[string]string{"log": head})
		path := filepath.Join(root, "log")
		appendTo(t, f, path, tail, false)
		appendTo(t, f, filepath.Join(root, "other"), "o", true)
		report, err := f.PowerLoss(crashfs.Policy{Mode: crashfs.Mixed, Seed: seed})
		require.NoError(t, err)
		got := content(t, path)
		require.True(t, strings.HasPrefix(got, head) && strings.HasPrefix(head+tail, got), "seed %d: %q is not a prefix between the synced and the written data", seed, got)
		lengths[len(got)] = true
		names[content(t, filepath.Join(root, "other")) != "<absent>"] = true
		require.NotEmpty(t, report)

		// The same seed makes the same choices.
		g, groot := newFS(t, map[string]string{"log": head})
		appendTo(t, g, filepath.Join(groot, "log"), tail, false)
		appendTo(t, g, filepath.Join(groot, "other"), "o", true)
		again, err := g.PowerLoss(crashfs.Policy{Mode: crashfs.Mixed, Seed: seed})
		require.NoError(t, err)
		require.Equal(t, got, content(t, filepath.Join(groot, "log")), "seed %d", seed)
		require.Len(t, again, len(report))
	}
	require.True(t, lengths[len(head)], "some seed loses the volatile data")
	require.True(t, lengths[len(head+tail)], "some seed keeps it")
	require.Greater(t, len(lengths), 3, "some seeds tear it at different lengths: %v", lengths)
	require.True(t, names[true] && names[false], "a volatile name is kept by some seeds and lost by others")
}

func TestCrashAtStopsTheMachineAtAnOperation(t *testing.T) {
	f, root := newFS(t, nil)
	f.CrashAt(2)
	require.NoError(t, f.Mkdir(filepath.Join(root, "a"), 0o700)) // op 0
	_, err := f.Stat(filepath.Join(root, "a"))                   // op 1
	require.NoError(t, err)
	err = f.Mkdir(filepath.Join(root, "b"), 0o700) // op 2: not performed
	require.ErrorIs(t, err, crashfs.ErrCrashed)
	require.NoDirExists(t, filepath.Join(root, "b"))
	_, err = f.Stat(filepath.Join(root, "a"))
	require.ErrorIs(t, err, crashfs.ErrCrashed, "every later operation fails")
	require.True(t, f.Crashed())
	require.Equal(t, 4, f.Count())
	recs := f.Records()
	require.Equal(t, "mkdir", recs[2].Op)
	require.True(t, recs[2].Crashed)
	require.False(t, recs[1].Crashed)
	require.True(t, recs[0].Changes, "a mkdir changes the tree")
	require.False(t, recs[1].Changes, "a stat changes nothing")
}

func TestOpensThatMayCreateCountAsChanges(t *testing.T) {
	f, root := newFS(t, map[string]string{"a": "x"})
	path := filepath.Join(root, "a")
	for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_CREATE, os.O_RDWR | os.O_TRUNC} {
		h, err := f.OpenFile(path, flag, 0o600)
		require.NoError(t, err)
		require.NoError(t, h.Close())
	}
	var changes []bool
	for _, r := range f.Records() {
		if r.Op == "open" {
			changes = append(changes, r.Changes)
		}
	}
	require.Equal(t, []bool{false, false, true, true}, changes)
}

func TestPowerLossClosesOpenFilesAndStartsAFreshBaseline(t *testing.T) {
	f, root := newFS(t, map[string]string{"log": "a"})
	path := filepath.Join(root, "log")
	h, err := f.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = h.Write([]byte("b"))
	require.NoError(t, err)
	powerLoss(t, f, keep)
	_, err = h.Write([]byte("c"))
	require.ErrorIs(t, err, crashfs.ErrCrashed, "a file of the crashed machine is gone")
	require.Error(t, h.Close())
	require.Equal(t, 0, f.Count(), "the count starts again")
	require.False(t, f.Crashed())
	// What survived is the new durable state.
	powerLoss(t, f, lose)
	require.Equal(t, "ab", content(t, path))
	appendTo(t, f, path, "c", true)
	require.Equal(t, "abc", content(t, path))
}

func TestHardLinksOfTheInitialTreeStayOneFile(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	require.NoError(t, os.WriteFile(a, []byte("x"), 0o600))
	require.NoError(t, os.Link(a, b))
	f, err := crashfs.New(root)
	require.NoError(t, err)
	appendTo(t, f, a, "y", true)
	powerLoss(t, f, lose)
	require.Equal(t, "xy", content(t, b))
	ai, err := os.Stat(a)
	require.NoError(t, err)
	bi, err := os.Stat(b)
	require.NoError(t, err)
	require.True(t, os.SameFile(ai, bi))
}
