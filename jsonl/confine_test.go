package jsonl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// requireLayout asserts a layout refusal with exactly the text want.
func requireLayout(t *testing.T, err error, want string) {
	t.Helper()
	requireCode(t, err, wire.ErrLayout)
	require.NotErrorIs(t, err, wire.ErrNotFound)
	require.EqualError(t, err, want)
}

// unrelatedStillServed asserts that session "keep" (cwd /w) is served as if
// nothing were damaged, through a store whose root check has not run yet:
// read, inspect, write open (as repair does), and the creation of a new id.
func unrelatedStillServed(t *testing.T, e *env) {
	t.Helper()
	want := completedTurn(t, 0, 1)
	st := e.newStore(nil)
	require.Equal(t, want, readAll(t, st, "keep"))
	st = e.newStore(nil)
	insp, err := st.Inspect(bg, "keep")
	require.NoError(t, err)
	require.Equal(t, want, insp.Events)
	st = e.newStore(nil)
	w := openWrite(t, st, "keep")
	require.NoError(t, w.Close(bg))
	st = e.newStore(nil)
	h := create(t, st, header("brand-new", "/w"))
	require.NoError(t, h.Flush(bg))
	require.NoError(t, h.Close(bg))
}

// listRows returns the List rows by id (damaged rows by path when they
// have no id).
func listRows(t *testing.T, st *jsonl.Store) map[string]jsonl.Snapshot {
	t.Helper()
	list, err := st.List(bg)
	require.NoError(t, err)
	rows := map[string]jsonl.Snapshot{}
	for _, r := range list {
		key := r.Header.ID
		if key == "" {
			key = r.Path
		}
		rows[key] = r
	}
	return rows
}

// TestDamagedArtifactConcernsItsSessionOnly: a symlink or a FIFO where a
// session's log or lease should be is refused for that session, while every
// other session, the creation of new ones and List go on; List shows the
// damaged session with its error. A FIFO is never opened in a way that
// blocks.
func TestDamagedArtifactConcernsItsSessionOnly(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		for _, tc := range []struct {
			name  string
			file  string
			plant func(t *testing.T, path string)
			want  string // %q is the damaged path
		}{
			{"symlinked log", generationName(comp), func(t *testing.T, path string) {
				outside := filepath.Join(t.TempDir(), "outside.log")
				writeFile(t, outside, encodeLog(t, comp, headerLine(header("bad", "/w"))))
				require.NoError(t, os.Symlink(outside, path))
			}, "session artifact %q is a symbolic link; refusing to follow it"},
			{"FIFO log", generationName(comp), func(t *testing.T, path string) {
				require.NoError(t, syscall.Mkfifo(path, 0o600))
			}, "session artifact %q is not a regular file"},
			{"symlinked lease", "session.lock", func(t *testing.T, path string) {
				outside := filepath.Join(t.TempDir(), "outside.lock")
				writeFile(t, outside, []byte(`{"handle":"x"}`))
				require.NoError(t, os.Symlink(outside, path))
			}, "session lease %q is a symbolic link; refusing to follow it"},
			{"FIFO lease", "session.lock", func(t *testing.T, path string) {
				require.NoError(t, syscall.Mkfifo(path, 0o600))
			}, "session lease %q is not a regular file"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e, pending := populated(t, comp, nil)
				require.NoError(t, pending.Close(bg))
				dir := sessionDir(t, e.root, "/w", "bad")
				require.NoError(t, os.MkdirAll(dir, 0o700))
				if tc.file == "session.lock" {
					writeFile(t, filepath.Join(dir, generationName(comp)), encodeLog(t, comp, headerLine(header("bad", "/w"))))
				}
				path := filepath.Join(dir, tc.file)
				tc.plant(t, path)
				want := fmt.Sprintf(tc.want, path)

				done := make(chan struct{})
				go func() {
					defer close(done)
					unrelatedStillServed(t, e)
					st := e.newStore(nil)
					for _, access := range []jsonl.Access{jsonl.AccessRead, jsonl.AccessWrite} {
						_, err := st.Open(bg, "bad", access, jsonl.OpenOptions{HandleID: newHandleID()})
						requireLayout(t, err, want)
					}
					_, err := st.Inspect(bg, "bad")
					requireLayout(t, err, want)
					_, err = st.Stat(bg, "bad")
					requireLayout(t, err, want)
					requireLayout(t, st.Delete(bg, "bad"), want)
					_, err = st.Create(bg, header("bad", "/w"), jsonl.CreateOptions{HandleID: newHandleID()})
					requireLayout(t, err, want)

					rows := listRows(t, e.newStore(nil))
					require.Nil(t, rows["keep"].Problem)
					require.Nil(t, rows["brand-new"].Problem)
					bad := rows["bad"]
					require.NotNil(t, bad.Problem, "the damaged session is listed with its problem")
					require.Equal(t, want, bad.Problem.Reason)
					require.Equal(t, jsonl.Code("SessionLayoutConflict"), bad.Problem.Code)
					requireCode(t, bad.Problem, wire.ErrLayout)
					require.Equal(t, dir, bad.Path)
					require.Len(t, rows, 3)
				}()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Fatal("an operation blocked on the damaged artifact")
				}
				_, err := os.Lstat(path)
				require.NoError(t, err, "the damaged artifact is left as it was")
			})
		}
	})
}

