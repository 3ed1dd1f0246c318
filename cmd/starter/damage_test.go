package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
)

// keepSession creates session "keep" (no cwd) with one appended event
// through the CLI.
func keepSession(t *testing.T, root, comp string) {
	t.Helper()
	mustOK(t, logCmd(t, root, comp, "", "create", "--id", "keep"))
	mustOK(t, logCmd(t, root, comp, jsonlOf(t, ev(t, "turn/start", 0, 1700000000000, `{"turn":1}`)), "append", "--id", "keep"))
}

// keepStillServed runs the commands of an unrelated session and a create.
func keepStillServed(t *testing.T, root, comp string) {
	t.Helper()
	require.Len(t, catLines(t, root, comp, "keep"), 2)
	mustOK(t, logCmd(t, root, comp, "", "inspect", "--id", "keep"))
	mustOK(t, logCmd(t, root, comp, "", "repair", "--id", "keep"))
	mustOK(t, logCmd(t, root, comp, "", "create", "--id", "new"))
}

// listJSON runs `log list --json` and returns its rows by id (by path when
// a row has no id).
func listJSON(t *testing.T, root, comp string) map[string]map[string]any {
	t.Helper()
	r := mustOK(t, logCmd(t, root, comp, "", "list", "--json"))
	rows := jsonLines[map[string]any](t, r.stdout)
	out := map[string]map[string]any{}
	for _, row := range rows {
		key, _ := row["id"].(string)
		if key == "" {
			key, _ = row["path"].(string)
		}
		out[key] = row
	}
	return out
}

func TestLogCommandsConfineDamageToItsSession(t *testing.T) {
	for _, comp := range compressions {
		for _, kind := range []string{"symlink", "fifo"} {
			t.Run(comp+"/"+kind, func(t *testing.T) {
				root := t.TempDir()
				keepSession(t, root, comp)
				path := logPath(t, root, comp, "bad")
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
				want := fmt.Sprintf("session artifact %q is a symbolic link; refusing to follow it", path)
				if kind == "symlink" {
					require.NoError(t, os.Symlink(logPath(t, root, comp, "keep"), path))
				} else {
					require.NoError(t, syscall.Mkfifo(path, 0o600))
					want = fmt.Sprintf("session artifact %q is not a regular file", path)
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					keepStillServed(t, root, comp)
					for _, sub := range []string{"cat", "inspect", "repair", "delete"} {
						mustFail(t, logCmd(t, root, comp, "", sub, "--id", "bad"), 1, want)
					}

					rows := listJSON(t, root, comp)
					require.Len(t, rows, 3)
					require.Nil(t, rows["keep"]["error"])
					require.Nil(t, rows["new"]["error"])
					require.Equal(t, map[string]any{"reason": want, "code": "SessionLayoutConflict"}, rows["bad"]["error"])
					require.Equal(t, filepath.Dir(path), rows["bad"]["path"])

					r := mustOK(t, logCmd(t, root, comp, "", "list"))
					lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
					require.Len(t, lines, 4)
					require.Regexp(t, `^ID +CWD +CREATED +SIZE +PENDING +REVISION +PARENT +ERROR$`, lines[0])
					require.Regexp(t, `^bad +- +- +- +- +- +- +`+regexp.QuoteMeta(want)+`$`, lines[1])
					require.Regexp(t, `^keep +- +\S+ +\d+ +false +\S+ +- +-$`, lines[2])
					require.Regexp(t, `^new +- +\S+ +\d+ +false +\S+ +- +-$`, lines[3])
				}()
				select {
				case <-done:
				case <-time.After(60 * time.Second):
					t.Fatal("a command blocked on the damaged artifact")
				}
			})
		}
	}
}

