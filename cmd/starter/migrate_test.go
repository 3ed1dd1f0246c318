package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrateEraA imports Era A flat logs (FORMAT.md §8.3) into a root:
// the committed region up to the last turn/end becomes a v3 session, the
// crash tail and the sources stay behind, a non-v1 header and an id the root
// already holds are reported, and --dry-run writes nothing.
func TestMigrateEraA(t *testing.T) {
	for _, comp := range []string{"none", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			src := t.TempDir()
			turn := `{"type":"turn/start","seq":0,"time":1700000000000,"data":{"turn":1}}` + "\n" +
				`{"type":"turn/end","seq":1,"time":1700000000100,"data":{"turn":1,"reason":{"kind":"completed"}}}` + "\n"
			tail := `{"type":"turn/start","seq":2,"time":1700000000200,"data":{"turn":2}}` + "\n" + `{"type":"step/st`
			files := map[string]string{
				"cwd-0123456789ab/done.jsonl": `{"type":"session","version":1,"id":"done","createdAt":1700000000000,"cwd":"/work/a","parentSession":"p"}` + "\n" + turn + tail,
				"_no-cwd/empty.jsonl":         `{"type":"session","version":1,"id":"empty","createdAt":5}` + "\n" + `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n",
				"_no-cwd/v2.jsonl":            `{"type":"session","version":2,"id":"v2","createdAt":5}` + "\n",
				"_no-cwd/done.summary.json":   `{"updatedAt":1}`,
			}
			for name, body := range files {
				path := filepath.Join(src, name)
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
				require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
			}
			root := filepath.Join(t.TempDir(), "root")

			r := logCmd(t, root, comp, "", "migrate", "--era-a", src, "--dry-run")
			require.Equal(t, 1, r.code, r.stdout+r.stderr)
			require.Contains(t, r.stdout, "would import 2 of 3 Era A logs")
			require.Contains(t, r.stdout, `unsupported session format version 2 for "v2" (only v1 is supported)`)
			_, err := os.Stat(root)
			require.True(t, os.IsNotExist(err), "--dry-run created the root: %v", err)

			r = logCmd(t, root, comp, "", "migrate", "--era-a", src)
			require.Equal(t, 1, r.code, r.stdout+r.stderr)
			require.Contains(t, r.stdout, "imported 2 of 3 Era A logs")
			require.Contains(t, r.stdout, `session "done": imported`)
			require.Contains(t, r.stdout, "an uncommitted tail of "+strconv.Itoa(len(tail))+" bytes left behind")
			require.Contains(t, r.stderr, "import [3/3] ")

			cat := catLines(t, root, comp, "done")
			require.Equal(t, []string{
				`{"type":"session","version":3,"id":"done","createdAt":1700000000000,"cwd":"/work/a","parentSession":"p","isSeeded":false,"delegationDepth":0}`,
				strings.Split(turn, "\n")[0], strings.Split(turn, "\n")[1],
			}, cat)
			require.Equal(t, []string{`{"type":"session","version":3,"id":"empty","createdAt":5,"isSeeded":false,"delegationDepth":0}`}, catLines(t, root, comp, "empty"))
			for name, body := range files {
				got, err := os.ReadFile(filepath.Join(src, name))
				require.NoError(t, err)
				require.Equal(t, body, string(got), "the source %s changed", name)
			}

			// A second import finds the ids taken.
			r = logCmd(t, root, comp, "", "migrate", "--era-a", src)
			require.Equal(t, 1, r.code)
			require.Contains(t, r.stdout, `session "done" already exists`)
			mustFail(t, logCmd(t, root, comp, "", "migrate", "--all", "--era-a", src), 1, "exactly one of")
		})
	}
}