// TestSymlinkedProjectDirectoryIsNotFollowed: a project directory that is a
// symbolic link is refused, never followed: no session outside the root is
// read, repaired, deleted or created through it, and List reports it.
func TestSymlinkedProjectDirectoryIsNotFollowed(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		require.NoError(t, pending.Close(bg))
		project, err := jsonl.ProjectKey("/elsewhere")
		require.NoError(t, err)
		outside := filepath.Join(t.TempDir(), "outside")
		victim := filepath.Join(outside, "victim", generationName(comp))
		writeFile(t, victim, encodeLog(t, comp, headerLine(header("victim", "/elsewhere")), lines(t, completedTurn(t, 0, 1)...)))
		link := filepath.Join(e.root, project)
		require.NoError(t, os.Symlink(outside, link))
		want := fmt.Sprintf("project directory %q is a symbolic link; refusing to follow it", link)

		unchanged(t, outside, func() {
			st := e.newStore(nil)
			for _, access := range []jsonl.Access{jsonl.AccessRead, jsonl.AccessWrite} {
				_, err := st.Open(bg, "victim", access, jsonl.OpenOptions{HandleID: newHandleID()})
				requireLayout(t, err, want)
			}
			_, err := st.Inspect(bg, "victim")
			requireLayout(t, err, want)
			requireLayout(t, st.Delete(bg, "victim"), want)
			_, err = st.Create(bg, header("planted", "/elsewhere"), jsonl.CreateOptions{HandleID: newHandleID()})
			requireLayout(t, err, want)
			_, err = st.ForceUnlock(bg, "victim")
			requireLayout(t, err, want)

			rows := listRows(t, e.newStore(nil))
			require.Nil(t, rows["keep"].Problem)
			row := rows[link]
			require.NotNil(t, row.Problem)
			require.Equal(t, want, row.Problem.Reason)
			require.Empty(t, row.Header.ID)
			require.Len(t, rows, 2)
		})
		require.FileExists(t, victim)
	})
}

// TestSymlinkedSessionDirectorySaysSo: a session directory that is a
// symbolic link is refused as one (not as "not a directory"), for that
// session only, and its target is left alone.
func TestSymlinkedSessionDirectorySaysSo(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		require.NoError(t, pending.Close(bg))
		outside := filepath.Join(t.TempDir(), "outside")
		target := filepath.Join(outside, generationName(comp))
		writeFile(t, target, encodeLog(t, comp, headerLine(header("linked", "/w")), lines(t, completedTurn(t, 0, 1)...)))
		link := sessionDir(t, e.root, "/w", "linked")
		require.NoError(t, os.Symlink(outside, link))
		want := fmt.Sprintf("session directory %q is a symbolic link; refusing to follow it", link)

		unchanged(t, outside, func() {
			unrelatedStillServed(t, e)
			st := e.newStore(nil)
			for _, access := range []jsonl.Access{jsonl.AccessRead, jsonl.AccessWrite} {
				_, err := st.Open(bg, "linked", access, jsonl.OpenOptions{HandleID: newHandleID()})
				requireLayout(t, err, want)
			}
			requireLayout(t, st.Delete(bg, "linked"), want)
			_, err := st.Create(bg, header("linked", "/w"), jsonl.CreateOptions{HandleID: newHandleID()})
			requireLayout(t, err, want)
			row := listRows(t, e.newStore(nil))["linked"]
			require.NotNil(t, row.Problem)
			require.Equal(t, want, row.Problem.Reason)
		})
	})
}