func TestLogCommandsRefuseSymlinkedDirectories(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			// A session that lives outside the root, in a project directory
			// a symbolic link points to.
			outsideRoot := t.TempDir()
			mustOK(t, logCmd(t, outsideRoot, comp, "", "create", "--id", "victim", "--cwd", "/elsewhere"))
			project, err := jsonl.ProjectKey("/elsewhere")
			require.NoError(t, err)
			victim := filepath.Join(outsideRoot, project)

			root := t.TempDir()
			keepSession(t, root, comp)
			link := filepath.Join(root, project)
			require.NoError(t, os.Symlink(victim, link))
			want := fmt.Sprintf("project directory %q is a symbolic link; refusing to follow it", link)
			for _, sub := range []string{"cat", "inspect", "repair", "delete"} {
				mustFail(t, logCmd(t, root, comp, "", sub, "--id", "victim"), 1, want)
			}
			require.Len(t, catLines(t, outsideRoot, comp, "victim"), 1, "the session outside the root is untouched")
			rows := listJSON(t, root, comp)
			require.Equal(t, want, rows[link]["error"].(map[string]any)["reason"])
			require.Nil(t, rows["keep"]["error"])
			require.NoError(t, os.Remove(link))

			// A symlinked session directory says that it is one.
			seg, err := jsonl.EncodeSegment("victim")
			require.NoError(t, err)
			link = filepath.Join(filepath.Dir(filepath.Dir(logPath(t, root, comp, "keep"))), seg)
			require.NoError(t, os.Symlink(filepath.Join(victim, seg), link))
			want = fmt.Sprintf("session directory %q is a symbolic link; refusing to follow it", link)
			for _, sub := range []string{"cat", "inspect", "repair", "delete"} {
				mustFail(t, logCmd(t, root, comp, "", sub, "--id", "victim"), 1, want)
			}
			require.Len(t, catLines(t, outsideRoot, comp, "victim"), 1)
			keepStillServed(t, root, comp)
		})
	}
}

func TestLogUnlockForceClearsUnreadableLease(t *testing.T) {
	for _, comp := range compressions {
		for name, body := range map[string]string{"empty": "", "corrupt": "{not json"} {
			t.Run(comp+"/"+name, func(t *testing.T) {
				root := t.TempDir()
				keepSession(t, root, comp)
				lease := filepath.Join(filepath.Dir(logPath(t, root, comp, "keep")), "session.lock")
				require.NoError(t, os.WriteFile(lease, []byte(body), 0o600))
				mustFail(t, logCmd(t, root, comp, "", "inspect", "--id", "keep"), 1, "corrupt session lease")
				// Without --force the owner cannot be checked: the lease names none.
				r := runCLI(t, "", "unlock", "--id", "keep", "--root", root, "--compression", comp)
				mustFail(t, r, 1, `session "keep": its lease cannot be read (corrupt session lease: `)
				require.Contains(t, r.stderr, "pass --force")
				require.FileExists(t, lease)

				r = mustOK(t, logCmd(t, root, comp, "", "unlock", "--id", "keep", "--force"))
				require.Regexp(t, `^removed lease of session "keep": an unreadable lease \(corrupt session lease: .+\)\n$`, r.stdout)
				_, err := os.Stat(lease)
				require.ErrorIs(t, err, os.ErrNotExist)
				mustOK(t, logCmd(t, root, comp, "", "repair", "--id", "keep"))

				// The lifecycle command's --force clears it the same way.
				require.NoError(t, os.WriteFile(lease, []byte(body), 0o600))
				r = mustOK(t, runCLI(t, "", "unlock", "--id", "keep", "--force", "--root", root, "--compression", comp))
				require.Contains(t, r.stdout, `removed lease of session "keep": an unreadable lease (corrupt session lease: `)
				_, err = os.Stat(lease)
				require.ErrorIs(t, err, os.ErrNotExist)
			})
		}
	}
}

func TestLogDeleteWithSubdirectoryLeavesNothing(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			keepSession(t, root, comp)
			dir := filepath.Dir(logPath(t, root, comp, "keep"))
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o600))
			require.Equal(t, "deleted session \"keep\"\n", mustOK(t, logCmd(t, root, comp, "", "delete", "--id", "keep")).stdout)
			_, err := os.Stat(dir)
			require.ErrorIs(t, err, os.ErrNotExist)
			mustFail(t, logCmd(t, root, comp, "", "inspect", "--id", "keep"), 1, `session "keep" not found`)
			mustOK(t, logCmd(t, root, comp, "", "create", "--id", "keep"))
			require.Len(t, catLines(t, root, comp, "keep"), 1)
		})
	}
}