// TestSymlinkedStoreDirectoryIsNotFollowed: the root's own directories
// (revocations, create locks) are not followed either.
func TestSymlinkedStoreDirectoryIsNotFollowed(t *testing.T) {
	for _, name := range []string{".revocations", ".create-locks"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, jsonl.CompressionNone, nil)
			require.NoError(t, os.MkdirAll(e.root, 0o700))
			outside := t.TempDir()
			link := filepath.Join(e.root, name)
			require.NoError(t, os.Symlink(outside, link))
			_, err := e.store.Create(context.Background(), header("s", "/w"), jsonl.CreateOptions{HandleID: newHandleID()})
			requireLayout(t, err, fmt.Sprintf("store directory %q is a symbolic link; refusing to follow it", link))
			entries, err := os.ReadDir(outside)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing is written outside the root")
		})
	}
	t.Run(".deleted", func(t *testing.T) {
		e, pending := populated(t, jsonl.CompressionNone, nil)
		require.NoError(t, pending.Close(bg))
		outside := t.TempDir()
		link := filepath.Join(e.root, ".deleted")
		require.NoError(t, os.Symlink(outside, link))
		requireLayout(t, e.store.Delete(bg, "keep"), fmt.Sprintf("store directory %q is a symbolic link; refusing to follow it", link))
		entries, err := os.ReadDir(outside)
		require.NoError(t, err)
		require.Empty(t, entries, "no session is moved outside the root")
		require.Equal(t, completedTurn(t, 0, 1), readAll(t, e.store, "keep"))
	})
}

// TestForceUnlockClearsUnreadableLease: an empty or damaged session.lock
// names no handle; a forced unlock removes it all the same.
func TestForceUnlockClearsUnreadableLease(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		for name, body := range map[string]string{"empty": "", "truncated": `{"handle":"h`, "garbage": "\x00\x01 not json"} {
			t.Run(name, func(t *testing.T) {
				e, pending := populated(t, comp, nil)
				require.NoError(t, pending.Close(bg))
				lease := filepath.Join(sessionDir(t, e.root, "/w", "keep"), "session.lock")
				writeFile(t, lease, []byte(body))
				_, err := e.store.Inspect(bg, "keep")
				requireCode(t, err, wire.ErrCorrupt)
				require.ErrorContains(t, err, "corrupt session lease: ")

				removed, err := e.newStore(nil).ForceUnlock(bg, "keep")
				require.NoError(t, err)
				require.NotNil(t, removed)
				require.Contains(t, removed.Unreadable, "corrupt session lease: ")
				require.Empty(t, removed.HandleID)
				noSuchFile(t, lease)
				w := openWrite(t, e.store, "keep")
				require.NoError(t, w.Close(bg))
				require.Equal(t, completedTurn(t, 0, 1), readAll(t, e.store, "keep"))
			})
		}
		// A lease that is not a regular file is unlinked, never followed.
		for _, kind := range []string{"symlink", "fifo"} {
			t.Run(kind, func(t *testing.T) {
				e, pending := populated(t, comp, nil)
				require.NoError(t, pending.Close(bg))
				lease := filepath.Join(sessionDir(t, e.root, "/w", "keep"), "session.lock")
				outside := filepath.Join(t.TempDir(), "outside.lock")
				writeFile(t, outside, []byte(`{"handle":"elsewhere"}`))
				want := fmt.Sprintf("session lease %q is a symbolic link; refusing to follow it", lease)
				if kind == "symlink" {
					require.NoError(t, os.Symlink(outside, lease))
				} else {
					require.NoError(t, syscall.Mkfifo(lease, 0o600))
					want = fmt.Sprintf("session lease %q is not a regular file", lease)
				}
				removed, err := e.newStore(nil).ForceUnlock(bg, "keep")
				require.NoError(t, err)
				require.Equal(t, want, removed.Unreadable)
				noSuchFile(t, lease)
				require.Equal(t, []byte(`{"handle":"elsewhere"}`), readFile(t, outside))
				require.Equal(t, completedTurn(t, 0, 1), readAll(t, e.store, "keep"))
			})
		}
		// A never-written session whose lease is unreadable is erased.
		e := newEnv(t, comp, nil)
		dir := sessionDir(t, e.root, "", "pending")
		writeFile(t, filepath.Join(dir, "session.lock"), nil)
		removed, err := e.store.ForceUnlock(bg, "pending")
		require.NoError(t, err)
		require.NotEmpty(t, removed.Unreadable)
		noSuchFile(t, dir)
	})
}

// TestFilesBesideTheLogAreTolerated: files of other names beside the log (a
// quarantine copy of bytes a repair cut, named after the log and an offset;
// temp files) are not artifacts: the session, the root check and List
// ignore them.
func TestFilesBesideTheLogAreTolerated(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e, pending := populated(t, comp, nil)
		require.NoError(t, pending.Close(bg))
		dir := sessionDir(t, e.root, "/w", "keep")
		for _, other := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
			writeFile(t, filepath.Join(dir, generationName(other)+".broken-12"), []byte("cut bytes"))
		}
		writeFile(t, filepath.Join(dir, "session.0123456789ab.tmp"), nil)
		unrelatedStillServed(t, e)
		rows := listRows(t, e.newStore(nil))
		require.Nil(t, rows["keep"].Problem)
		require.Len(t, rows, 2)
	})
}
